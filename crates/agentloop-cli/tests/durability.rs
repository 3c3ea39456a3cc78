//! Runs survive `kill -9` of the process that runs them: the real `agentloop serve`, killed at
//! the kinds of points a crash meets (during a tool call, while the model is asked, while a
//! run is paused), then started again on the same SQLite file, or replaced by a second
//! instance on the same PostgreSQL. Each time the run completes from its last saved step, no
//! saved call runs twice, the model is told of a mutating call whose outcome is unknown, and
//! `/events` replays the whole run without a gap.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{path::Path, time::Duration};

use agentloop_test_support::{
    config::TestConfig,
    mcp::{read_test_mcp_log, wait_for_call},
    postgres::TestSchema,
    scripted_llm::{Reply, ScriptedLlm},
    sse::{Sse, read_sse},
    wait::eventually,
};
use serde_json::{Value, json};
use uuid::Uuid;

/// A short lease, so that a killed instance's runs are adopted within a second or two.
const LEASE: &str = "[server]\nrun_lease_s = 1\nshutdown_grace_s = 5\n";

fn config(dir: &Path, llm: &ScriptedLlm, store: Option<&str>) {
    let mut config = TestConfig::new(&llm.base_url())
        .mcp_log(&dir.join("calls.jsonl"))
        .extra(LEASE);
    if let Some(url) = store {
        config = config.store(url);
    }
    common::write_test_config(dir, &config);
}

