//! `agentloop serve` under load, as a process of its own: waves of N runs opened at once over
//! HTTP (SSE), against a scripted LLM process of fixed latency L. Each run is an LLM call that
//! asks for `test.echo`, a real MCP call to the test server, and an LLM call that answers.
//!
//! Per wave (on a freshly started server, so its memory is that wave's): runs completed, the
//! most runs the server held at once (`agentloop_runs_active`, polled), time to the first event,
//! the latency the server adds to the two LLM calls, the server's resident memory (idle, with
//! the connections open, peak) and the CPU time of every process involved.
//!
//! The wave's keep-alive connections (one for a wave one after another, whose runs take turns on
//! it) are opened beforehand, a hundred at a time, so the figures are the server's and not the
//! kernel's: a burst of more connections than the listen backlog (128) loses SYNs, and their
//! retries (1 s, 3 s, 7 s, ...) would swamp everything else.
//! `--cold-connections` opens them in the same burst as the runs, to see exactly that.
//!
//! ```sh
//! cargo bench -p agentloop-cli --bench load
//! cargo bench -p agentloop-cli --bench load -- --runs 1000,5000 --latency-ms 500 --store postgres
//! cargo bench -p agentloop-cli --bench load -- --runs 3000 --cold-connections
//! ```
//!
//! `--tool-calls N` makes each run ask for N tool calls, one per LLM call, before its answer
//! (N + 1 LLM calls); `--no-stream` posts the runs with `stream: false` (a JSON answer) and
//! has the LLM answer without streaming; `--sequential` runs a wave's runs one after another,
//! for the CPU and latency of one run without contention; `--store memory` keeps the store in
//! `sqlite::memory:`; `--model NAME` names another model in the config (the server then counts
//! tokens with its tokenizer: tiktoken for OpenAI's); `--threads N` sets `server.threads` (0,
//! the default: the runtime's shared threads; N: threads of their own); `--pg-setting
//! NAME=VALUE` (repeated) sets a PostgreSQL setting on the server's connections, through the
//! store URL's `options` (`--pg-setting synchronous_commit=off`); `--sqlite-params QUERY` adds
//! parameters to the SQLite file's URL (`vfs=unix`: SQLite's own VFS, which writes each page of
//! a commit to the WAL in two writes, instead of the store's one write per commit). The work of
//! issue 14's table:
//!
//! ```sh
//! cargo bench -p agentloop-cli --bench load -- --tool-calls 2 --no-stream --latency-ms 0 \
//!     --runs 300 --sequential
//! cargo bench -p agentloop-cli --bench load -- --tool-calls 2 --no-stream --latency-ms 1000 --runs 200
//! ```
//!
//! `--floor` runs each wave again, right after agentloop's, on the issue's floor: a hand-written
//! Python loop with httpx (`load/floor.py`, see `load/floor.rs`), and prints agentloop's figures
//! divided by the floor's. The issue sets its CPU target as such a ratio, in one invocation.
//!
//! Without `--bench` (under `cargo test`, which runs this bench as a test: `test = true`) it
//! runs one small wave of that work, 20 runs at once at 50 ms, to check that it works.
//!
//! `--soak SECONDS [--concurrency C]` keeps one server under steady load for that long (see
//! `load/soak.rs`): throughput, latency, RSS and CPU every 30 s, and the server must end healthy.
//!
//! `--memory` measures the server's resident memory instead (see `load/memory.rs`): runs that
//! stream large answers, one after another, then SSE clients that never read.
//!
//! ```sh
//! cargo bench -p agentloop-cli --bench load -- --memory --runs 300 --answer-bytes 3000000
//! ```
//!
//! `--chaos` runs M runs over three servers on one PostgreSQL while a random one is killed
//! (`-9`) and started again every S seconds (see `load/chaos.rs`): runs lost, duplicate
//! executions, kill-to-adoption times, store bytes per run. Without `--bench`, a tiny version.
//!
//! ```sh
//! cargo bench -p agentloop-cli --bench load -- --chaos --runs 1000 [--kill-every-s 2] \
//!     [--latency-ms 300] [--concurrency 40]
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark harness

