//! `--chaos`: M runs over three `agentloop serve` instances on one PostgreSQL schema while a
//! random instance is killed (`kill -9`) and started again every S seconds, until every run has
//! ended. Shared by the load bench (`--chaos`, the full figures) and `tests/chaos.rs` (a small
//! version in CI).
//!
//! Each run is three LLM calls of latency L (an in-process scripted LLM: it must name a note
//! unique to the run, which the scripted LLM process cannot): the first asks for the mutating
//! `test.slow_record {note}` (logged by the test MCP server as it starts, then a short sleep, so
//! that kills also meet it in flight), the second for the read-only `test.sleep`, the third
//! answers. The note is `chaos-{index}.{attempt}`: a client that retries a start on another
//! instance (its first one died under it) uses a new attempt, so a note logged twice is a call
//! that agentloop executed twice.
//!
//! A client keeps C runs in flight, each started with `POST /v1/runs` (`stream: true`, only the
//! first event read) on a random live instance. Meanwhile, every S seconds, a random instance
//! that owns at least one run in progress is killed with SIGKILL and started again (a new
//! process, the same config). A poller reads the runs in progress and their owners from the
//! database every 50 ms: an owner that changes from a killed instance to another is an
//! adoption, timed from the kill; one that changes from an instance that was not killed is a
//! takeover from a live instance (its heartbeat was late), reported apart.
//!
//! At the end, with every run ended (or the deadline passed): the runs in the store (including
//! those the client never heard of, because their instance died before the first event), their
//! status and tool records (`GET /v1/runs/{id}`), their whole `/events` replay (gapless, from
//! `run_started` to `done`), the test MCP server's log (a note twice is a duplicate), and the
//! store's size (`pg_total_relation_size` of the schema's tables).
#![allow(dead_code)] // the bench and the test each use a part

use std::{
    collections::HashMap,
    fmt,
    io::{BufRead, BufReader, Write},
    path::Path,
    process::{Child, Stdio},
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use agentloop_test_support::{
    config::TestConfig,
    mcp::read_test_mcp_log,
    postgres::TestSchema,
    scripted_llm::{Reply, ScriptedLlm},
    sse::read_sse,
};
use futures::StreamExt;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, Row};
use uuid::Uuid;

#[path = "agentloop_command.rs"]
pub(crate) mod agentloop_command;
#[path = "chaos_cluster.rs"]
mod cluster;
#[path = "chaos_report.rs"]
mod report;

use cluster::*;
pub use report::*;

/// The number of `agentloop serve` instances.
pub const INSTANCES: usize = 3;
/// How often the poller reads the runs in progress and their owners: the resolution of the
/// kill-to-adoption times.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// How long a start may take, retries on other instances included.
const START_LIMIT: Duration = Duration::from_secs(60);
/// Failures, duplicates and the like printed in full; the rest are counted.
const SHOWN: usize = 10;

#[derive(Clone, Debug)]
pub struct Settings {
    pub runs: usize,
    /// Runs in flight at once.
    pub concurrency: usize,
    pub kill_every: Duration,
    /// Of each LLM call.
    pub latency: Duration,
    /// How long `test.slow_record` takes after it logged its start.
    pub record_ms: u64,
    /// The `test.sleep` of each run.
    pub sleep_ms: u64,
    /// `[server] run_lease_s`.
    pub lease_s: f64,
    /// How long the runs have to end once the last one started.
    pub deadline: Duration,
}

impl Settings {
    /// The full run (`--chaos --bench`), or a tiny one (`cargo test --benches`).
    pub fn bench(benchmarking: bool) -> Settings {
        if benchmarking {
            Settings {
                runs: 1000,
                concurrency: 40,
                kill_every: Duration::from_secs(2),
                latency: Duration::from_millis(300),
                record_ms: 300,
                sleep_ms: 500,
                lease_s: 1.0,
                deadline: Duration::from_secs(120),
            }
        } else {
            Settings {
                runs: 12,
                concurrency: 6,
                kill_every: Duration::from_millis(1500),
                latency: Duration::from_millis(100),
                record_ms: 300,
                sleep_ms: 500,
                lease_s: 1.0,
                deadline: Duration::from_secs(60),
            }
        }
    }
}

