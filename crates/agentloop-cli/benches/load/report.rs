//! How the load bench shows a wave and the summary of all waves.

use super::*;

#[derive(Clone, Copy)]
pub(super) struct Percentiles {
    pub(super) p50: Duration,
    pub(super) p95: Duration,
    pub(super) p99: Duration,
}

impl Percentiles {
    /// Nearest-rank percentiles; zero when there is nothing to rank.
    pub(super) fn of(mut values: Vec<Duration>) -> Percentiles {
        values.sort();
        let rank = |p: f64| {
            if values.is_empty() {
                return Duration::ZERO;
            }
            let index = ((p * values.len() as f64).ceil() as usize).clamp(1, values.len()) - 1;
            values[index]
        };
        Percentiles {
            p50: rank(0.50),
            p95: rank(0.95),
            p99: rank(0.99),
        }
    }
}

impl fmt::Display for Percentiles {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} / {} / {}",
            millis(self.p50),
            millis(self.p95),
            millis(self.p99)
        )
    }
}

pub(super) fn millis(duration: Duration) -> String {
    let ms = duration.as_secs_f64() * 1000.0;
    if ms < 10.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.0} ms")
    }
}

pub(super) fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

pub(super) fn kib(bytes: u64) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

pub(super) fn print_wave(wave: &Wave, options: &Options) {
    let latency = options.latency;
    if options.sequential {
        println!("\n{} runs, one after another, {}", wave.runs, wave.system);
    } else {
        println!("\n{} runs at once, {}", wave.runs, wave.system);
    }
    println!(
        "  completed                 {} of {}",
        wave.completed, wave.runs
    );
    println!("  held at once (max)        {}", wave.held_at_once);
    println!(
        "  time to response headers  {}  (p50 / p95 / p99: connection, key, run registered)",
        wave.time_to_headers
    );
    if options.work.stream {
        println!(
            "  time to first event       {}  (p50 / p95 / p99: + session, run row, first step saved)",
            wave.time_to_first_event
        );
    }
    println!(
        "  added latency             {}  (run time − {} × {}: MCP calls, store writes, queueing)",
        wave.added_latency,
        options.work.tool_calls + 1,
        millis(latency)
    );
    if let Some(alone) = wave.llm_alone {
        let calls = options.work.tool_calls as u32 + 1;
        println!(
            "  the LLM alone             {alone}  (p50 / p95 / p99 of a call straight to the \
             scripted LLM from this client)"
        );
        println!(
            "  the runtime per LLM call  {}  (p50: (run − {calls} × the LLM alone) / {calls}; \
             tool calls and store writes included)",
            millis(llm_alone::runtime_per_call(
                wave.added_latency.p50,
                alone.p50,
                calls
            ))
        );
    }
    println!(
        "  wall time of the wave     {:.2} s",
        wave.wall.as_secs_f64()
    );
    if wave.preconnected {
        println!(
            "  server RSS                idle {} ({} of it the binary's code and other files), \
             with the connections open {} ({} each), peak {}: {} per run with its connection",
            mib(wave.idle_rss),
            mib(wave.idle_file_rss),
            mib(wave.connected_rss),
            kib(wave.memory_per_connection()),
            mib(wave.peak_rss),
            kib(wave.memory_per_run())
        );
    } else {
        println!(
            "  server RSS                idle {} ({} of it the binary's code and other files), \
             peak {}: {} per run with its connection",
            mib(wave.idle_rss),
            mib(wave.idle_file_rss),
            mib(wave.peak_rss),
            kib(wave.memory_per_run())
        );
    }
    println!(
        "  CPU during the wave       server {:.1} s ({} per run), its MCP server {:.1} s, \
         scripted LLM {:.1} s, this client {:.1} s; the machine {:.1} s busy of {:.1} s ({:.0} %)",
        wave.cpu.server,
        millis(wave.server_cpu_per_run()),
        wave.cpu.mcp_server,
        wave.cpu.llm,
        wave.cpu.client,
        wave.cpu.machine_busy,
        wave.cpu.machine_total,
        100.0 * wave.cpu.machine_busy / wave.cpu.machine_total.max(f64::MIN_POSITIVE)
    );
    let switches = wave.cpu.server_switches;
    let per_run = |count: u64| count as f64 / wave.runs.max(1) as f64;
    println!(
        "  server context switches   {:.1} per run: {:.1} waits, {:.1} put aside (its threads alive at the end)",
        per_run(switches.voluntary + switches.involuntary),
        per_run(switches.voluntary),
        per_run(switches.involuntary),
    );
    println!(
        "  listen queue overflows    {} (SYNs the kernel dropped, whole machine)",
        wave.listen_overflows
    );
    if !wave.failures.is_empty() {
        println!("  FAILED runs: {}", wave.failures.len());
        let mut kinds: Vec<(String, usize)> = Vec::new();
        for failure in &wave.failures {
            match kinds.iter_mut().find(|(kind, _)| kind == failure) {
                Some((_, count)) => *count += 1,
                None => kinds.push((failure.clone(), 1)),
            }
        }
        for (failure, count) in kinds.iter().take(FAILURES_SHOWN) {
            println!("    {count} × {failure}");
        }
        if kinds.len() > FAILURES_SHOWN {
            println!("    ... and {} other kinds", kinds.len() - FAILURES_SHOWN);
        }
    }
}

