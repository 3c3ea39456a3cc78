//! A conversation named by a text id (AG-UI's `threadId`, the AI SDK's chat `id`) is the
//! user's own: two users who name a thread alike get two sessions, over real HTTP; neither
//! takes the other's, sees its messages or learns that it exists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

/// The user questions the model was shown in LLM request `index`.
fn questions(server: &TestServer, index: usize) -> Vec<String> {
    server.llm.requests()[index]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The ids of `key`'s sessions.
async fn sessions(server: &TestServer, key: &str) -> Vec<String> {
    let listed: Value = server
        .get("/v1/sessions", key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|session| session["id"].as_str().unwrap().to_string())
        .collect()
}

/// The text of an SSE body's deltas (AG-UI's `TEXT_MESSAGE_CONTENT`, the AI SDK's
/// `text-delta`).
fn text_of(body: &str) -> String {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT" || event["type"] == "text-delta")
        .filter_map(|event| event["delta"].as_str().map(str::to_string))
        .collect()
}

async fn ag_ui(server: &TestServer, key: &str, thread: &str, text: &str) -> String {
    let response = server
        .post("/v1/ag-ui", key)
        .json(&json!({
            "threadId": thread, "runId": "run-1",
            "messages": [{"id": text, "role": "user", "content": text}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{thread} {text}");
    text_of(&response.text().await.unwrap())
}

async fn chat(server: &TestServer, key: &str, chat: &str, text: &str) -> String {
    let response = server
        .post("/v1/chat", key)
        .json(&json!({
            "id": chat, "trigger": "submit-message",
            "messages": [{"id": text, "role": "user", "parts": [{"type": "text", "text": text}]}],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200, "{chat} {text}");
    text_of(&response.text().await.unwrap())
}

#[tokio::test]
async fn two_users_naming_a_thread_alike_get_a_thread_each() {
    let server = TestServer::start(
        vec![
            Reply::text("to ann"),
            Reply::text("to bob"),
            Reply::text("ann again"),
        ],
        "",
    )
    .await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    // The same text ids, runId included: bob's run is his own, not a replay of ann's.
    let first = ag_ui(&server, &ann, "support", "ann's secret").await;
    assert_eq!(first, "to ann");
    let other = ag_ui(&server, &bob, "support", "bob's question").await;
    assert_eq!(other, "to bob");
    assert_eq!(
        questions(&server, 1),
        ["bob's question"],
        "bob sees none of ann's"
    );
    let again = server
        .post("/v1/ag-ui", &ann)
        .json(&json!({
            "threadId": "support", "runId": "run-2",
            "messages": [{"id": "2", "role": "user", "content": "and now?"}],
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert_eq!(text_of(&again), "ann again");
    assert_eq!(questions(&server, 2), ["ann's secret", "and now?"]);
    let (ann_sessions, bob_sessions) =
        (sessions(&server, &ann).await, sessions(&server, &bob).await);
    assert_eq!((ann_sessions.len(), bob_sessions.len()), (1, 1));
    assert_ne!(ann_sessions, bob_sessions);
    // Neither can read the other's session by its id.
    let response = server
        .get(&format!("/v1/sessions/{}", ann_sessions[0]), &bob)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(response).await.0, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn two_users_naming_a_chat_alike_get_a_chat_each() {
    let server = TestServer::start(vec![Reply::text("to ann"), Reply::text("to bob")], "").await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    // The same chat id and message id: bob's message starts a run of his own.
    assert_eq!(chat(&server, &ann, "help", "m1").await, "to ann");
    assert_eq!(chat(&server, &bob, "help", "m1").await, "to bob");
    assert_eq!(questions(&server, 1), ["m1"], "bob sees none of ann's");
    let (ann_sessions, bob_sessions) =
        (sessions(&server, &ann).await, sessions(&server, &bob).await);
    assert_eq!((ann_sessions.len(), bob_sessions.len()), (1, 1));
    assert_ne!(ann_sessions, bob_sessions);
    // Nothing in progress in bob's chat of that name, and ann's is not his to follow.
    let response = server
        .get("/v1/chat/help/stream", &bob)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 204);
    server.shutdown().await;
}
