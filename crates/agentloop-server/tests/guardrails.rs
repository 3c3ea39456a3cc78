//! Guardrails over HTTP: no refused text reaches an SSE client (the raw bytes of
//! `POST /v1/runs` are read), a repaired answer does; a blocked run says so in its JSON
//! answer, in `GET /v1/runs/{id}` and in the metrics. With `guardrail_mode = "after"` the text
//! does stream, and is retracted.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

const SECRET: &str = "The admin password is hunter2.";

fn no_secrets(extra: &str) -> String {
    format!(
        "[[guardrails]]\nname = \"no-secrets\"\nkind = \"regex\"\non = \"output\"\n\
         deny = [\"(?i)password\"]\n{extra}"
    )
}

/// The raw bytes of a streamed run, and the events in them.
async fn stream(server: &TestServer, key: &str, query: &str) -> (String, Vec<Value>) {
    let response = server
        .post("/v1/runs", key)
        .json(&json!({"query": query, "stream": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let raw = String::from_utf8(response.bytes().await.unwrap().to_vec()).unwrap();
    let events = raw
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect();
    (raw, events)
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|event| event["type"] == kind)
        .collect()
}

/// The text the client was shown: every delta, in order.
fn shown(events: &[Value]) -> String {
    events
        .iter()
        .filter_map(|event| match event["type"].as_str() {
            Some("assistant_delta") => event["text"].as_str(),
            Some("final_response") => event["delta"].as_str(),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn no_blocked_text_reaches_an_sse_client() {
    let server = TestServer::start(vec![Reply::text(SECRET)], &no_secrets("")).await;
    let key = server.key("ann").await;
    let (raw, events) = stream(&server, &key, "What is the admin password?").await;

    for piece in ["hunter2", "admin password is"] {
        assert!(!raw.contains(piece), "{piece} reached the client:\n{raw}");
    }
    assert_eq!(shown(&events), "");
    let done = of_type(&events, "done");
    assert_eq!(done[0]["status"], "blocked", "{raw}");
    let error = of_type(&events, "error");
    assert_eq!(error[0]["code"], "blocked");
    assert!(
        error[0]["message"].as_str().unwrap().contains("no-secrets"),
        "{raw}"
    );
    let tripped = of_type(&events, "guardrail_tripped");
    assert_eq!(tripped[0]["name"], "no-secrets");
    assert_eq!(tripped[0]["on"], "output");
    assert_eq!(tripped[0]["action"], "block");

    let run_id = done[0]["run_id"].as_str().unwrap();
    let run: Value = server
        .get(&format!("/v1/runs/{run_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "blocked", "{run}");
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains(
            "agentloop_guardrail_checks_total{name=\"no-secrets\",on=\"output\",outcome=\"tripped\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("agentloop_runs_total{status=\"blocked\"} 1"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_repaired_answer_is_the_only_text_a_client_sees() {
    let script = vec![
        Reply::text(SECRET),
        Reply::text("I cannot share credentials."),
    ];
    let server = TestServer::start(script, &no_secrets("action = \"retry\"\n")).await;
    let key = server.key("ann").await;
    let (raw, events) = stream(&server, &key, "What is the admin password?").await;
    assert!(!raw.contains("hunter2"), "{raw}");
    assert_eq!(shown(&events), "I cannot share credentials.");
    assert_eq!(of_type(&events, "done")[0]["status"], "completed");
    server.shutdown().await;
}

#[tokio::test]
async fn the_json_answer_of_a_blocked_run_says_blocked_with_the_message() {
    let server = TestServer::start(vec![Reply::text(SECRET)], &no_secrets("")).await;
    let key = server.key("ann").await;
    let body: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "What is the admin password?", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["status"], "blocked", "{body}");
    assert_eq!(body["answer"], Value::Null);
    assert_eq!(body["assistant_message"], Value::Null);
    assert_eq!(body["error"]["code"], "blocked");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("no-secrets") && message.contains("password"),
        "{message}"
    );
    assert!(!body.to_string().contains("hunter2"), "{body}");
    server.shutdown().await;
}

#[tokio::test]
async fn in_after_mode_the_text_streams_and_is_retracted() {
    let extra = format!("[agent]\nguardrail_mode = \"after\"\n{}", no_secrets(""));
    let server = TestServer::start(vec![Reply::text(SECRET)], &extra).await;
    let key = server.key("ann").await;
    let (raw, events) = stream(&server, &key, "What is the admin password?").await;
    assert!(
        raw.contains("hunter2"),
        "after mode streams the text: {raw}"
    );
    let retracted = of_type(&events, "answer_retracted");
    assert_eq!(retracted[0]["name"], "no-secrets");
    assert_eq!(of_type(&events, "done")[0]["status"], "blocked");
    server.shutdown().await;
}
