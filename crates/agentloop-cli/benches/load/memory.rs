//! `--memory`: the server's resident memory under runs that stream large answers, and under SSE
//! clients that never read.
//!
//! On a fresh server, after a warm-up run: `runs` runs, a few at a time, each one tool call then
//! an answer of `answer_bytes` streamed in 1000-byte words (one `assistant_delta` each, then the
//! whole answer as `final_response`), read to `done`. RSS is read every `runs / 6` runs, when
//! they are over, and after the server was idle for longer than a finished run stays
//! registered. Then `slow_readers` runs are started by clients that never read their stream,
//! as many at a time as before: RSS once those runs ended, and after the clients closed.

use std::io::Write;

use super::*;

/// Runs in flight at a time: enough to keep both cores busy.
const CONCURRENCY: usize = 4;
/// One streamed delta per word.
const WORD_BYTES: usize = 1000;
/// Longer than a finished run stays registered (`LINGER` in `agentloop-server/src/live.rs`).
const IDLE: Duration = Duration::from_secs(65);
/// How long the runs of the slow readers may take.
const SLOW_RUNS_DEADLINE: Duration = Duration::from_secs(600);

pub struct Settings {
    pub runs: usize,
    pub answer_bytes: usize,
    pub slow_readers: usize,
}

impl Settings {
    pub fn new(benchmarking: bool) -> Settings {
        if benchmarking {
            Settings {
                runs: 300,
                answer_bytes: 3_000_000,
                slow_readers: 20,
            }
        } else {
            Settings {
                runs: 12,
                answer_bytes: 200_000,
                slow_readers: 2,
            }
        }
    }

    /// The scripted LLM's answer: `answer_bytes` of words.
    pub fn llm_args(&self) -> Vec<String> {
        vec![
            "--answer".into(),
            "x".repeat(WORD_BYTES - 1),
            "--answer-bytes".into(),
            self.answer_bytes.to_string(),
        ]
    }
}

/// Runs the measurement; returns how many runs failed.
pub async fn measure(settings: &Settings, dir: &Path) -> usize {
    println!(
        "agentloop serve, memory: {} runs of a {} answer ({} deltas each), {CONCURRENCY} at a \
         time, then {} SSE clients that never read",
        settings.runs,
        mib(settings.answer_bytes as u64),
        settings.answer_bytes.div_ceil(WORD_BYTES),
        settings.slow_readers
    );
    let server = Server::start(dir);
    let key = server.key.as_str();
    let client = http_client();
    let address = server.address.clone();
    let warm_up = one_run(
        client.clone(),
        address.clone(),
        key.to_string(),
        0,
        Work::default(),
    )
    .await;
    if let Some(failure) = warm_up.failure {
        panic!("the warm-up run failed: {failure}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut curve = vec![(
        "after the warm-up run".to_string(),
        sample(&server, &client).await,
    )];
    let every = (settings.runs / 6).max(1);
    let mut failures = Vec::new();
    let mut done = 0;
    let started = Instant::now();
    while done < settings.runs {
        let batch = CONCURRENCY.min(settings.runs - done);
        let runs = (1..=batch).map(|n| {
            one_run(
                client.clone(),
                address.clone(),
                key.into(),
                done + n,
                Work::default(),
            )
        });
        for report in futures::future::join_all(runs).await {
            failures.extend(report.failure);
        }
        let before = done;
        done += batch;
        if done / every > before / every || done == settings.runs {
            let label = format!(
                "after {done} runs ({:.0} s)",
                started.elapsed().as_secs_f64()
            );
            curve.push((label, sample(&server, &client).await));
        }
    }
    tokio::time::sleep(IDLE).await;
    curve.push((
        format!("idle {} s later", IDLE.as_secs()),
        sample(&server, &client).await,
    ));

    let mut readers = Vec::new();
    while readers.len() < settings.slow_readers {
        let batch = CONCURRENCY.min(settings.slow_readers - readers.len());
        readers.extend(slow_readers(&address, key, batch).await);
        wait_for_no_active_runs(&client, &address).await;
    }
    curve.push((
        format!(
            "{} clients that never read, their runs ended",
            settings.slow_readers
        ),
        sample(&server, &client).await,
    ));
    drop(readers);
    tokio::time::sleep(Duration::from_secs(2)).await;
    curve.push((
        "those clients closed".to_string(),
        sample(&server, &client).await,
    ));

    println!("\n| when | server RSS | live events held |");
    println!("| --- | --- | --- |");
    for (label, (rss, held)) in &curve {
        println!(
            "| {label} | {} | {} |",
            mib(*rss),
            held.as_deref().unwrap_or("not reported")
        );
    }
    if !failures.is_empty() {
        println!("FAILED runs: {}; first: {}", failures.len(), failures[0]);
    }
    let (status, _) = server.stop();
    println!("server exit: {status}");
    failures.len()
}

/// The server's RSS and, when it reports it, the bytes of events its live runs hold.
async fn sample(server: &Server, client: &reqwest::Client) -> (u64, Option<String>) {
    let rss = rss_bytes(server.pid()).expect("the server's VmRSS");
    let held = metric(client, &server.address, "agentloop_live_event_bytes")
        .await
        .map(|bytes| kib(bytes as u64));
    (rss, held)
}

/// The value of the metric `name` (no labels) from the server's `/metrics`.
pub async fn metric(client: &reqwest::Client, address: &str, name: &str) -> Option<f64> {
    let text = client
        .get(format!("{address}/metrics"))
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
}

/// Starts `count` runs over raw connections whose answers are never read.
async fn slow_readers(address: &str, key: &str, count: usize) -> Vec<std::net::TcpStream> {
    let host = address.trim_start_matches("http://");
    let body = json!({"query": "Echo something, slowly read", "stream": true}).to_string();
    let request = format!(
        "POST /v1/runs HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {key}\r\n\
         content-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    );
    (0..count)
        .map(|_| {
            let mut socket = std::net::TcpStream::connect(host).expect("connect to the server");
            socket
                .write_all(request.as_bytes())
                .expect("send the request");
            socket
        })
        .collect()
}

async fn wait_for_no_active_runs(client: &reqwest::Client, address: &str) {
    let started = Instant::now();
    // The runs register as soon as their request is read; give them that moment first.
    tokio::time::sleep(Duration::from_millis(500)).await;
    while metric(client, address, "agentloop_runs_active").await != Some(0.0) {
        assert!(
            started.elapsed() < SLOW_RUNS_DEADLINE,
            "the runs of the slow readers did not end"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Their last events reach the connections' buffers.
    tokio::time::sleep(Duration::from_secs(1)).await;
}
