//! Approvals over HTTP: a call that needs approval pauses the run (persisted as
//! `awaiting_input`), `POST /v1/runs/{id}/input` resumes it — also after a server restart —
//! and the test MCP server's log proves what ran and how often.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::{
    mcp::read_test_mcp_log,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::{Value, json};

/// `test.record` needs approval.
const EXTRA: &str = "[tools.\"test.record\"]\nneeds_approval = true\n";

struct Paused {
    run_id: String,
    session_id: String,
    call_id: String,
    events: Vec<Sse>,
}

/// Starts a run whose model asks for `test.record`, and reads its stream to the pause.
async fn pause(server: &TestServer, key: &str) -> Paused {
    let response = server
        .post("/v1/runs", key)
        .json(&json!({"query": "Record the decision"}))
        .send()
        .await
        .unwrap();
    let events = read_sse(response).await;
    let required = events
        .iter()
        .find(|e| e.event == "input_required")
        .expect("input_required");
    assert_eq!(required.data["kind"], "approval");
    let call = &required.data["calls"][0];
    assert_eq!(call["tool"], "test.record");
    assert_eq!(call["arguments"], json!({"note": "ship it"}));
    let done = events.last().unwrap();
    assert_eq!(done.data["type"], "done");
    assert_eq!(done.data["status"], "awaiting_input");
    Paused {
        run_id: done.data["run_id"].as_str().unwrap().to_string(),
        session_id: events[0].data["session_id"].as_str().unwrap().to_string(),
        call_id: call["call_id"].as_str().unwrap().to_string(),
        events,
    }
}

#[tokio::test]
async fn an_approved_call_runs_once_after_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let store_url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let llm = ScriptedLlm::start(vec![Reply::tool_call(
        "test__record",
        json!({"note": "ship it"}),
    )])
    .await;
    let server = TestServer::start_on_logging(llm, &store_url, EXTRA, &log).await;
    let key = server.key("ann").await;
    let paused = pause(&server, &key).await;
    assert!(
        read_test_mcp_log(&log).is_empty(),
        "nothing ran before the approval"
    );
    let run: Value = server
        .get(&format!("/v1/runs/{}", paused.run_id), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "awaiting_input");
    // The session is held while the run waits.
    let busy = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "meanwhile", "session_id": paused.session_id}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(busy).await.0, 409);
    assert!(server.shutdown().await);

    // A new process on the same store.
    let llm = ScriptedLlm::start(vec![Reply::text("Recorded: ship it.")]).await;
    let server = TestServer::start_on_logging(llm, &store_url, EXTRA, &log).await;
    let path = format!("/v1/runs/{}/input", paused.run_id);
    let undecided = server
        .post(&path, &key)
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(undecided).await;
    assert_eq!(
        (status, error["code"].as_str().unwrap()),
        (400, "invalid_answer")
    );
    assert!(
        error["message"].as_str().unwrap().contains(&paused.call_id),
        "{error}"
    );

    let response = server
        .post(&path, &key)
        .json(&json!({"approve": [paused.call_id]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let resumed = read_sse(response).await;
    let first_seq = resumed[0].data["seq"].as_u64().unwrap();
    assert_eq!(
        first_seq,
        paused.events.len() as u64 + 1,
        "events go on after the pause"
    );
    let executed = resumed.iter().find(|e| e.event == "tool_executed").unwrap();
    assert_eq!(executed.data["status"], "success");
    let done = &resumed.last().unwrap().data;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tools_used"], 1);
    assert_eq!(
        read_test_mcp_log(&log).len(),
        1,
        "the approved call ran once"
    );

    // The whole story, from the store, without a gap.
    let all = read_sse(
        server
            .get(&format!("/v1/runs/{}/events", paused.run_id), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let seqs: Vec<u64> = all
        .iter()
        .map(|e| e.data["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(seqs.len(), paused.events.len() + resumed.len());

    // Answering again is too late.
    let again = server
        .post(&path, &key)
        .json(&json!({"approve": [paused.call_id]}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(again).await.0, 409);
    assert_eq!(read_test_mcp_log(&log).len(), 1);
    let session: Value = server
        .get(&format!("/v1/sessions/{}", paused.session_id), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        session["session"]["active_run_id"],
        Value::Null,
        "the session is free again"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_denied_call_never_runs_and_the_model_is_told() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__record", json!({"note": "ship it"})),
            Reply::text("Understood, I did not record it."),
        ],
        EXTRA,
    )
    .await;
    let log = server.mcp_log.clone();
    let key = server.key("ann").await;
    let paused = pause(&server, &key).await;
    let bob = server.key("bob").await;
    let path = format!("/v1/runs/{}/input", paused.run_id);
    let theirs = server
        .post(&path, &bob)
        .json(&json!({"deny": [paused.call_id]}))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(theirs).await.0, 404, "another user's run");

    let body: Value = server
        .post(&path, &key)
        .json(&json!({"deny": [paused.call_id], "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "completed");
    assert_eq!(body["answer"], "Understood, I did not record it.");
    assert_eq!(
        body["agent_metadata"]["execution_trace"][0]["status"],
        "blocked"
    );
    assert!(
        read_test_mcp_log(&log).is_empty(),
        "the denied call never ran"
    );
    let told = server.llm.requests()[1]["messages"].to_string();
    assert!(told.contains("denied"), "{told}");
    server.shutdown().await;
}

#[tokio::test]
async fn a_paused_run_can_be_cancelled() {
    let server = TestServer::start(
        vec![Reply::tool_call("test__record", json!({"note": "ship it"}))],
        EXTRA,
    )
    .await;
    let log = server.mcp_log.clone();
    let key = server.key("ann").await;
    let paused = pause(&server, &key).await;
    let cancel = server
        .post(&format!("/v1/runs/{}/cancel", paused.run_id), &key)
        .send()
        .await
        .unwrap();
    assert_eq!(cancel.status(), 202);
    let rest = read_sse(
        server
            .get(&format!("/v1/runs/{}/events", paused.run_id), &key)
            .header("Last-Event-ID", paused.events.len().to_string())
            .send()
            .await
            .unwrap(),
    )
    .await;
    let done = &rest.last().unwrap().data;
    assert_eq!(done["status"], "cancelled");
    assert!(read_test_mcp_log(&log).is_empty());
    let run: Value = server
        .get(&format!("/v1/runs/{}", paused.run_id), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "cancelled");
    assert_eq!(run["execution_trace"][0]["status"], "skipped");
    assert_eq!(
        server.llm.requests().len(),
        1,
        "no LLM call after the cancel"
    );
    server.shutdown().await;
}