/// A random index below `n` (n > 0).
fn random_below(n: usize) -> usize {
    (Uuid::new_v4().as_u128() % n as u128) as usize
}

/// The runs in progress and their owners, as last read from the database.
#[derive(Default)]
struct Snapshot {
    /// When the query that read it started.
    taken: Option<Instant>,
    /// Run → the pid of its owner, when known.
    running: HashMap<Uuid, Option<u32>>,
}

#[derive(Default)]
struct Shared {
    /// Live instances' addresses by slot; `None` while one is being started again.
    live: Mutex<Vec<Option<(u32, String)>>>,
    snapshot: Mutex<Snapshot>,
    /// Runs the client learned of, and when.
    acknowledged: Mutex<HashMap<Uuid, Instant>>,
    starting: AtomicUsize,
    start_retries: AtomicUsize,
    start_errors: Mutex<Vec<String>>,
    kills: Mutex<Vec<KillRecord>>,
    adoptions: Mutex<Vec<Adoption>>,
    /// Set when every run ended (or the deadline passed): the killing stops.
    finished: AtomicBool,
}

impl Shared {
    fn live_address(&self) -> Option<String> {
        let live = self.live.lock().unwrap();
        let addresses: Vec<&String> = live.iter().flatten().map(|(_, a)| a).collect();
        (!addresses.is_empty()).then(|| addresses[random_below(addresses.len())].clone())
    }

    /// Runs being started, plus acknowledged runs not yet seen ended.
    fn in_flight(&self) -> usize {
        let snapshot = self.snapshot.lock().unwrap();
        let acknowledged = self.acknowledged.lock().unwrap();
        let unfinished = acknowledged
            .iter()
            .filter(|(id, at)| {
                let seen_ended = snapshot.taken.is_some_and(|taken| taken > **at)
                    && !snapshot.running.contains_key(*id);
                !seen_ended
            })
            .count();
        self.starting.load(Ordering::SeqCst) + unfinished
    }
}

/// The note of a run's query `chaos {index}.{attempt}`.
fn note_of(request: &Value) -> String {
    let query = request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default();
    let tag = query
        .split_whitespace()
        .find(|word| word.contains('.'))
        .unwrap_or("unknown");
    format!("chaos-{tag}")
}

async fn start_llm(settings: &Settings) -> ScriptedLlm {
    let (latency, record_ms, sleep_ms) = (settings.latency, settings.record_ms, settings.sleep_ms);
    ScriptedLlm::start_on("127.0.0.1:0", move |request: &Value| {
        let note = note_of(request);
        let calls_so_far = request["messages"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|m| m["tool_calls"].is_array())
            .count();
        let reply = match calls_so_far {
            0 => Reply::tool_call("test__slow_record", json!({"note": note, "ms": record_ms})),
            1 => Reply::tool_call("test__sleep", json!({"ms": sleep_ms})),
            _ => Reply::text(format!("Recorded {note}.")),
        };
        reply.with_delay(latency)
    })
    .await
}

