//! What a run in flight holds in its task: the server spawns `Agent::run_begun`'s future for
//! each run, and keeps it for as long as the run lives, mostly waiting for the LLM; with ten
//! thousand runs at once, each kilobyte of it is ten megabytes.
//!
//! `cargo bench -p agentloop --bench run_footprint` prints the size of that future
//! (`size_of_val`), in the bench profile (the release build the server ships), then runs it to
//! its end to show that the future measured is the one that runs. A figure, not a limit: it
//! moves with the compiler, and docs/performance.md records it with the changes that moved it.
//! It was 6.6 KB (release) when the ways into the driver were layers of `async fn`s, 4.2 KB
//! without them, and 1.8 KB in the test build once the driver's inner `async fn`s were plain
//! functions building their futures and `run_begun` made the driver's future in a block of
//! its own.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark harness

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use agentloop::{Config, ConfigOrigin, RunRequest, RunStatus, Runtime, core::EventSink};
use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
};
use serde_json::json;

#[derive(Default)]
struct LastSeq(AtomicU64);

impl EventSink for LastSeq {
    fn emit(&self, event: agentloop::Event) {
        self.0.fetch_max(event.seq, Ordering::SeqCst);
    }
}

#[tokio::main]
async fn main() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::text("done"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let text = TestConfig::new(&llm.base_url())
        .llm(&format!("provider = \"{}\"", llm.provider()))
        .store(&url)
        .toml();
    let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    let agent = runtime.agent();
    let begun = agent.begin(RunRequest::new("echo hello")).await.unwrap();
    let sink = Arc::new(LastSeq::default());

    let run = agent.run_begun(begun, sink.clone(), Default::default());
    let bytes = std::mem::size_of_val(&run);
    println!(
        "a run's future (Agent::run_begun, the task the server spawns per run): {bytes} bytes"
    );
    // The future measured is the one that runs.
    let outcome = run.await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    assert!(sink.0.load(Ordering::SeqCst) > 0);
}
