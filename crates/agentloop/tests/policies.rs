//! Tools under control, end to end: read-only contexts, workflow allowlists, the mutation rate
//! limit and classification overrides, through the real loop (scripted LLM over HTTP, the test
//! MCP server as a child process). The server's own call log proves what never ran.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{RunContext, RunRequest, RunStatus, ToolStatus};
use agentloop_test_support::{
    mcp::read_test_mcp_log,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::{Value, json};

fn context(read_only: bool, workflow: Option<&str>, entity: Option<&str>) -> RunContext {
    RunContext {
        user_id: Some("ann".into()),
        entity_id: entity.map(str::to_string),
        workflow: workflow.map(str::to_string),
        read_only,
    }
}

fn tool_error(request: &Value, index: usize) -> Value {
    serde_json::from_str(&tool_messages(request)[index].1).unwrap()
}

#[tokio::test]
async fn a_read_only_run_never_offers_nor_runs_a_mutating_tool() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "change the quote"})),
        Reply::text("This project is read-only, so I could not change the quote."),
    ])
    .await;
    let runtime = runtime(&llm, Some(&log), "").await;
    let request = RunRequest::new("Change the quote").context(context(true, None, None));
    let (events, outcome) = runtime.agent().run(request).collect().await.unwrap();

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.records[0].status, ToolStatus::Blocked);
    assert!(
        read_test_mcp_log(&log).is_empty(),
        "the server never saw the call"
    );
    let requests = llm.requests();
    for request in &requests {
        let tools = offered(request);
        assert!(
            tools.contains(&"test__echo".to_string()),
            "read-only tools stay: {tools:?}"
        );
        for mutating in ["test__record", "test__fail", "test__crash"] {
            assert!(
                !tools.contains(&mutating.to_string()),
                "{mutating} offered: {tools:?}"
            );
        }
    }
    let error = tool_error(&requests[1], 0);
    assert_eq!(error["status"], "blocked");
    assert!(
        error["error"].as_str().unwrap().contains("read-only"),
        "{error}"
    );
    assert!(
        error["hint"].as_str().unwrap().contains("read-only"),
        "{error}"
    );
    let executed = find(&events, "tool_executed");
    assert!(format!("{executed:?}").contains("Blocked"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_workflow_offers_only_its_tools_and_blocks_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__add", json!({"a": 1, "b": 2})),
            ("test__echo", json!({"text": "outside"})),
        ]),
        Reply::text("3"),
    ])
    .await;
    let runtime = runtime(
        &llm,
        Some(&log),
        "[workflows.math]\ntools = [\"test.add\"]\n",
    )
    .await;
    let request = RunRequest::new("Add").context(context(false, Some("math"), None));
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();

    assert_eq!(offered(&llm.requests()[0]), ["test__add"]);
    assert_eq!(
        statuses(&outcome.records),
        [("test.add", "success"), ("test.echo", "blocked")]
    );
    let executed: Vec<String> = read_test_mcp_log(&log)
        .iter()
        .map(|line| line["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(executed, ["add"], "echo never ran");
    let error = tool_error(&llm.requests()[1], 1);
    assert!(
        error["error"]
            .as_str()
            .unwrap()
            .contains("workflow \"math\""),
        "{error}"
    );

    // A workflow that does not exist ends the run before any LLM call, saying which exist.
    let request = RunRequest::new("Add").context(context(false, Some("maths"), None));
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, "unknown_workflow");
    assert!(failure.message.contains("math"), "{}", failure.message);
    assert_eq!(llm.requests().len(), 2);
    runtime.shutdown().await;
}

#[tokio::test]
async fn mutating_calls_are_rate_limited_per_entity_and_the_loop_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "one"})),
        Reply::tool_call("test__record", json!({"note": "two"})),
        Reply::tool_call("test__record", json!({"note": "three"})),
        Reply::text("I made two changes; the third must wait."),
        // Another entity, another budget.
        Reply::tool_call("test__record", json!({"note": "elsewhere"})),
        Reply::text("Done elsewhere."),
    ])
    .await;
    let runtime = runtime(&llm, Some(&log), "[policy]\nmutation_rate = \"2/minute\"\n").await;
    let request = RunRequest::new("Record three").context(context(false, None, Some("project-7")));
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("I made two changes; the third must wait.")
    );
    let kinds: Vec<&str> = outcome.records.iter().map(|r| r.status.as_str()).collect();
    assert_eq!(kinds, ["success", "success", "blocked"]);
    let error = tool_error(&llm.requests()[3], 2);
    let message = error["error"].as_str().unwrap();
    assert!(
        message.contains("2/minute") && message.contains("project-7"),
        "{message}"
    );
    assert!(message.contains("try again in"), "{message}");
    assert_eq!(
        read_test_mcp_log(&log).len(),
        2,
        "the third change never ran"
    );

    let request =
        RunRequest::new("Record elsewhere").context(context(false, None, Some("project-8")));
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.records[0].status, ToolStatus::Success);
    assert_eq!(read_test_mcp_log(&log).len(), 3);
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_configuration_can_reclassify_a_tool() {
    let llm = ScriptedLlm::start(vec![Reply::text("ok")]).await;
    let extra =
        "[tools.\"test.echo\"]\nmutating = true\n[tools.\"test.record\"]\nmutating = false\n";
    let runtime = runtime(&llm, None, extra).await;
    let request = RunRequest::new("hi").context(context(true, None, None));
    runtime.agent().run(request).collect().await.unwrap();
    let tools = offered(&llm.requests()[0]);
    assert!(!tools.contains(&"test__echo".to_string()), "{tools:?}");
    assert!(tools.contains(&"test__record".to_string()), "{tools:?}");
    runtime.shutdown().await;
}
