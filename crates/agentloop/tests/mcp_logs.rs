//! A server's `notifications/message` during a call land in that call's record (as the store
//! keeps it too), with the Python SDK's server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{RunRequest, RunStatus, ToolLog};
use agentloop_core::Store;
use agentloop_test_support::{
    requires,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_servers_log_messages_during_a_call_are_in_its_record() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__steps", json!({"count": 2})),
        Reply::text("Two steps."),
    ])
    .await;
    let server = format!(
        "[mcp_servers.py]\ncommand = {python:?}\nargs = [{script:?}]\nstartup_timeout_s = 60\n"
    );
    let runtime = runtime(&llm, None, &server).await;
    let (_, outcome) = runtime
        .agent()
        .run(RunRequest::new("take two steps"))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let logs: Vec<(&str, &str)> = outcome.records[0]
        .logs
        .iter()
        .map(|log| (log.level.as_str(), log.message.as_str()))
        .collect();
    assert_eq!(
        logs,
        [("info", "starting 2 steps"), ("warning", "took 2 steps")]
    );
    // Kept by the store with the record.
    let stored = runtime
        .store()
        .tool_executions(outcome.run_id)
        .await
        .unwrap();
    let stored: &Vec<ToolLog> = &stored[0].logs;
    assert_eq!(stored, &outcome.records[0].logs);
    runtime.shutdown().await;
}