/// Starts a run over SSE and returns its id (from its first event); the run goes on without
/// the stream.
async fn start_run(address: &str, key: &str, query: &str) -> Uuid {
    let mut response = reqwest::Client::new()
        .post(format!("{address}/v1/runs"))
        .bearer_auth(key)
        .json(&json!({"query": query}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let mut text = String::new();
    while let Some(chunk) = response.chunk().await.unwrap() {
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(frame) = text.split("\n\n").find(|frame| frame.contains("run_id")) {
            let data = frame
                .lines()
                .find_map(|line| line.strip_prefix("data:"))
                .unwrap();
            let event: Value = serde_json::from_str(data.trim()).unwrap();
            return event["run_id"].as_str().unwrap().parse().unwrap();
        }
    }
    panic!("the run's stream ended before its first event: {text}");
}

async fn run_info(address: &str, key: &str, run_id: Uuid) -> Value {
    reqwest::Client::new()
        .get(format!("{address}/v1/runs/{run_id}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// Waits for the run to end (adopted and finished by another process).
async fn ended(address: &str, key: &str, run_id: Uuid) -> Value {
    eventually("the run to end", Duration::from_secs(60), || async {
        let run = run_info(address, key, run_id).await;
        let status = run["status"].as_str().unwrap_or_default().to_string();
        (status != "running" && !status.is_empty()).then_some(run)
    })
    .await
}

/// The whole run as `/events` replays it.
async fn events(address: &str, key: &str, run_id: Uuid) -> Vec<Sse> {
    let response = reqwest::Client::new()
        .get(format!("{address}/v1/runs/{run_id}/events"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    read_sse(response).await
}

/// Seqs from 1 without a gap or a repeat, ending with `done`, one `run_resumed`.
fn assert_whole(events: &[Sse], reason: &str) {
    let seqs: Vec<u64> = events
        .iter()
        .map(|event| event.data["seq"].as_u64().unwrap())
        .collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "gapless: {:?}", kinds(events));
    assert_eq!(events.first().unwrap().event, "run_started");
    assert_eq!(events.last().unwrap().event, "done");
    let resumed: Vec<&Sse> = events
        .iter()
        .filter(|event| event.event == "run_resumed")
        .collect();
    assert_eq!(resumed.len(), 1, "{:?}", kinds(events));
    assert_eq!(resumed[0].data["reason"], reason);
}

fn kinds(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|event| event.event.as_str()).collect()
}

/// The tool messages the model was sent in its last request.
fn tool_messages(llm: &ScriptedLlm) -> Vec<(String, String)> {
    let requests = llm.requests();
    let last = requests.last().unwrap();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| {
            (
                message["tool_call_id"].as_str().unwrap().to_string(),
                message["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn calls_of(dir: &Path, tool: &str) -> Vec<Value> {
    read_test_mcp_log(&dir.join("calls.jsonl"))
        .into_iter()
        .filter(|call| call["tool"] == tool)
        .collect()
}

/// Killed while a mutating call and a read-only call run: after the restart the read-only one
/// runs again, the mutating one does not, and the model is told its outcome is unknown.
#[tokio::test]
async fn a_run_killed_during_its_tool_calls_goes_on_after_a_restart_without_repeating_a_change() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            (
                "test__slow_record",
                json!({"note": "invoice-7", "ms": 60_000}),
            ),
            // Long enough to be under way when the process is killed, short enough to run
            // again after the restart.
            ("test__sleep", json!({"ms": 4_000})),
        ]),
        Reply::text("I could not confirm the change; here is what I know."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &llm, None);
    let key = common::create_key(dir.path(), "ann").await;

    let mut first = common::Served::start(dir.path());
    let run_id = start_run(&first.address, &key, "record invoice 7").await;
    let log = dir.path().join("calls.jsonl");
    let started = wait_for_call(&log, "slow_record").await;
    wait_for_call(&log, "sleep").await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let second = common::Served::start(dir.path());
    let run = ended(&second.address, &key, run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(
        run["answer"],
        "I could not confirm the change; here is what I know."
    );

    // The change ran once; the read-only call ran again.
    assert_eq!(calls_of(dir.path(), "slow_record").len(), 1);
    assert_eq!(calls_of(dir.path(), "sleep").len(), 2);
    assert_eq!(
        started["idempotency_key"],
        format!("{run_id}:call_1"),
        "{started}"
    );

    // The model was told.
    let told = tool_messages(&llm);
    assert_eq!(told.len(), 2, "{told:?}");
    let unknown: Value = serde_json::from_str(&told[0].1).unwrap();
    assert_eq!(unknown["code"], "outcome_unknown", "{unknown}");
    assert_eq!(told[1].1, "slept 4000 ms");

    let events = events(&second.address, &key, run_id).await;
    assert_whole(&events, "restarted");
    let executed: Vec<(&str, &str)> = events
        .iter()
        .filter(|event| event.event == "tool_executed")
        .map(|event| {
            (
                event.data["tool"].as_str().unwrap(),
                event.data["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        executed,
        [("test.slow_record", "error"), ("test.sleep", "success")]
    );
    // The question and every step were kept: one question, one answer in the session.
    let session: Value = reqwest::Client::new()
        .get(format!(
            "{}/v1/sessions/{}",
            second.address,
            run["session_id"].as_str().unwrap()
        ))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let dialogue: Vec<&str> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["kind"] == "dialogue")
        .map(|message| message["content"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(
        dialogue,
        [
            "record invoice 7",
            "I could not confirm the change; here is what I know."
        ]
    );
}

/// Killed while the model was asked: the next start asks it again and the run completes.
#[tokio::test]
async fn a_run_killed_while_the_model_thinks_is_asked_again_after_a_restart() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("never delivered").with_delay(Duration::from_secs(120)),
        Reply::text("Answered after the restart."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &llm, None);
    let key = common::create_key(dir.path(), "ann").await;

    let mut first = common::Served::start(dir.path());
    let run_id = start_run(&first.address, &key, "what is up?").await;
    eventually("the model to be asked", Duration::from_secs(20), || async {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let second = common::Served::start(dir.path());
    let run = ended(&second.address, &key, run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "Answered after the restart.");
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[0]["messages"], requests[1]["messages"],
        "the same request, again"
    );
    assert_whole(&events(&second.address, &key, run_id).await, "restarted");
}

/// Two instances on one PostgreSQL: the one that owns the run is killed during a mutating
/// call; the other adopts it. A cancel sent to the instance that does not own a run reaches
/// its owner.
#[tokio::test]
async fn another_instance_adopts_the_runs_of_a_killed_one_and_cancels_reach_the_owner() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "test__slow_record",
            json!({"note": "order-9", "ms": 60_000}),
        ),
        Reply::text("Done, as far as I can tell."),
        Reply::tool_call("test__sleep", json!({"ms": 5_000})),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &llm, Some(schema.url()));
    let key = common::create_key(dir.path(), "ann").await;
    let mut a = common::Served::start(dir.path());
    let b = common::Served::start(dir.path());

    let run_id = start_run(&a.address, &key, "record order 9").await;
    let log = dir.path().join("calls.jsonl");
    wait_for_call(&log, "slow_record").await;
    a.child.kill().unwrap();
    a.child.wait().unwrap();
    let run = ended(&b.address, &key, run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(calls_of(dir.path(), "slow_record").len(), 1);
    let told: Value = serde_json::from_str(&tool_messages(&llm)[0].1).unwrap();
    assert_eq!(told["code"], "outcome_unknown");
    assert_whole(&events(&b.address, &key, run_id).await, "adopted");

    // A run on a third instance, cancelled through b.
    let c = common::Served::start(dir.path());
    let run_id = start_run(&c.address, &key, "wait a while").await;
    wait_for_call(&log, "sleep").await;
    let cancelled = reqwest::Client::new()
        .post(format!("{}/v1/runs/{run_id}/cancel", b.address))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 202);
    let run = ended(&b.address, &key, run_id).await;
    assert_eq!(run["status"], "cancelled", "{run}");
    schema.drop_schema().await;
}

/// Killed while paused for an approval: after the restart the approval is given, the call
/// runs once, and the run completes.
#[tokio::test]
async fn a_run_killed_while_paused_takes_its_answer_after_a_restart() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "refund-3"})),
        Reply::text("Refunded."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&dir.path().join("calls.jsonl"))
        .extra(LEASE)
        .extra("[tools.\"test.record\"]\nneeds_approval = true\n");
    common::write_test_config(dir.path(), &config);
    let key = common::create_key(dir.path(), "ann").await;

    let mut first = common::Served::start(dir.path());
    let run_id = start_run(&first.address, &key, "refund order 3").await;
    let paused = ended(&first.address, &key, run_id).await;
    assert_eq!(paused["status"], "awaiting_input", "{paused}");
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let second = common::Served::start(dir.path());
    let answered = reqwest::Client::new()
        .post(format!("{}/v1/runs/{run_id}/input", second.address))
        .bearer_auth(&key)
        .json(&json!({"approve": ["call_1"], "stream": false}))
        .send()
        .await
        .unwrap();
    let answered: Value = answered.json().await.unwrap();
    assert_eq!(answered["status"], "completed", "{answered}");
    assert_eq!(answered["answer"], "Refunded.");
    assert_eq!(calls_of(dir.path(), "record").len(), 1);
    let events = events(&second.address, &key, run_id).await;
    let seqs: Vec<u64> = events
        .iter()
        .map(|e| e.data["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "{:?}",
        kinds(&events)
    );
}

/// SIGTERM hands the runs over: the instance finishes the call under way, stops before its
/// next LLM call and exits; the other instance adopts the run at once.
#[tokio::test]
async fn sigterm_hands_a_run_over_to_another_instance() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", json!({"ms": 2_000})),
        Reply::text("Handed over and done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    // A lease far longer than the test: only the handover can explain a quick adoption.
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&dir.path().join("calls.jsonl"))
        .store(schema.url())
        .extra("[server]\nrun_lease_s = 600\nshutdown_grace_s = 20\n");
    common::write_test_config(dir.path(), &config);
    let key = common::create_key(dir.path(), "ann").await;
    let a = common::Served::start(dir.path());
    let b = common::Served::start(dir.path());

    let run_id = start_run(&a.address, &key, "take your time").await;
    wait_for_call(&dir.path().join("calls.jsonl"), "sleep").await;
    let (status, stderr) = a.terminate().await;
    assert!(status.success(), "{status:?}: {stderr}");
    let run = ended(&b.address, &key, run_id).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "Handed over and done.");
    assert_eq!(
        calls_of(dir.path(), "sleep").len(),
        1,
        "the call finished before the handover"
    );
    assert_whole(&events(&b.address, &key, run_id).await, "adopted");
    schema.drop_schema().await;
}

/// `agentloop run` killed during a mutating call; `agentloop resume RUN_ID` continues it in the
/// terminal once the killed process has been silent for the lease.
#[tokio::test]
async fn a_killed_cli_run_is_continued_by_agentloop_resume() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "test__slow_record",
            json!({"note": "ticket-5", "ms": 60_000}),
        ),
        Reply::text("Resumed in the terminal."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    config(dir.path(), &llm, None);
    let mut run = common::command(dir.path())
        .args(["run", "--json", "close ticket 5"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // Read to the end, not just the first line: a closed pipe would end the run quietly.
    let stdout = run.stdout.take().unwrap();
    let (lines, mut first) = tokio::sync::mpsc::unbounded_channel();
    std::thread::spawn(move || {
        for line in std::io::BufRead::lines(std::io::BufReader::new(stdout)) {
            let Ok(line) = line else { break };
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let event: Value = serde_json::from_str(&first.recv().await.unwrap()).unwrap();
    let run_id = event["run_id"].as_str().unwrap().to_string();
    wait_for_call(&dir.path().join("calls.jsonl"), "slow_record").await;
    run.kill().unwrap();
    run.wait().unwrap();

    let resumed = eventually(
        "the killed run to be resumable",
        Duration::from_secs(30),
        || async {
            let output = common::agentloop(dir.path(), &["resume", &run_id]).await;
            let stderr = common::stderr(&output);
            (!stderr.contains("is not left behind")).then_some(output)
        },
    )
    .await;
    assert!(resumed.status.success(), "{}", common::stderr(&resumed));
    assert_eq!(common::stdout(&resumed).trim(), "Resumed in the terminal.");
    assert_eq!(calls_of(dir.path(), "slow_record").len(), 1);
    let told: Value = serde_json::from_str(&tool_messages(&llm)[0].1).unwrap();
    assert_eq!(told["code"], "outcome_unknown");
}
