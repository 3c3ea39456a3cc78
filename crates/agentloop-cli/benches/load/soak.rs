//! `--soak SECONDS`: one server under steady load for minutes, as an operator runs it. Runs are
//! kept `concurrency` at a time (a new one starts as soon as one ends) for the whole period;
//! every `REPORT_EVERY` the runs completed and failed in that interval, their latency (p50,
//! p95), the server's RSS and CPU are printed. At the end the server must still be up, ready
//! (`/readyz` 200), hold no run, and stop cleanly on SIGTERM.

use super::*;

const REPORT_EVERY: Duration = Duration::from_secs(30);

pub struct Settings {
    pub duration: Duration,
    pub concurrency: usize,
}

/// Runs the soak; returns how many runs failed, and whether the server ended healthy.
/// `work` is what the scripted LLM was started for (`--tool-calls`, `--no-stream`).
pub async fn soak(settings: &Settings, dir: &Path, latency: Duration, work: Work) -> (usize, bool) {
    println!(
        "agentloop serve, soak: {} s of steady load, {} runs in flight at all times, LLM latency \
         {} per call, {} MCP tool call(s) per run",
        settings.duration.as_secs(),
        settings.concurrency,
        millis(latency),
        work.tool_calls
    );
    let server = Server::start(dir);
    let key = server.key.as_str();
    let client = http_client();
    let address = server.address.clone();
    let deadline = Instant::now() + settings.duration;
    let started = Instant::now();
    let mut in_flight = futures::stream::FuturesUnordered::new();
    let mut next = 0usize;
    let mut failures: Vec<String> = Vec::new();
    let mut totals = (0usize, 0usize);
    let mut interval: Vec<Duration> = Vec::new();
    let mut interval_failed = 0usize;
    let mut next_report = started + REPORT_EVERY.min(settings.duration);
    let cpu_before = cpu_seconds(server.pid()).unwrap_or_default();
    let mut cpu_last = cpu_before;
    println!(
        "  {:>6} {:>8} {:>7} {:>9} {:>9} {:>9} {:>8}",
        "time", "runs", "failed", "p50", "p95", "RSS", "CPU"
    );
    loop {
        while Instant::now() < deadline && in_flight.len() < settings.concurrency {
            next += 1;
            in_flight.push(one_run(
                client.clone(),
                address.clone(),
                key.to_string(),
                next,
                work,
            ));
        }
        let Some(report) = tokio::time::timeout(Duration::from_millis(200), in_flight.next())
            .await
            .ok()
            .flatten()
        else {
            if in_flight.is_empty() && Instant::now() >= deadline {
                break;
            }
            continue;
        };
        totals.0 += 1;
        match report.failure {
            Some(failure) => {
                totals.1 += 1;
                interval_failed += 1;
                failures.push(failure);
            }
            None => interval.push(report.total),
        }
        if Instant::now() >= next_report {
            interval.sort_unstable();
            let cpu = cpu_seconds(server.pid()).unwrap_or_default();
            let pick = |q: f64| {
                interval
                    .get(
                        ((interval.len() as f64 * q) as usize)
                            .min(interval.len().saturating_sub(1)),
                    )
                    .map_or("-".to_string(), |d| millis(*d))
            };
            println!(
                "  {:>5}s {:>8} {:>7} {:>9} {:>9} {:>9} {:>7.1}s",
                started.elapsed().as_secs(),
                interval.len() + interval_failed,
                interval_failed,
                pick(0.5),
                pick(0.95),
                rss_bytes(server.pid()).map_or("-".to_string(), mib),
                cpu - cpu_last
            );
            cpu_last = cpu;
            interval.clear();
            interval_failed = 0;
            next_report += REPORT_EVERY;
        }
    }
    let elapsed = started.elapsed();
    let ready = client
        .get(format!("{address}/readyz"))
        .send()
        .await
        .map(|response| response.status().as_u16())
        .unwrap_or(0);
    let active = memory::metric(&client, &address, "agentloop_runs_active")
        .await
        .map(|value| value as u64);
    let cpu_total = cpu_seconds(server.pid()).unwrap_or_default() - cpu_before;
    println!(
        "  total: {} runs in {:.0} s ({:.1} runs/s), {} failed; server CPU {:.1} s ({:.2} ms per \
         run); /readyz {ready}; runs still active {}",
        totals.0,
        elapsed.as_secs_f64(),
        totals.0 as f64 / elapsed.as_secs_f64(),
        totals.1,
        cpu_total,
        cpu_total * 1000.0 / totals.0.max(1) as f64,
        active.map_or("unknown".to_string(), |n| n.to_string())
    );
    for failure in failures.iter().take(FAILURES_SHOWN) {
        println!("    failure: {failure}");
    }
    let (status, stderr) = server.stop();
    println!("  server exit {status}");
    for line in stderr
        .iter()
        .filter(|line| !line.starts_with("agentloop listening on"))
        .take(FAILURES_SHOWN)
    {
        println!("    stderr: {line}");
    }
    let healthy = ready == 200 && active == Some(0) && status.success();
    (totals.1, healthy)
}