use std::{
    fmt,
    path::Path,
    process::Command,
    sync::{
        Arc,
        atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use agentloop_test_support::{mcp::test_mcp_server_config_toml, postgres::TestSchema, requires};
use futures::StreamExt;
use serde_json::{Value, json};

#[path = "load/chaos.rs"]
mod chaos;
#[path = "load/floor.rs"]
mod floor;
#[path = "load/llm_alone.rs"]
mod llm_alone;
#[path = "load/measure.rs"]
mod measure;
#[path = "load/memory.rs"]
mod memory;
#[path = "load/options.rs"]
mod options;
#[path = "load/processes.rs"]
mod processes;
#[path = "load/report.rs"]
mod report;
#[path = "load/soak.rs"]
mod soak;

use measure::*;
use options::{Options, StoreKind, Work, options};
use processes::{Server, start_llm};
use report::*;

/// How often the server's memory and its runs in progress are sampled during a wave.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// Failures printed in full per wave; the rest are counted.
const FAILURES_SHOWN: usize = 10;
/// Connections opened at a time before a wave: within the listen backlog (128, the default of
/// std and mio), so no SYN is dropped.
const CONNECT_BATCH: usize = 100;

/// What one run looked like from the client.
struct RunReport {
    /// Until the response's headers: connection, authentication, the run registered.
    time_to_headers: Option<Duration>,
    time_to_first_event: Option<Duration>,
    total: Duration,
    /// Why the run did not complete as intended (one tool call, then `completed`).
    failure: Option<String>,
}

/// Opens a run with `stream: true` and reads its SSE stream to `done`; or, for work that does
/// not stream, with `stream: false` and reads its JSON answer.
async fn one_run(
    client: reqwest::Client,
    address: String,
    key: String,
    n: usize,
    work: Work,
) -> RunReport {
    if !work.stream {
        return one_json_run(client, address, key, n, work).await;
    }
    let started = Instant::now();
    let mut report = RunReport {
        time_to_headers: None,
        time_to_first_event: None,
        total: Duration::ZERO,
        failure: None,
    };
    let outcome = async {
        let response = client
            .post(format!("{address}/v1/runs"))
            .bearer_auth(&key)
            .json(&json!({"query": format!("Echo something ({n})"), "stream": true}))
            .send()
            .await
            .map_err(|error| format!("POST /v1/runs: {}", error_chain(&error)))?;
        report.time_to_headers = Some(started.elapsed());
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(format!("POST /v1/runs answered {status}: {body}"));
        }
        let mut body = response.bytes_stream();
        let mut buffer = Vec::new();
        let mut error_event = None;
        while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|error| format!("reading the stream: {error}"))?;
            buffer.extend_from_slice(&chunk);
            while let Some(end) = find(&buffer, b"\n\n") {
                let frame: Vec<u8> = buffer.drain(..end + 2).collect();
                let frame = String::from_utf8_lossy(&frame);
                let field = |name: &str| {
                    frame
                        .lines()
                        .find_map(|line| line.strip_prefix(name))
                        .map(str::trim)
                        .map(str::to_string)
                };
                match field("event:").as_deref() {
                    Some("run_started") => {
                        report.time_to_first_event.get_or_insert(started.elapsed());
                    }
                    Some("error") => error_event = field("data:"),
                    Some("done") => {
                        let done: Value = serde_json::from_str(&field("data:").unwrap_or_default())
                            .map_err(|error| format!("a done event that is not JSON: {error}"))?;
                        return match (done["status"].as_str(), done["tools_used"].as_u64()) {
                            (Some("completed"), Some(used)) if used == work.tool_calls as u64 => {
                                Ok(())
                            }
                            _ => Err(format!(
                                "ended {} with {} tool calls{}",
                                done["status"],
                                done["tools_used"],
                                error_event
                                    .map(|error| format!(", error {error}"))
                                    .unwrap_or_default()
                            )),
                        };
                    }
                    _ => {}
                }
            }
        }
        Err("the stream ended without a done event".to_string())
    }
    .await;
    report.total = started.elapsed();
    report.failure = outcome.err();
    report
}

