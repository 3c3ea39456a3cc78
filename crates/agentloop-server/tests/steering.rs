//! `POST /v1/runs/{id}/messages`: a message sent while a run works joins the conversation
//! before its next LLM call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::sse::parse_sse;
use agentloop_test_support::{mcp::wait_for_call, scripted_llm::Reply};
use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_message_sent_mid_run_reaches_the_models_next_request() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__sleep", json!({"ms": 1500})),
            Reply::text("In euros: 92."),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let mut response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "what is the total?"}))
        .send()
        .await
        .unwrap();
    // The run's id from its first event; the rest of the stream is read on.
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = response.chunk().await.unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let first = parse_sse(&text).remove(0);
    let run_id = first.data["run_id"].as_str().unwrap().to_string();
    let reading = tokio::spawn(async move {
        while let Some(chunk) = response.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        parse_sse(&text)
    });
    // The tool call runs: the message waits for the LLM call after the batch.
    wait_for_call(&server.mcp_log, "sleep").await;
    let queued = server
        .post(&format!("/v1/runs/{run_id}/messages"), &key)
        .json(&json!({"text": "in euros please"}))
        .send()
        .await
        .unwrap();
    assert_eq!(queued.status(), 202);
    let queued: Value = queued.json().await.unwrap();
    assert_eq!(queued["status"], "queued");

    let events = reading.await.unwrap();
    let steered: Vec<&Sse> = events
        .iter()
        .filter(|event| event.event == "user_message")
        .collect();
    assert_eq!(steered.len(), 1, "{:?}", kinds(&events));
    assert_eq!(steered[0].data["text"], "in euros please");
    let order = kinds(&events);
    let executed = order
        .iter()
        .position(|kind| *kind == "tool_executed")
        .unwrap();
    let message = order
        .iter()
        .position(|kind| *kind == "user_message")
        .unwrap();
    assert!(
        executed < message,
        "never in the middle of a batch: {order:?}"
    );
    assert_eq!(events.last().unwrap().data["status"], "completed");

    let requests = server.llm.requests();
    let last = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(last.last().unwrap()["role"], "user");
    assert_eq!(last.last().unwrap()["content"], "in euros please");

    // Too late now; empty; not yours.
    let finished = server
        .post(&format!("/v1/runs/{run_id}/messages"), &key)
        .json(&json!({"text": "and in yen"}))
        .send()
        .await
        .unwrap();
    assert_eq!(finished.status(), 409);
    let body: Value = finished.json().await.unwrap();
    assert_eq!(body["error"]["code"], "run_finished");
    let empty = server
        .post(&format!("/v1/runs/{run_id}/messages"), &key)
        .json(&json!({"text": "  "}))
        .send()
        .await
        .unwrap();
    assert_eq!(empty.status(), 400);
    let other = server.key("bob").await;
    let not_yours = server
        .post(&format!("/v1/runs/{run_id}/messages"), &other)
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(not_yours.status(), 404);
    server.shutdown().await;
}