pub(super) fn print_summary(waves: &[Wave]) {
    println!(
        "\n| system | runs at once | completed | held at once | time to first event p50 / p95 / p99 | \
         added latency p50 / p95 / p99 | wall time | server CPU per run | RSS idle → peak | \
         memory per run (of which its connection) |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    for wave in waves {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1} s | {} | {} → {} | {} ({}) |",
            wave.system,
            wave.runs,
            wave.completed,
            wave.held_at_once,
            wave.time_to_first_event,
            wave.added_latency,
            wave.wall.as_secs_f64(),
            millis(wave.server_cpu_per_run()),
            mib(wave.idle_rss),
            mib(wave.peak_rss),
            kib(wave.memory_per_run()),
            if wave.preconnected {
                kib(wave.memory_per_connection())
            } else {
                "not measured".to_string()
            }
        );
    }
}

/// agentloop against the Python floor, wave by wave (`--floor`): each figure of agentloop's
/// wave divided by the floor's, measured minutes apart in this invocation.
pub(super) fn print_floor_ratios(waves: &[Wave]) {
    let pairs: Vec<(&Wave, &Wave)> = waves
        .windows(2)
        .filter_map(|pair| match pair {
            [ours, floor]
                if ours.system == System::Agentloop
                    && floor.system == System::Floor
                    && ours.runs == floor.runs =>
            {
                Some((ours, floor))
            }
            _ => None,
        })
        .collect();
    if pairs.is_empty() {
        return;
    }
    let ratio = |ours: f64, floor: f64| {
        if floor > 0.0 {
            format!("{:.2}×", ours / floor)
        } else {
            "—".to_string()
        }
    };
    println!(
        "\nagentloop ÷ the Python floor, same invocation (below 1: agentloop takes less):\n\n\
         | runs | server CPU per run | added latency p50 | wall time | peak RSS |\n\
         | --- | --- | --- | --- | --- |"
    );
    for (ours, floor) in pairs {
        if ours.completed < ours.runs || floor.completed < floor.runs {
            // Per-run figures of a wave cut short are not the same work's: no ratio.
            println!(
                "| {} | no ratio: agentloop completed {} of {}, the floor {} of {} |  |  |  |",
                ours.runs, ours.completed, ours.runs, floor.completed, floor.runs
            );
            continue;
        }
        println!(
            "| {} | {} ({} ÷ {}) | {} ({} ÷ {}) | {} | {} ({} ÷ {}) |",
            ours.runs,
            ratio(
                ours.server_cpu_per_run().as_secs_f64(),
                floor.server_cpu_per_run().as_secs_f64()
            ),
            millis(ours.server_cpu_per_run()),
            millis(floor.server_cpu_per_run()),
            ratio(
                ours.added_latency.p50.as_secs_f64(),
                floor.added_latency.p50.as_secs_f64()
            ),
            millis(ours.added_latency.p50),
            millis(floor.added_latency.p50),
            ratio(ours.wall.as_secs_f64(), floor.wall.as_secs_f64()),
            ratio(ours.peak_rss as f64, floor.peak_rss as f64),
            mib(ours.peak_rss),
            mib(floor.peak_rss),
        );
    }
}
