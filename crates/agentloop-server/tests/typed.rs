//! Typed answers over HTTP: `output` in the body of `POST /v1/runs` (and `/copilot-agent`),
//! the value in the JSON answer, in `done` and the `output_delta`s of the stream, in
//! `GET /v1/runs/{id}` and in the session's assistant message; a bad schema is a 400 that
//! names where it is wrong.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

fn ticket() -> Value {
    json!({
        "name": "ticket",
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}},
            "required": ["title", "priority"]
        }
    })
}

fn script(value: &Value) -> Vec<Reply> {
    vec![
        Reply::tool_call("test__echo", json!({"text": "disk"})),
        Reply::text("The disk is full."),
        Reply::text(value.to_string()),
    ]
}

#[tokio::test]
async fn the_json_answer_and_the_run_carry_the_value() {
    let value = json!({"title": "Disk full", "priority": 1});
    let mut replies = script(&value);
    replies.extend(script(&value));
    let server = TestServer::start(replies, "").await;
    let key = server.key("ann").await;
    for path in ["/v1/runs", "/copilot-agent"] {
        let response = server
            .post(path, &key)
            .json(&json!({"query": "File a ticket", "stream": false, "output": ticket()}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "completed", "{body}");
        assert_eq!(body["output"], value, "{body}");
        let assistant = &body["assistant_message"];
        let content: Value = serde_json::from_str(assistant["content"].as_str().unwrap()).unwrap();
        assert_eq!(content, value);
        assert_eq!(assistant["metadata"]["output"]["name"], "ticket", "{body}");

        let run_id = body["run_id"].as_str().unwrap();
        let run: Value = server
            .get(&format!("/v1/runs/{run_id}"), &key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(run["output"], value, "{run}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn the_stream_carries_partials_and_the_value_on_done() {
    let value = json!({"title": "Disk full", "priority": 2});
    let server = TestServer::start(script(&value), "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "File a ticket", "output": ticket()}))
        .send()
        .await
        .unwrap();
    let events = read_sse(response).await;
    let done = events.iter().find(|event| event.event == "done").unwrap();
    assert_eq!(done.data["output"], value, "{:?}", done.data);
    let partials: Vec<&Value> = events
        .iter()
        .filter(|event| event.event == "output_delta")
        .map(|event| &event.data["partial"])
        .collect();
    assert_eq!(partials.last().copied(), Some(&value), "{partials:?}");
    // The answer's text is the value's JSON, sent once it was valid.
    let answer: String = events
        .iter()
        .filter(|event| event.event == "final_response")
        .map(|event| event.data["delta"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), value);
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_schema_is_a_400_naming_where_it_is_wrong() {
    let server = TestServer::start(Vec::new(), "").await;
    let key = server.key("ann").await;
    let bad = json!({"schema": {"type": "object", "properties": {"n": {"type": "integr"}}}});
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "q", "output": bad}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 400);
    assert_eq!(error["details"]["field"], "output.schema", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(message.contains("/properties/n/type"), "{message}");
    server.shutdown().await;
}

/// The real `pydantic` validates the JSON answer of `POST /v1/runs` into a model whose JSON
/// Schema the request sent (`typed/pydantic_answer.py`).
#[tokio::test]
async fn pydantic_validates_the_json_answer_into_its_model() {
    let Some(python) = agentloop_test_support::requires::python_with("pydantic") else {
        return;
    };
    let value =
        json!({"title": "Checkout down", "priority": "urgent", "tags": ["web", "payments"]});
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__echo", json!({"text": "checkout"})),
            // Not the schema's: the model is asked again, naming what is wrong.
            Reply::text(r#"{"title": "Checkout down", "priority": "asap", "tags": []}"#),
            Reply::text(value.to_string()),
        ],
        "[agent]\noutput_mode = \"prompted\"\n",
    )
    .await;
    let key = server.key("ann").await;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/typed/pydantic_answer.py"
    );
    let url = server.url.clone();
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(python)
            .args([script, &url, &key])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let validated: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(validated, value);
    server.shutdown().await;
}
