//! `POST /v1/runs` with `resources` (read from the test MCP server and added to the question)
//! and with `prompt` (a server's prompt opens the run), over real HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::{
    mcp::server::{GREETING_TEXT, GREETING_URI},
    scripted_llm::Reply,
};
use common::*;
use serde_json::{Value, json};

/// The text of the last user message of the model's first request.
fn question(server: &TestServer) -> String {
    let request = &server.llm.requests()[0];
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|message| message["role"] == "user")
        .and_then(|message| message["content"].as_str())
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn attached_resources_are_read_into_the_question() {
    let server = TestServer::start(vec![Reply::text("It greets you.")], "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({
            "query": "What does the greeting say?",
            "resources": [
                {"server": "test", "uri": GREETING_URI},
                {"server": "test", "uri": "blob://logo"}
            ],
            "stream": false
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["status"], "completed");
    assert_eq!(
        question(&server),
        format!(
            "What does the greeting say?\n\n<resource server=\"test\" uri=\"{GREETING_URI}\">\n\
             {GREETING_TEXT}\n</resource>\n\n<resource server=\"test\" uri=\"blob://logo\">\n\
             [binary resource blob://logo (image/png, 4 bytes), not shown]\n</resource>"
        )
    );
}

#[tokio::test]
async fn a_servers_prompt_opens_the_run() {
    let server = TestServer::start(vec![Reply::text("Tides follow the moon.")], "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({
            "query": "",
            "prompt": {"server": "test", "name": "summarize", "arguments": {"topic": "tides"}},
            "stream": false
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    assert_eq!(
        question(&server),
        "(assistant) What shall I summarize?\n\nSummarize what you know about tides."
    );
}

#[tokio::test]
async fn a_resource_or_prompt_that_cannot_be_had_is_a_400_naming_it() {
    let server = TestServer::start(Vec::new(), "").await;
    let key = server.key("ann").await;
    let refused = |body: Value| {
        let request = server.post("/v1/runs", &key).json(&body);
        async move {
            let response = request.send().await.unwrap();
            assert_eq!(response.status(), 400);
            response.json::<Value>().await.unwrap()
        }
    };
    let missing = refused(json!({
        "query": "read it",
        "resources": [{"server": "test", "uri": GREETING_URI}, {"server": "test", "uri": "nowhere://x"}]
    }))
    .await;
    assert_eq!(missing["error"]["code"], "resource_unreadable", "{missing}");
    assert_eq!(
        missing["error"]["details"]["field"], "resources[1]",
        "{missing}"
    );

    let unknown = refused(json!({
        "query": "read it",
        "resources": [{"server": "elsewhere", "uri": GREETING_URI}]
    }))
    .await;
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("no MCP server elsewhere is up"),
        "{unknown}"
    );

    let no_topic =
        refused(json!({"query": "", "prompt": {"server": "test", "name": "summarize"}})).await;
    assert_eq!(
        no_topic["error"]["code"], "prompt_unavailable",
        "{no_topic}"
    );
    // No query and no prompt: the query is still required.
    let empty = refused(json!({"query": " "})).await;
    assert_eq!(empty["error"]["details"]["field"], "query", "{empty}");
    // Nothing reached the model.
    assert!(server.llm.requests().is_empty());
}
