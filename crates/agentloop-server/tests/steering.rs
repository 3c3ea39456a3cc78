//! `POST /v1/runs/{id}/messages`: a message sent while a run works joins the conversation
//! before its next LLM call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::sse::parse_sse;
use agentloop_test_support::{mcp::wait_for_call, scripted_llm::Reply};
use common::*;
use serde_json::{Value, json};
use std::time::Duration;

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
    let (run_id, reading) = start_run(&server, &key, "what is the total?").await;
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

/// Starts a streamed run of `query`; its id from its first event, and the rest of its events
/// read on until it ends.
async fn start_run(
    server: &TestServer,
    key: &str,
    query: &str,
) -> (String, tokio::task::JoinHandle<Vec<Sse>>) {
    let mut response = server
        .post("/v1/runs", key)
        .json(&json!({"query": query}))
        .send()
        .await
        .unwrap();
    let mut text = String::new();
    while !text.contains("\n\n") {
        let chunk = response.chunk().await.unwrap().unwrap();
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
    let run_id = parse_sse(&text).remove(0).data["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let reading = tokio::spawn(async move {
        while let Some(chunk) = response.chunk().await.unwrap() {
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        parse_sse(&text)
    });
    (run_id, reading)
}

/// A server scripted with `replies` under `config`, a run of ann's started, and "in euros
/// please" sent to it while its first LLM call is under way: the server (to shut down), the
/// answer to the message and the run's events once it ends.
async fn steered_during_the_first_call(
    replies: Vec<Reply>,
    config: &str,
) -> (TestServer, reqwest::Response, Vec<Sse>) {
    let server = TestServer::start(replies, config).await;
    let key = server.key("ann").await;
    let (run_id, reading) = start_run(&server, &key, "what is the total?").await;
    agentloop_test_support::wait::until("the LLM call", Duration::from_secs(10), || {
        server.llm.requests().len() == 1
    })
    .await;
    let answer = server
        .post(&format!("/v1/runs/{run_id}/messages"), &key)
        .json(&json!({"text": "in euros please"}))
        .send()
        .await
        .unwrap();
    let events = reading.await.unwrap();
    (server, answer, events)
}

#[tokio::test]
async fn a_message_during_the_last_allowed_llm_call_is_refused_as_too_late() {
    let (server, refused, events) = steered_during_the_first_call(
        vec![Reply::text("The total is 100 dollars.").with_delay(Duration::from_secs(2))],
        "[agent]\nmax_iterations = 1\n",
    )
    .await;
    assert_eq!(refused.status(), 409);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "too_late", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(message.contains("once the run ends"), "{message}");

    assert!(
        !kinds(&events).contains(&"user_message"),
        "{:?}",
        kinds(&events)
    );
    assert_eq!(events.last().unwrap().data["status"], "completed");
    assert_eq!(server.llm.requests().len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn a_message_taken_while_the_model_answers_is_answered_by_one_more_call() {
    let (server, queued, events) = steered_during_the_first_call(
        vec![
            Reply::text("The total is 100 dollars.").with_delay(Duration::from_secs(2)),
            Reply::text("That is 92 euros."),
        ],
        "[agent]\nmax_iterations = 2\n",
    )
    .await;
    assert_eq!(queued.status(), 202);

    let order = kinds(&events);
    assert!(order.contains(&"user_message"), "{order:?}");
    assert_eq!(events.last().unwrap().data["status"], "completed");
    let requests = server.llm.requests();
    assert_eq!(requests.len(), 2);
    let last = requests[1]["messages"].as_array().unwrap().clone();
    assert_eq!(last.last().unwrap()["content"], "in euros please");
    server.shutdown().await;
}