async fn create_key(dir: &Path) -> String {
    let dir = dir.to_path_buf();
    let output = tokio::task::spawn_blocking(move || {
        agentloop_command::agentloop(&dir)
            .args(["keys", "create", "--user", "chaos"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "agentloop keys create: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .last()
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// Starts run `index` on a random live instance, again on another one (a new attempt) when
/// its instance dies before the first event. Returns its id, or why it could not start.
async fn start_one(
    client: reqwest::Client,
    shared: Arc<Shared>,
    key: String,
    index: usize,
) -> Result<Uuid, String> {
    let begun = Instant::now();
    let mut attempt = 0;
    let outcome = loop {
        if begun.elapsed() > START_LIMIT {
            break Err(format!("run {index}: not started in {START_LIMIT:?}"));
        }
        let Some(address) = shared.live_address() else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let query = format!("chaos {index}.{attempt}");
        match first_event(&client, &address, &key, &query).await {
            Ok(run_id) => break Ok(run_id),
            Err(error) => {
                shared.start_retries.fetch_add(1, Ordering::SeqCst);
                {
                    let mut errors = shared.start_errors.lock().unwrap();
                    if errors.len() < SHOWN {
                        errors.push(format!("{query} on {address}: {error}"));
                    }
                }
                attempt += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    };
    if let Ok(run_id) = outcome {
        shared
            .acknowledged
            .lock()
            .unwrap()
            .insert(run_id, Instant::now());
    }
    shared.starting.fetch_sub(1, Ordering::SeqCst);
    outcome
}

/// `POST /v1/runs` with `stream: true`; the run id of its first event, then the stream is
/// dropped (the run goes on without it).
async fn first_event(
    client: &reqwest::Client,
    address: &str,
    key: &str,
    query: &str,
) -> Result<Uuid, String> {
    let attempt = async {
        let mut response = client
            .post(format!("{address}/v1/runs"))
            .bearer_auth(key)
            .json(&json!({"query": query, "stream": true}))
            .send()
            .await
            .map_err(|error| format!("POST: {}", error_chain(&error)))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(format!("POST answered {status}: {body}"));
        }
        let mut text = String::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|error| format!("reading the stream: {}", error_chain(&error)))?
        {
            text.push_str(&String::from_utf8_lossy(&chunk));
            if let Some(frame) = text.split("\n\n").find(|frame| frame.contains("run_id")) {
                let data = frame
                    .lines()
                    .find_map(|line| line.strip_prefix("data:"))
                    .ok_or_else(|| format!("a frame without data: {frame:?}"))?;
                let event: Value = serde_json::from_str(data.trim())
                    .map_err(|error| format!("a first event that is not JSON: {error}"))?;
                return event["run_id"]
                    .as_str()
                    .and_then(|id| id.parse().ok())
                    .ok_or_else(|| format!("no run id in {event}"));
            }
        }
        Err(format!("the stream ended before its first event: {text:?}"))
    };
    tokio::time::timeout(Duration::from_secs(20), attempt)
        .await
        .unwrap_or_else(|_| Err("no first event in 20 s".to_string()))
}

fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

/// Reads the runs in progress and their owners every [`POLL_EVERY`] until `stop`, noting each
/// change of owner.
async fn poll_owners(url: String, shared: Arc<Shared>, stop: Arc<AtomicBool>) {
    let mut connection = PgConnection::connect(&url)
        .await
        .expect("connect the poller");
    // Instance id → pid (from its name, `host:pid`).
    let mut pids: HashMap<String, u32> = HashMap::new();
    let mut owners: HashMap<Uuid, Option<u32>> = HashMap::new();
    let mut ticks = tokio::time::interval(POLL_EVERY);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while !stop.load(Ordering::SeqCst) {
        ticks.tick().await;
        let taken = Instant::now();
        let rows = match sqlx::query("SELECT id, owner FROM runs WHERE status = 'running'")
            .fetch_all(&mut connection)
            .await
        {
            Ok(rows) => rows,
            Err(error) => {
                eprintln!("chaos poller: {error}");
                continue;
            }
        };
        let mut running = HashMap::with_capacity(rows.len());
        for row in rows {
            let id: String = row.get("id");
            let owner: Option<String> = row.get("owner");
            let Ok(id) = id.parse::<Uuid>() else { continue };
            if let Some(owner) = &owner
                && !pids.contains_key(owner)
            {
                let instances = sqlx::query("SELECT id, name FROM instances")
                    .fetch_all(&mut connection)
                    .await
                    .unwrap_or_default();
                for instance in instances {
                    let name: String = instance.get("name");
                    if let Some(pid) = name.rsplit(':').next().and_then(|p| p.parse().ok()) {
                        pids.insert(instance.get("id"), pid);
                    }
                }
            }
            let pid = owner.as_ref().and_then(|owner| pids.get(owner).copied());
            if let Some(before) = owners.get(&id)
                && *before != pid
            {
                let mut kills = shared.kills.lock().unwrap();
                let kill = kills
                    .iter_mut()
                    .rev()
                    .find(|kill| Some(kill.pid) == *before);
                let after_kill = kill.map(|kill| {
                    let after = taken.saturating_duration_since(kill.at);
                    kill.adopted.entry(id).or_insert(after);
                    after
                });
                shared.adoptions.lock().unwrap().push(Adoption {
                    run: id,
                    from_pid: *before,
                    to_pid: pid,
                    after_kill,
                });
            }
            running.insert(id, pid);
        }
        owners = running.clone();
        *shared.snapshot.lock().unwrap() = Snapshot {
            taken: Some(taken),
            running,
        };
    }
}

/// The chaos run: see the module.
pub async fn run(settings: &Settings) -> Report {
    let schema = TestSchema::try_create()
        .await
        .unwrap_or_else(|message| panic!("{message}"));
    let dir = tempfile::tempdir().unwrap();
    let llm = start_llm(settings).await;
    let log = dir.path().join("calls.jsonl");
    let config = TestConfig::new(&llm.base_url())
        .store(schema.url())
        .mcp_log(&log)
        .extra(&format!(
            "[server]\nrun_lease_s = {}\nmax_runs_per_user = 100000\nshutdown_grace_s = 5\n",
            settings.lease_s
        ));
    std::fs::write(dir.path().join("agentloop.toml"), config.toml()).unwrap();
    let key = create_key(dir.path()).await;

    let mut instances = Vec::with_capacity(INSTANCES);
    for slot in 0..INSTANCES {
        instances.push(Instance::start(dir.path(), slot).await);
    }
    let shared = Arc::new(Shared::default());
    *shared.live.lock().unwrap() = instances
        .iter()
        .map(|i| Some((i.pid, i.address.clone())))
        .collect();
    let stop_polling = Arc::new(AtomicBool::new(false));
    let poller = tokio::spawn(poll_owners(
        schema.url().to_string(),
        shared.clone(),
        stop_polling.clone(),
    ));

    let started = Instant::now();
    let client = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(5))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    let all_ended_in_time = Arc::new(AtomicBool::new(false));
    let work = {
        let shared = shared.clone();
        let key = key.clone();
        let all_ended_in_time = all_ended_in_time.clone();
        let settings = settings.clone();
        async move {
            let mut starts = Vec::with_capacity(settings.runs);
            for index in 0..settings.runs {
                while shared.in_flight() >= settings.concurrency {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                shared.starting.fetch_add(1, Ordering::SeqCst);
                starts.push(tokio::spawn(start_one(
                    client.clone(),
                    shared.clone(),
                    key.clone(),
                    index,
                )));
            }
            let mut not_started = Vec::new();
            for start in starts {
                if let Err(error) = start.await.unwrap() {
                    not_started.push(error);
                }
            }
            // Every run ended: no run in progress in a snapshot read after the last start.
            let last_start = Instant::now();
            let deadline = last_start + settings.deadline;
            loop {
                let done = {
                    let snapshot = shared.snapshot.lock().unwrap();
                    snapshot.taken.is_some_and(|taken| taken > last_start)
                        && snapshot.running.is_empty()
                };
                if done {
                    all_ended_in_time.store(true, Ordering::SeqCst);
                    break;
                }
                if Instant::now() > deadline {
                    break;
                }
                tokio::time::sleep(POLL_EVERY).await;
            }
            shared.finished.store(true, Ordering::SeqCst);
            not_started
        }
    };
    let (not_started, ()) = tokio::join!(
        work,
        kill_and_restart(dir.path(), &mut instances, &shared, settings.kill_every)
    );
    let wall = started.elapsed();
    stop_polling.store(true, Ordering::SeqCst);
    poller.await.unwrap();

    let mut connection = PgConnection::connect(schema.url()).await.unwrap();
    let stored: Vec<(Uuid, String, String)> =
        sqlx::query("SELECT id, query, status FROM runs ORDER BY started_at")
            .fetch_all(&mut connection)
            .await
            .unwrap()
            .into_iter()
            .map(|row| {
                let id: String = row.get("id");
                (id.parse().unwrap(), row.get("query"), row.get("status"))
            })
            .collect();
    let acknowledged = shared.acknowledged.lock().unwrap().clone();
    let missing: Vec<Uuid> = acknowledged
        .keys()
        .filter(|id| !stored.iter().any(|(stored, _, _)| stored == *id))
        .copied()
        .collect();

    // Each run as the API tells it, from the live instances in turn.
    let addresses: Vec<String> = instances.iter().map(|i| i.address.clone()).collect();
    let reader = reqwest::Client::new();
    let runs: Vec<RunOutcome> = futures::stream::iter(stored.iter().enumerate())
        .map(|(n, (id, query, _))| {
            let address = addresses[n % addresses.len()].clone();
            let reader = reader.clone();
            let key = key.clone();
            let acknowledged = acknowledged.contains_key(id);
            async move { outcome(&reader, &address, &key, *id, query, acknowledged).await }
        })
        .buffer_unordered(8)
        .collect()
        .await;

    let calls = read_test_mcp_log(&log);
    let mut notes = Vec::new();
    let mut sleeps = 0usize;
    for call in &calls {
        match call["tool"].as_str() {
            Some("slow_record") => notes.push(call["note"].as_str().unwrap_or_default()),
            Some("sleep") => sleeps += 1,
            _ => {}
        }
    }
    let records_executed = notes.len();
    let duplicates = duplicated_effects(notes);
    let sleeps_run_again = sleeps.saturating_sub(stored.len());

    let store_tables: Vec<(String, u64)> = sqlx::query(
        "SELECT c.relname::text AS name, pg_total_relation_size(c.oid) AS bytes \
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
         WHERE n.nspname = current_schema() AND c.relkind = 'r' ORDER BY bytes DESC",
    )
    .fetch_all(&mut connection)
    .await
    .unwrap()
    .into_iter()
    .map(|row| {
        let bytes: i64 = row.get("bytes");
        (row.get("name"), bytes as u64)
    })
    .collect();
    let store_bytes = store_tables.iter().map(|(_, b)| b).sum();
    let _ = connection.close().await;

    let mut server_warnings = Vec::new();
    let mut server_warning_count = 0;
    for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.starts_with("serve-") {
            continue;
        }
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text
            .lines()
            .filter(|line| line.contains("WARN") || line.contains("ERROR"))
        {
            server_warning_count += 1;
            if server_warnings.len() < SHOWN {
                server_warnings.push(format!("{name}: {line}"));
            }
        }
    }

    let kills = shared.kills.lock().unwrap().clone();
    let adoptions = shared.adoptions.lock().unwrap().clone();
    let start_retries = shared.start_retries.load(Ordering::SeqCst);
    drop(instances);
    drop(llm);
    if std::env::var_os("AGENTLOOP_CHAOS_KEEP").is_some() {
        let kept = dir.keep();
        eprintln!(
            "chaos: kept {} and schema {}",
            kept.display(),
            schema.name()
        );
    } else {
        schema.drop_schema().await;
    }
    Report {
        settings: settings.clone(),
        runs,
        not_started,
        missing,
        start_retries,
        start_errors: shared.start_errors.lock().unwrap().clone(),
        kills,
        adoptions,
        duplicates,
        records_executed,
        sleeps_run_again,
        store_bytes,
        store_tables,
        wall,
        all_ended_in_time: all_ended_in_time.load(Ordering::SeqCst),
        server_warnings,
        server_warning_count,
    }
}

/// A run's status and records (`GET /v1/runs/{id}`) and its whole replay (`/events`).
async fn outcome(
    client: &reqwest::Client,
    address: &str,
    key: &str,
    id: Uuid,
    query: &str,
    acknowledged: bool,
) -> RunOutcome {
    let run: Value = client
        .get(format!("{address}/v1/runs/{id}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let status = run["status"].as_str().unwrap_or_default().to_string();
    let error = run["error_code"]
        .as_str()
        .map(|code| format!("{code}: {}", run["error_message"].as_str().unwrap_or("")));
    let outcome_unknown = run["execution_trace"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|record| {
            record["error"]
                .as_str()
                .is_some_and(|error| error.starts_with("outcome_unknown"))
        })
        .count();
    let mut resumed = 0;
    let mut replay_problem = None;
    if status != "running" {
        let response = client
            .get(format!("{address}/v1/runs/{id}/events"))
            .bearer_auth(key)
            .send()
            .await
            .unwrap();
        let events = read_sse(response).await;
        resumed = events.iter().filter(|e| e.event == "run_resumed").count();
        let seqs: Vec<u64> = events
            .iter()
            .map(|e| e.data["seq"].as_u64().unwrap_or(0))
            .collect();
        let kinds: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
        replay_problem = report::replay_problem(&seqs, &kinds);
    }
    RunOutcome {
        id,
        query: query.to_string(),
        acknowledged,
        status,
        error,
        outcome_unknown,
        resumed,
        replay_problem,
    }
}