/// Opens a run with `stream: false` and checks its JSON answer.
async fn one_json_run(
    client: reqwest::Client,
    address: String,
    key: String,
    n: usize,
    work: Work,
) -> RunReport {
    let started = Instant::now();
    let outcome = async {
        let response = client
            .post(format!("{address}/v1/runs"))
            .bearer_auth(&key)
            .json(&json!({"query": format!("Echo something ({n})"), "stream": false}))
            .send()
            .await
            .map_err(|error| format!("POST /v1/runs: {}", error_chain(&error)))?;
        let status = response.status();
        let body = response.text().await.unwrap_or_default();
        if !status.is_success() {
            return Err(format!("POST /v1/runs answered {status}: {body}"));
        }
        let answer: Value = serde_json::from_str(&body)
            .map_err(|error| format!("an answer that is not JSON: {error}"))?;
        let used = answer["agent_metadata"]["tools_used"].as_u64();
        match (answer["status"].as_str(), used) {
            (Some("completed"), Some(used)) if used == work.tool_calls as u64 => Ok(()),
            // The answer's error says why (`store_unavailable`, `llm_timeout`, ...).
            _ => Err(format!(
                "ended {} with {:?} tool calls: {}",
                answer["status"], used, answer["error"]
            )),
        }
    }
    .await;
    let total = started.elapsed();
    RunReport {
        time_to_headers: Some(total),
        time_to_first_event: None,
        total,
        failure: outcome.err(),
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// An error with its causes: reqwest's own message hides whether the connection was refused or
/// reset.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Opens `count` keep-alive connections to the server, `CONNECT_BATCH` at a time, and leaves
/// them idle in `client`'s pool for the wave.
///
/// A connection returns to the pool as soon as its answer is in, so each is held busy by a
/// `POST /v1/runs` whose body waits until all are open; the body (`{}`, no query) is then
/// refused with 400 and the connection stays open.
async fn preconnect(client: &reqwest::Client, address: &str, key: &str, count: usize) {
    let opened = Arc::new(AtomicUsize::new(0));
    let (release, released) = tokio::sync::watch::channel(false);
    let mut requests = Vec::with_capacity(count);
    while requests.len() < count {
        let batch = CONNECT_BATCH.min(count - requests.len());
        for _ in 0..batch {
            let opened = opened.clone();
            let mut released = released.clone();
            // hyper polls a request's body once the connection is up and the head written.
            let body = futures::stream::once(async move {
                opened.fetch_add(1, Ordering::Relaxed);
                let _ = released.wait_for(|go| *go).await;
                Ok::<_, std::io::Error>("{}")
            });
            let request = client
                .post(format!("{address}/v1/runs"))
                .bearer_auth(key)
                .header("content-type", "application/json")
                .body(reqwest::Body::wrap_stream(body))
                .send();
            requests.push(tokio::spawn(async move {
                let response = request.await?;
                let status = response.status();
                response.bytes().await?;
                Ok::<_, reqwest::Error>(status)
            }));
        }
        let target = requests.len();
        let waited = Instant::now();
        while opened.load(Ordering::Relaxed) < target {
            assert!(
                waited.elapsed() < Duration::from_secs(30),
                "only {} of {target} connections opened in 30 s",
                opened.load(Ordering::Relaxed)
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    release.send_replace(true);
    for request in requests {
        let status = request
            .await
            .unwrap()
            .expect("a request holding a connection");
        assert_eq!(status, 400, "the body that releases a held connection");
    }
}

/// Every connection the wave needs at once: one per SSE stream.
fn http_client() -> reqwest::Client {
    reqwest::Client::builder()
        .pool_max_idle_per_host(usize::MAX)
        .tcp_nodelay(true)
        .build()
        .unwrap()
}

/// Polls `GET /metrics` until `stop`, keeping the largest `agentloop_runs_active`.
async fn poll_active_runs(client: reqwest::Client, address: String, stop: Arc<AtomicBool>) -> u64 {
    let mut most = 0;
    let mut ticks = tokio::time::interval(SAMPLE_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::Relaxed) {
        ticks.tick().await;
        let Ok(response) = client.get(format!("{address}/metrics")).send().await else {
            continue;
        };
        let Ok(text) = response.text().await else {
            continue;
        };
        let active = text
            .lines()
            .find_map(|line| line.strip_prefix("agentloop_runs_active "))
            .and_then(|value| value.trim().parse::<u64>().ok());
        most = most.max(active.unwrap_or(0));
    }
    most
}

struct Wave {
    /// What served it: agentloop or the floor.
    system: System,
    runs: usize,
    completed: usize,
    held_at_once: u64,
    time_to_headers: Percentiles,
    time_to_first_event: Percentiles,
    added_latency: Percentiles,
    /// The LLM called straight, in a sequential wave without latency.
    llm_alone: Option<Percentiles>,
    wall: Duration,
    idle_rss: u64,
    /// Of `idle_rss`, the pages mapping files (the binary's code).
    idle_file_rss: u64,
    /// With the wave's connections open and no run yet; the idle RSS when they were not opened
    /// beforehand.
    connected_rss: u64,
    /// The keep-alive connections opened before the wave: one per run at once, one for runs
    /// one after another (which take turns on it).
    connections: usize,
    preconnected: bool,
    peak_rss: u64,
    cpu: CpuUse,
    listen_overflows: u64,
    failures: Vec<String>,
}

impl Wave {
    /// A run with its connection.
    fn memory_per_run(&self) -> u64 {
        self.peak_rss.saturating_sub(self.idle_rss) / self.runs.max(1) as u64
    }

    /// An open connection, before any run.
    fn memory_per_connection(&self) -> u64 {
        self.connected_rss.saturating_sub(self.idle_rss) / self.connections.max(1) as u64
    }

    fn server_cpu_per_run(&self) -> Duration {
        Duration::from_secs_f64(self.cpu.server / self.runs.max(1) as f64)
    }
}

/// What serves a wave's runs.
#[derive(Clone, Copy, PartialEq)]
enum System {
    Agentloop,
    /// The Python floor (`load/floor.py`).
    Floor,
}

impl fmt::Display for System {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            System::Agentloop => "agentloop",
            System::Floor => "Python floor",
        })
    }
}

/// One wave of `runs` runs opened at once against a fresh server.
async fn wave(
    system: System,
    server: &Server,
    llm: (u32, &str),
    runs: usize,
    options: &Options,
) -> Wave {
    let (llm_pid, llm_url) = llm;
    let key = server.key.as_str();
    let latency = options.latency;
    let client = http_client();
    // A first run warms the server (MCP server up, lazy initialisation done) before its idle
    // memory is read.
    let work = options.work;
    let warm_up = one_run(
        client.clone(),
        server.address.clone(),
        key.to_string(),
        0,
        work,
    )
    .await;
    if let Some(failure) = warm_up.failure {
        panic!("the warm-up run failed: {failure}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let idle_rss = rss_bytes(server.pid()).expect("the server's VmRSS");
    let idle_file_rss = file_rss_bytes(server.pid()).expect("the server's RssFile");
    let connections = if options.sequential { 1 } else { runs };
    if !options.cold_connections {
        preconnect(&client, &server.address, key, connections).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let connected_rss = rss_bytes(server.pid()).expect("the server's VmRSS");

    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(idle_rss));
    let rss_sampler = sample_rss(server.pid(), stop.clone(), peak.clone());
    // A client of its own, so the poll never takes a connection meant for a run.
    let poller = tokio::spawn(poll_active_runs(
        http_client(),
        server.address.clone(),
        stop.clone(),
    ));

    let cpu_before = CpuUse::now(server.pid(), llm_pid);
    let overflows_before = listen_overflows();
    let started = Instant::now();
    let reports = if options.sequential {
        let mut reports = Vec::with_capacity(runs);
        for n in 1..=runs {
            let address = server.address.clone();
            reports.push(Ok(one_run(
                client.clone(),
                address,
                key.to_string(),
                n,
                work,
            )
            .await));
        }
        reports
    } else {
        let tasks: Vec<_> = (1..=runs)
            .map(|n| {
                tokio::spawn(one_run(
                    client.clone(),
                    server.address.clone(),
                    key.to_string(),
                    n,
                    work,
                ))
            })
            .collect();
        futures::future::join_all(tasks).await
    };
    let wall = started.elapsed();
    let cpu = CpuUse::now(server.pid(), llm_pid).since(cpu_before);
    let overflows = listen_overflows().saturating_sub(overflows_before);
    // One more sample after the last `done`: runs linger in memory for a while after they end.
    tokio::time::sleep(SAMPLE_EVERY * 2).await;
    stop.store(true, Ordering::Relaxed);
    rss_sampler.join().unwrap();
    let held_at_once = poller.await.unwrap();
    // With no latency of its own, what the LLM takes is timed too, after the wave (the server
    // idle), to tell the runtime's share of a run's time.
    let llm_alone = if options.sequential && latency.is_zero() {
        Some(llm_alone::measure(&client, llm_url, &options.model).await)
    } else {
        None
    };

    let mut failures = Vec::new();
    let mut headers = Vec::new();
    let mut first_events = Vec::new();
    let mut added = Vec::new();
    for report in reports {
        let report = report.expect("a run task panicked");
        match report.failure {
            Some(failure) => failures.push(failure),
            None => {
                headers.extend(report.time_to_headers);
                first_events.extend(report.time_to_first_event);
                let llm_calls = work.tool_calls as u32 + 1;
                added.push(report.total.saturating_sub(latency * llm_calls));
            }
        }
    }
    Wave {
        system,
        runs,
        completed: runs - failures.len(),
        held_at_once,
        time_to_headers: Percentiles::of(headers),
        time_to_first_event: Percentiles::of(first_events),
        added_latency: Percentiles::of(added),
        llm_alone,
        wall,
        idle_rss,
        idle_file_rss,
        connected_rss,
        connections,
        preconnected: !options.cold_connections,
        peak_rss: peak.load(Ordering::Relaxed),
        cpu,
        listen_overflows: overflows,
        failures,
    }
}

#[tokio::main]
async fn main() {
    let mut options = options();
    if options.floor {
        // Without Python or PyPI the waves run on agentloop alone, saying so (under `cargo
        // test`, a failure with AGENTLOOP_TEST_ALL=1).
        let floor = floor::available();
        options.floor =
            requires::met("Python 3 and PyPI (httpx), for the Python floor", floor).is_some();
    }
    if let Some(settings) = &options.chaos {
        let report = chaos::run(settings).await;
        chaos::print(&report);
        if report.lost() > 0 || !report.duplicates.is_empty() {
            std::process::exit(1);
        }
        return;
    }
    let llm_args = options
        .memory
        .as_ref()
        .map(memory::Settings::llm_args)
        .unwrap_or_default();
    let (llm, llm_url) = start_llm(options.latency, options.work.tool_calls, &llm_args);
    let dir = tempfile::tempdir().unwrap();
    let (store_url, schema) = match options.store {
        StoreKind::Sqlite => {
            let params = options
                .sqlite_params
                .as_ref()
                .map(|params| format!("?{params}"))
                .unwrap_or_default();
            let url = format!("sqlite://{}/bench.db{params}", dir.path().display());
            (url, None)
        }
        StoreKind::Memory => ("sqlite::memory:".to_string(), None),
        StoreKind::Postgres => {
            let schema = TestSchema::try_create()
                .await
                .unwrap_or_else(|message| panic!("{message}"));
            // libpq's `options`, which the schema's URL already has: `-c NAME=VALUE` added.
            let settings: String = options
                .pg_settings
                .iter()
                .map(|setting| format!("%20-c%20{}", setting.replace('=', "%3D")))
                .collect();
            (format!("{}{settings}", schema.url()), Some(schema))
        }
    };
    let most_runs = options.waves.iter().copied().max().unwrap_or(1);
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!(
            "[llm]\nbase_url = {}\nmodel = {}\nstream = {}\n\n[store]\nurl = {}\n\n\
             [server]\nmax_runs_per_user = {}\nthreads = {}\n\n{}",
            json!(llm_url),
            json!(options.model),
            options.work.stream,
            json!(store_url),
            (most_runs + 1).max(100_000),
            options.threads,
            test_mcp_server_config_toml("test", None)
        ),
    )
    .unwrap();
    if let Some(settings) = &options.soak {
        let (failed, healthy) =
            soak::soak(settings, dir.path(), options.latency, options.work).await;
        drop(llm);
        if failed > 0 || !healthy {
            eprintln!("{failed} runs failed; the server ended healthy: {healthy}");
            std::process::exit(1);
        }
        return;
    }
    if let Some(settings) = &options.memory {
        let failed = memory::measure(settings, dir.path()).await;
        drop(llm);
        if failed > 0 {
            eprintln!("{failed} runs failed");
            std::process::exit(1);
        }
        return;
    }

    println!(
        "agentloop serve under load: LLM latency {} per call (scripted LLM process), {} MCP \
         tool call(s) per run (test.echo over stdio, one per LLM call), {}, store {}; a fresh \
         server per wave, {}",
        millis(options.latency),
        options.work.tool_calls,
        if options.work.stream {
            "runs streamed over SSE"
        } else {
            "runs answered as JSON (stream: false), the LLM not streaming"
        },
        options.store,
        if options.cold_connections {
            "each run on a connection opened in the same burst"
        } else {
            "each run on a keep-alive connection opened before the wave"
        }
    );
    if options.floor {
        println!(
            "each wave again on the Python floor (load/floor.py: a hand-written loop with httpx, \
             its tool in process, no store) right after agentloop's"
        );
    }
    let mut waves = Vec::new();
    let mut exits_ok = true;
    let systems: &[System] = if options.floor {
        &[System::Agentloop, System::Floor]
    } else {
        &[System::Agentloop]
    };
    for &runs in &options.waves {
        for &system in systems {
            let server = match system {
                System::Agentloop => Server::start(dir.path()),
                System::Floor => Server::spawn(floor::command(&llm_url, &options.model)),
            };
            let result = wave(system, &server, (llm.0.id(), &llm_url), runs, &options).await;
            print_wave(&result, &options);
            let (status, stderr) = server.stop();
            println!("  server exit               {status}");
            let said: Vec<&String> = stderr
                .iter()
                .filter(|line| !line.contains(" listening on "))
                .collect();
            for line in said.iter().take(FAILURES_SHOWN) {
                println!("    stderr: {line}");
            }
            if said.len() > FAILURES_SHOWN {
                println!("    stderr: ... {} more lines", said.len() - FAILURES_SHOWN);
            }
            exits_ok &= status.success();
            waves.push(result);
        }
    }
    print_summary(&waves);
    print_floor_ratios(&waves);

    if let Some(schema) = schema {
        schema.drop_schema().await;
    }
    // `exit` runs no destructors: the LLM process must be stopped first.
    drop(llm);
    let failed: usize = waves.iter().map(|wave| wave.failures.len()).sum();
    if failed > 0 || !exits_ok {
        eprintln!("{failed} runs failed; the server exited 0 every time: {exits_ok}");
        std::process::exit(1);
    }
}
