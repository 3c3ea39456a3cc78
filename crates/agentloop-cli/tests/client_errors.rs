//! What `agentloop serve` tells clients of a run that failed, on every protocol: the code, a
//! plain sentence and the request's id, never the LLM's address or the variable that holds its
//! key; the server's log has those, with the same request id and the run's id.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
    sse::parse_sse,
};
use serde_json::{Value, json};

/// What the operator needs and a user of the application must not see.
fn internals(llm: &ScriptedLlm) -> Vec<String> {
    let address = llm.base_url();
    let host = address
        .trim_start_matches("http://")
        .split('/')
        .next()
        .unwrap()
        .to_string();
    vec![address, host, "MOCK_KEY".into(), "Incorrect API key".into()]
}

fn assert_none_in(text: &str, internals: &[String], what: &str) {
    for internal in internals {
        assert!(
            !text.contains(internal.as_str()),
            "{what} shows {internal:?}: {text}"
        );
    }
}

/// The plain sentence of `llm_unauthorized`.
fn plain() -> &'static str {
    agentloop::core::protocol::ErrorCode::LlmUnauthorized.user_message()
}

#[tokio::test]
async fn a_failed_runs_error_tells_clients_the_code_a_plain_sentence_and_the_request_id() {
    let llm = ScriptedLlm::start(vec![Reply::error(401, "Incorrect API key provided"); 5]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).llm("api_key_env = \"MOCK_KEY\""),
    );
    let key = common::create_key(dir.path(), "ann").await;
    let mut command = common::command(dir.path());
    command.env("MOCK_KEY", "sk-wrong");
    let served = common::Served::start_command(command, &[]);
    let address = served.address.clone();
    let client = reqwest::Client::new();
    let internals = internals(&llm);
    // (the request id each answer carries, the run it failed)
    let mut told = Vec::new();

    // The native events: the `error` event.
    let response = client
        .post(format!("{address}/v1/runs"))
        .bearer_auth(&key)
        .json(&json!({"query": "hi"}))
        .send()
        .await
        .unwrap();
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    assert_none_in(&text, &internals, "the SSE stream");
    let events = parse_sse(&text);
    let error = events.iter().find(|event| event.event == "error").unwrap();
    assert_eq!(error.data["code"], "llm_unauthorized");
    assert_eq!(error.data["message"], plain());
    assert_eq!(error.data["request_id"], request_id.as_str());
    told.push((
        request_id,
        error.data["run_id"].as_str().unwrap().to_string(),
    ));

    // The JSON answer, with the client's own request id; then the run looked at.
    let response = client
        .post(format!("{address}/v1/runs"))
        .bearer_auth(&key)
        .header("x-request-id", "checkout-7f3a")
        .json(&json!({"query": "hi", "stream": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["x-request-id"], "checkout-7f3a");
    let text = response.text().await.unwrap();
    assert_none_in(&text, &internals, "the JSON answer");
    let body: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        body["error"],
        json!({"code": "llm_unauthorized", "message": plain(), "request_id": "checkout-7f3a"})
    );
    let run_id = body["run_id"].as_str().unwrap().to_string();
    told.push(("checkout-7f3a".to_string(), run_id.clone()));
    let response = client
        .get(format!("{address}/v1/runs/{run_id}"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    assert_none_in(&text, &internals, "GET /v1/runs/{id}");
    let run: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(run["error_code"], "llm_unauthorized");
    assert_eq!(run["error_message"], plain());
    assert_eq!(run["error"]["request_id"], request_id.as_str());
    told.push((request_id, run_id));

    // AG-UI: `RUN_ERROR`.
    let response = client
        .post(format!("{address}/v1/ag-ui"))
        .bearer_auth(&key)
        .json(&json!({
            "threadId": "support-1", "runId": uuid::Uuid::now_v7().to_string(),
            "messages": [{"id": "u1", "role": "user", "content": "hi"}],
            "tools": [], "context": [], "state": {}, "forwardedProps": {},
        }))
        .send()
        .await
        .unwrap();
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    assert_none_in(&text, &internals, "the AG-UI stream");
    let events: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect();
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR", "{text}");
    assert_eq!(last["code"], "llm_unauthorized");
    assert_eq!(
        last["message"],
        format!("{} (request id {request_id})", plain())
    );
    let run_id = events[0]["metadata"]["agentloop"]["runId"]
        .as_str()
        .unwrap();
    told.push((request_id.clone(), run_id.to_string()));

    // The AI SDK: the `error` part.
    let response = client
        .post(format!("{address}/v1/chat"))
        .bearer_auth(&key)
        .json(&json!({
            "id": "chat-1", "trigger": "submit-message",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
        }))
        .send()
        .await
        .unwrap();
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let text = response.text().await.unwrap();
    assert_none_in(&text, &internals, "the UI message stream");
    let parts: Vec<Value> = text
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str(data).ok())
        .collect();
    let error = parts.iter().find(|part| part["type"] == "error").unwrap();
    assert_eq!(
        error["errorText"],
        format!("llm_unauthorized: {} (request id {request_id})", plain())
    );
    let run_id = parts[0]["messageMetadata"]["runId"].as_str().unwrap();
    told.push((request_id, run_id.to_string()));

    // A JSON error body carries the request id too.
    let response = client
        .get(format!("{address}/v1/runs/{}", uuid::Uuid::now_v7()))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    let request_id = response.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "not_found");
    assert_eq!(body["error"]["request_id"], request_id.as_str());

    // The operator's log has each error whole, with the request id the client was told and
    // the run's id.
    let (status, log) = served.terminate().await;
    assert!(status.success(), "{log}");
    let lines: Vec<&str> = log.lines().collect();
    for (request_id, run_id) in &told {
        let line = lines
            .iter()
            .find(|line| line.contains(request_id.as_str()) && line.contains(run_id.as_str()))
            .unwrap_or_else(|| panic!("no line with {request_id} and {run_id}: {log}"));
        for internal in &internals {
            assert!(
                line.contains(internal.as_str()),
                "{internal:?} missing: {line}"
            );
        }
    }
}

/// `[server] expose_error_details = true` (development): clients get the detailed message.
#[tokio::test]
async fn with_details_exposed_clients_get_the_detailed_message() {
    let llm = ScriptedLlm::start(vec![Reply::error(401, "Incorrect API key provided")]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url())
            .llm("api_key_env = \"MOCK_KEY\"")
            .extra("[server]\nexpose_error_details = true"),
    );
    let key = common::create_key(dir.path(), "ann").await;
    let served = common::Served::start(dir.path());
    let body: Value = reqwest::Client::new()
        .post(format!("{}/v1/runs", served.address))
        .bearer_auth(&key)
        .json(&json!({"query": "hi", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&llm.base_url()) && message.contains("MOCK_KEY"),
        "{message}"
    );
    assert!(body["error"]["request_id"].is_string(), "{body}");
}
