//! What a run in flight holds in its task: the server spawns `Agent::run_begun`'s future for
//! each run, and keeps it for as long as the run lives, mostly waiting for the LLM; with ten
//! thousand runs at once, each kilobyte of it is ten megabytes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use agentloop::{RunRequest, RunStatus, Runtime, core::EventSink};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use serde_json::json;

/// The most a run's future may take. It was 6.2 KB here (6.6 KB in the server's release build)
/// when the ways into the driver were layers of `async fn`s, each keeping room for the run's
/// machine, services and persistence for the whole run (its arguments, moved on into the
/// future it awaits); 3.8 KB without them (4.2 KB). 1.8 KB once the driver's two inner
/// `async fn`s were plain functions building their futures (an `async fn` keeps each argument
/// twice: as received, and moved into its body) and `run_begun` made the driver's future in a
/// block of its own (the machine, borrowed and moved on there, kept room in it).
const MOST_BYTES: usize = 2_500;

#[derive(Default)]
struct LastSeq(AtomicU64);

impl EventSink for LastSeq {
    fn emit(&self, event: agentloop::Event) {
        self.0.fetch_max(event.seq, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_run_in_flight_holds_a_few_kilobytes_in_its_task() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::text("done"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let runtime = Runtime::start(&common::config_with_store(&llm, None, &url, ""))
        .await
        .unwrap();
    let agent = runtime.agent();
    let begun = agent.begin(RunRequest::new("echo hello")).await.unwrap();
    let sink = Arc::new(LastSeq::default());

    let run = agent.run_begun(begun, sink.clone(), Default::default());
    let bytes = std::mem::size_of_val(&run);
    println!("a run's future: {bytes} bytes");
    assert!(
        bytes <= MOST_BYTES,
        "a run's future takes {bytes} bytes (at most {MOST_BYTES})"
    );
    // The future measured is the one that runs.
    let outcome = run.await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(outcome.answer.as_deref(), Some("done"));
    assert!(sink.0.load(Ordering::SeqCst) > 0);
}
