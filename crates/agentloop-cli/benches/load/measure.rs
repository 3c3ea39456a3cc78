//! What the load bench reads off the processes and the machine: resident memory, CPU time,
//! the kernel's listen overflows.

use super::*;

/// The resident memory of process `pid`, in bytes (`VmRSS` of `/proc/PID/status`).
pub(super) fn rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "VmRSS:")
}

/// The part of it that maps files (`RssFile`): mostly the program's own code, clean pages the
/// kernel can drop and read again, shared with every process running the same binary.
pub(super) fn file_rss_bytes(pid: u32) -> Option<u64> {
    status_bytes(pid, "RssFile:")
}

fn status_bytes(pid: u32, field: &str) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|line| line.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// CPU time (user + system) process `pid` has used so far, in seconds.
pub(super) fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name, in parentheses, may hold spaces; utime and stime are the 12th and 13th
    // fields after it.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(ticks as f64 / clock_ticks_per_second())
}

pub(super) fn clock_ticks_per_second() -> f64 {
    static TICKS: std::sync::OnceLock<f64> = std::sync::OnceLock::new();
    *TICKS.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|output| String::from_utf8(output.stdout).ok())
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(100.0)
    })
}

/// The children of process `pid` (the server's MCP server).
pub(super) fn children(pid: u32) -> Vec<u32> {
    // Each thread lists the children it started: the server starts its MCP servers from a
    // worker thread, not its main one.
    let Ok(threads) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    threads
        .filter_map(|thread| std::fs::read_to_string(thread.ok()?.path().join("children")).ok())
        .flat_map(|children| {
            children
                .split_whitespace()
                .filter_map(|child| child.parse().ok())
                .collect::<Vec<u32>>()
        })
        .collect()
}

/// Busy and total CPU seconds of the whole machine so far (`/proc/stat`), all cores together.
pub(super) fn machine_cpu_seconds() -> (f64, f64) {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let ticks: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .skip(1)
        .filter_map(|value| value.parse().ok())
        .collect();
    let total: f64 = ticks.iter().take(8).sum();
    // Fields 4 and 5 (idle, iowait) are the time no process had work for a core.
    let waiting = ticks.get(3).unwrap_or(&0.0) + ticks.get(4).unwrap_or(&0.0);
    let per_second = clock_ticks_per_second();
    ((total - waiting) / per_second, total / per_second)
}

/// The context switches of process `pid`'s threads so far, voluntary (a thread that waited)
/// and not (a thread put aside for another), summed over the threads alive now
/// (`/proc/PID/task/TID/status`).
pub(super) fn context_switches(pid: u32) -> Switches {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Switches::default();
    };
    let count = |status: &str, field: &str| -> u64 {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|value| value.trim().parse().ok())
            .unwrap_or_default()
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .fold(Switches::default(), |sum, status| Switches {
            voluntary: sum.voluntary + count(&status, "voluntary_ctxt_switches:"),
            involuntary: sum.involuntary + count(&status, "nonvoluntary_ctxt_switches:"),
        })
}

#[derive(Clone, Copy, Default)]
pub(super) struct Switches {
    pub(super) voluntary: u64,
    pub(super) involuntary: u64,
}

/// The CPU seconds of the processes on the machine's cores during a wave, and of the whole
/// machine (a database server, or anything else running, included); the server's context
/// switches.
#[derive(Clone, Copy, Default)]
pub(super) struct CpuUse {
    pub(super) server: f64,
    pub(super) server_switches: Switches,
    pub(super) mcp_server: f64,
    pub(super) llm: f64,
    pub(super) client: f64,
    pub(super) machine_busy: f64,
    pub(super) machine_total: f64,
}

impl CpuUse {
    pub(super) fn now(server: u32, llm: u32) -> CpuUse {
        let (machine_busy, machine_total) = machine_cpu_seconds();
        CpuUse {
            machine_busy,
            machine_total,
            server: cpu_seconds(server).unwrap_or_default(),
            server_switches: context_switches(server),
            mcp_server: children(server).into_iter().filter_map(cpu_seconds).sum(),
            llm: cpu_seconds(llm).unwrap_or_default(),
            client: cpu_seconds(std::process::id()).unwrap_or_default(),
        }
    }

    pub(super) fn since(self, start: CpuUse) -> CpuUse {
        CpuUse {
            server: self.server - start.server,
            server_switches: Switches {
                voluntary: self
                    .server_switches
                    .voluntary
                    .saturating_sub(start.server_switches.voluntary),
                involuntary: self
                    .server_switches
                    .involuntary
                    .saturating_sub(start.server_switches.involuntary),
            },
            mcp_server: self.mcp_server - start.mcp_server,
            llm: self.llm - start.llm,
            client: self.client - start.client,
            machine_busy: self.machine_busy - start.machine_busy,
            machine_total: self.machine_total - start.machine_total,
        }
    }
}

/// Connections the kernel dropped since boot because a listen queue was full (all sockets of
/// the machine's network namespace).
pub(super) fn listen_overflows() -> u64 {
    let netstat = std::fs::read_to_string("/proc/net/netstat").unwrap_or_default();
    let mut tcp_ext = netstat.lines().filter(|line| line.starts_with("TcpExt:"));
    let (Some(names), Some(values)) = (tcp_ext.next(), tcp_ext.next()) else {
        return 0;
    };
    names
        .split_whitespace()
        .zip(values.split_whitespace())
        .find(|(name, _)| *name == "ListenOverflows")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0)
}

/// Samples the RSS of `pid` on a thread of its own (the runtime is busy with the wave) until
/// `stop`, keeping the peak.
pub(super) fn sample_rss(
    pid: u32,
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            if let Some(rss) = rss_bytes(pid) {
                peak.fetch_max(rss, Ordering::Relaxed);
            }
            std::thread::sleep(SAMPLE_EVERY);
        }
    })
}
