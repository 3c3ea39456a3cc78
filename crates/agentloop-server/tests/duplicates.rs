//! The same chat request sent several times at once (a client's retry, a component mounted
//! twice), over real HTTP on a SQLite store: every copy follows the one run it names to its end
//! or is refused with a clear 409; none is a 503 from a store constraint, and no stream stays
//! open without events once its run ended.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

/// Rounds of duplicates; each round is one run.
const ROUNDS: usize = 60;
/// Copies of each request, sent at once.
const COPIES: usize = 4;
/// The run takes this long (its one LLM call), so copies arrive while it works.
const LLM_DELAY: Duration = Duration::from_millis(100);
/// Far more than a run of [`LLM_DELAY`] takes: a stream still open then waits for nothing.
const STREAM_LIMIT: Duration = Duration::from_secs(10);

/// What one copy got: its status, and its body (the events, or the JSON error).
async fn send(request: reqwest::RequestBuilder) -> (u16, Value, String) {
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let body = tokio::time::timeout(STREAM_LIMIT, response.text())
        .await
        .unwrap_or_else(|_| {
            panic!("a {status} stream stayed open {STREAM_LIMIT:?} after its run had time to end")
        })
        .unwrap();
    let error = if status == 200 {
        Value::Null
    } else {
        serde_json::from_str::<Value>(&body).unwrap_or_else(|_| panic!("{status}: {body}"))["error"]
            .clone()
    };
    (status, error, body)
}

fn ag_ui_events(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ag_ui_copies_of_one_request_follow_its_one_run() {
    let script = (0..ROUNDS)
        .map(|_| Reply::text("hello").with_delay(LLM_DELAY))
        .collect();
    let server = TestServer::start(script, "").await;
    let key = server.key("ann").await;
    let mut refused = 0;
    for round in 0..ROUNDS {
        // Half the rounds on a new thread (its session made by the run), half on one thread.
        let thread = if round % 2 == 0 {
            format!("thread-{round}")
        } else {
            "one-thread".to_string()
        };
        let body = json!({
            "threadId": thread, "runId": uuid::Uuid::now_v7().to_string(),
            "messages": [{"id": "u", "role": "user", "content": "hi"}],
        });
        let copies = (0..COPIES).map(|_| send(server.post("/v1/ag-ui", &key).json(&body)));
        let answers = futures::future::join_all(copies).await;
        let mut followed = 0;
        for (status, error, events) in answers {
            match status {
                200 => {
                    let events = ag_ui_events(&events);
                    let types: Vec<&str> = events
                        .iter()
                        .map(|event| event["type"].as_str().unwrap())
                        .collect();
                    assert_eq!(
                        types.first(),
                        Some(&"RUN_STARTED"),
                        "round {round}: {types:?}"
                    );
                    assert_eq!(
                        types.last(),
                        Some(&"RUN_FINISHED"),
                        "round {round}: {types:?}"
                    );
                    let text: String = events
                        .iter()
                        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
                        .map(|event| event["delta"].as_str().unwrap())
                        .collect();
                    assert_eq!(text, "hello", "round {round}");
                    assert!(
                        events
                            .iter()
                            .all(|event| event.get("runId").is_none()
                                || event["runId"] == body["runId"]),
                        "round {round}: another run's events"
                    );
                    followed += 1;
                }
                409 => refused += 1,
                _ => panic!("round {round}: {status} {error}"),
            }
        }
        assert!(followed >= 1, "round {round}: no copy followed the run");
    }
    assert_eq!(
        server.llm.requests().len(),
        ROUNDS,
        "one run per round, however many copies"
    );
    assert_eq!(refused, 0, "copies of one request follow its run");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ai_sdk_copies_of_one_message_follow_its_one_run() {
    let script = (0..ROUNDS)
        .map(|_| Reply::text("hello").with_delay(LLM_DELAY))
        .collect();
    let server = TestServer::start(script, "").await;
    let key = server.key("ann").await;
    for round in 0..ROUNDS {
        let chat = if round % 2 == 0 {
            format!("chat-{round}")
        } else {
            "one-chat".to_string()
        };
        let body = json!({
            "id": chat, "trigger": "submit-message",
            "messages": [{"id": format!("m{round}"), "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        });
        let copies = (0..COPIES).map(|_| send(server.post("/v1/chat", &key).json(&body)));
        let answers = futures::future::join_all(copies).await;
        let mut followed = 0;
        for (status, error, stream) in answers {
            match status {
                200 => {
                    assert!(
                        stream.contains("\"delta\":\"hello\""),
                        "round {round}: {stream}"
                    );
                    assert!(
                        stream.trim_end().ends_with("data: [DONE]"),
                        "round {round}: {stream}"
                    );
                    followed += 1;
                }
                _ => panic!("round {round}: {status} {error}"),
            }
        }
        assert_eq!(
            followed, COPIES,
            "round {round}: every copy follows the run"
        );
    }
    assert_eq!(server.llm.requests().len(), ROUNDS, "one run per round");
    server.shutdown().await;
}
