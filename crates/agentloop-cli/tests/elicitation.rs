//! MCP elicitation over HTTP, with the real `agentloop serve` and the Python SDK's server
//! (`crates/agentloop-mcp/tests/python/server.py`): a tool's question is an `input_required`
//! event of kind `elicitation` that a client who left and came back still sees, answered with
//! `POST /v1/runs/{id}/input {"elicitation": ...}`; and a process killed with `kill -9` while
//! a question is open: after the restart the call's outcome is unknown (the run's recovery
//! rules), the question is gone, and the run completes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{path::Path, time::Duration};

use agentloop_test_support::{
    config::TestConfig,
    requires,
    scripted_llm::{Reply, ScriptedLlm},
    sse::{Sse, read_sse, read_sse_until},
    wait::eventually,
};
use serde_json::{Value, json};
use uuid::Uuid;

/// The configuration of `llm`, the Python server as `py`, a SQLite file store; `None`
/// without the Python SDK (skipped, saying why).
fn config(dir: &Path, llm: &ScriptedLlm) -> Option<()> {
    let python = requires::mcp_python()?;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    let extra = format!(
        "[server]\nrun_lease_s = 1\nshutdown_grace_s = 5\n\n[mcp_servers.py]\ncommand = {python:?}\n\
         args = [{script:?}]\nstartup_timeout_s = 60\n"
    );
    common::write_test_config(dir, &TestConfig::new(&llm.base_url()).extra(&extra));
    Some(())
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

/// Starts a run over SSE and reads it until its question; the connection is then dropped.
async fn start_until_question(address: &str, key: &str) -> (Uuid, Vec<Sse>) {
    let response = client()
        .post(format!("{address}/v1/runs"))
        .bearer_auth(key)
        .json(&json!({"query": "book a table on Friday"}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let events = read_sse_until(response, "input_required").await;
    let run_id = events[0].data["run_id"].as_str().unwrap().parse().unwrap();
    (run_id, events)
}

async fn answer(address: &str, key: &str, run_id: Uuid, body: Value) -> (u16, Value) {
    let response = client()
        .post(format!("{address}/v1/runs/{run_id}/input"))
        .bearer_auth(key)
        .json(&body)
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

async fn run_info(address: &str, key: &str, run_id: Uuid) -> Value {
    client()
        .get(format!("{address}/v1/runs/{run_id}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

fn question_of(event: &Sse) -> &Value {
    assert_eq!(event.event, "input_required");
    assert_eq!(event.data["kind"], "elicitation", "{}", event.data);
    &event.data["elicitation"]
}

#[tokio::test]
async fn a_question_is_answered_after_the_client_comes_back() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__book", json!({"day": "Friday"})),
        Reply::text("Booked for Ada."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let Some(()) = config(dir.path(), &llm) else {
        return;
    };
    let key = common::create_key(dir.path(), "ann").await;
    let served = common::Served::start(dir.path());
    let address = &served.address;

    let (run_id, first) = start_until_question(address, &key).await;
    let asked = question_of(first.last().unwrap()).clone();
    assert_eq!(asked["server"], "py");
    assert_eq!(asked["tool"], "py.book");
    assert_eq!(asked["mode"], "form");
    assert_eq!(first.last().unwrap().data["question"], asked["message"]);

    // The client left; coming back, it sees the question.
    let again = client()
        .get(format!("{address}/v1/runs/{run_id}/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let replayed = read_sse_until(again, "input_required").await;
    assert_eq!(question_of(replayed.last().unwrap()), &asked);

    // An answer that does not fit the schema is refused, and the question stays open.
    let (status, refused) = answer(
        address,
        &key,
        run_id,
        json!({"elicitation": {"action": "accept", "content": {"guests": "many"}}}),
    )
    .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["code"], "invalid_elicitation", "{refused}");

    let (status, taken) = answer(
        address,
        &key,
        run_id,
        json!({"elicitation": {"id": asked["id"], "action": "accept", "content": {"name": "Ada"}}}),
    )
    .await;
    assert_eq!(status, 200, "{taken}");
    assert_eq!(taken["elicitation_id"], asked["id"]);

    // Answered once: a second answer finds no question.
    let (status, again) = answer(
        address,
        &key,
        run_id,
        json!({"elicitation": {"action": "decline"}}),
    )
    .await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "no_open_question");

    let rest = client()
        .get(format!("{address}/v1/runs/{run_id}/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let events = read_sse(rest).await;
    assert_eq!(events.last().unwrap().event, "done");
    let run = eventually("the run to end", Duration::from_secs(30), || async {
        let run = run_info(address, &key, run_id).await;
        (run["status"] == "completed").then_some(run)
    })
    .await;
    let trace = &run["execution_trace"][0];
    assert_eq!(
        trace["result"], "booked Friday for Ada, 2 guests, inside",
        "{run}"
    );
}

/// `kill -9` while a question is open: the call was in flight, so the run's recovery rules
/// apply: `py.book` is neither read-only nor idempotent, its outcome is unknown and the model
/// is told so; the question went with the process.
#[tokio::test]
async fn a_run_killed_while_a_question_is_open_goes_on_with_the_calls_outcome_unknown() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__book", json!({"day": "Friday"})),
        Reply::text("I could not tell whether the table was booked."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let Some(()) = config(dir.path(), &llm) else {
        return;
    };
    let key = common::create_key(dir.path(), "ann").await;
    let mut first = common::Served::start(dir.path());
    let (run_id, _) = start_until_question(&first.address, &key).await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let second = common::Served::start(dir.path());
    let address = &second.address;
    let run = eventually("the run to end", Duration::from_secs(60), || async {
        let run = run_info(address, &key, run_id).await;
        let status = run["status"].as_str().unwrap_or_default().to_owned();
        (status != "running" && !status.is_empty()).then_some(run)
    })
    .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["execution_trace"][0]["status"], "error", "{run}");
    let told = llm.requests().last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(told.contains("outcome_unknown"), "{told}");

    // The log keeps the question, then the resumption and the call's outcome.
    let events = read_sse(
        client()
            .get(format!("{address}/v1/runs/{run_id}/events"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let kinds: Vec<&str> = events.iter().map(|event| event.event.as_str()).collect();
    let asked = kinds.iter().position(|kind| *kind == "input_required");
    let resumed = kinds.iter().position(|kind| *kind == "run_resumed");
    assert!(asked.is_some() && asked < resumed, "{kinds:?}");

    let (status, gone) = answer(
        address,
        &key,
        run_id,
        json!({"elicitation": {"action": "accept", "content": {"name": "Ada"}}}),
    )
    .await;
    assert_eq!(status, 409, "{gone}");
}
