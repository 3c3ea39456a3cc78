//! Typed answers through the real binary: `agentloop run` prints the value as indented JSON
//! and `--json` carries it on `done`; a typed run of `agentloop serve` killed with `kill -9`
//! is adopted after the restart and still ends with a value of its schema (the schema is
//! saved with the run: the restarted server's configuration has none).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::{
    config::TestConfig,
    mcp::wait_for_call,
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use common::*;
use serde_json::{Value, json};

const SCHEMA: &str = "[agent]\noutput_schema = { type = \"object\", properties = { n = { type = \"integer\" } }, required = [\"n\"] }\n";

#[tokio::test]
async fn run_prints_the_value_indented_and_json_carries_it_on_done() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "x"})),
        Reply::text(r#"{"n": 5}"#),
        Reply::tool_call("test__echo", json!({"text": "x"})),
        Reply::text(r#"{"n": 6}"#),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), SCHEMA);

    let output = agentloop(dir.path(), &["run", "count"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output).trim(), "{\n  \"n\": 5\n}");

    let output = agentloop(dir.path(), &["run", "--json", "count"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let done: Value = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .find(|event| event["type"] == "done")
        .unwrap();
    assert_eq!(done["output"], json!({"n": 6}), "{done}");
}

#[tokio::test]
async fn a_typed_run_killed_and_adopted_still_returns_a_value_of_its_schema() {
    let value = json!({"title": "after the restart", "priority": 2});
    let llm = ScriptedLlm::start(vec![
        // Running when the process is killed; read-only, so it runs again after the restart.
        Reply::tool_call("test__sleep", json!({"ms": 4_000})),
        Reply::text("The ticket is about the restart."),
        Reply::text(value.to_string()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&dir.path().join("calls.jsonl"))
        .extra("[server]\nrun_lease_s = 1\nshutdown_grace_s = 5\n");
    write_test_config(dir.path(), &config);
    let key = create_key(dir.path(), "ann").await;

    let mut first = Served::start(dir.path());
    let output = json!({
        "name": "ticket",
        "schema": {
            "type": "object",
            "properties": {"title": {"type": "string"}, "priority": {"type": "integer"}},
            "required": ["title", "priority"]
        }
    });
    let client = reqwest::Client::new();
    let mut response = client
        .post(format!("{}/v1/runs", first.address))
        .bearer_auth(&key)
        .json(&json!({"query": "file a ticket", "output": output}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    let mut text = String::new();
    let run_id = loop {
        let chunk = response.chunk().await.unwrap().expect("the stream goes on");
        text.push_str(&String::from_utf8_lossy(&chunk));
        if let Some(at) = text.find("\"run_id\":\"") {
            let rest = &text[at + 10..];
            break rest[..36].to_string();
        }
    };
    wait_for_call(&dir.path().join("calls.jsonl"), "sleep").await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    drop(response);

    let second = Served::start(dir.path());
    let run = eventually("the run to end", Duration::from_secs(60), || async {
        let run: Value = client
            .get(format!("{}/v1/runs/{run_id}", second.address))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let status = run["status"].as_str().unwrap_or_default().to_string();
        (status != "running" && !status.is_empty()).then_some(run)
    })
    .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["output"], value, "{run}");
    // The answer call after the restart asked for the schema saved with the run.
    let requests = llm.requests();
    let last = requests.last().unwrap();
    assert_eq!(
        last["response_format"]["json_schema"]["name"], "ticket",
        "{last}"
    );
    assert!(last.get("tools").is_none(), "{last}");
}
