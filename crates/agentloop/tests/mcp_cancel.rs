//! A run cancelled while an MCP call runs tells the server: `notifications/cancelled` for each
//! call in flight (the Python SDK's server cancels the tool's task and says so in a file), and
//! the call is recorded as cut off.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::{RunRequest, RunStatus, ToolStatus};
use agentloop_test_support::{
    requires,
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_cancelled_run_cancels_its_mcp_calls_in_flight_on_the_server() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("wait.txt");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "py__wait",
            json!({"marker": marker.to_str().unwrap(), "seconds": 60}),
        ),
        Reply::text("never asked"),
    ])
    .await;
    let server = format!(
        "[mcp_servers.py]\ncommand = {python:?}\nargs = [{script:?}]\nstartup_timeout_s = 60\n\n\
         [tools.\"py.wait\"]\ntimeout_s = 120\n"
    );
    let runtime = runtime(&llm, None, &server).await;
    let handle = runtime.agent().run(RunRequest::new("wait a minute"));
    let read = || std::fs::read_to_string(&marker).unwrap_or_default();
    eventually("the call to start", Duration::from_secs(30), || async {
        (read() == "started").then_some(())
    })
    .await;
    handle.cancel();
    let outcome = handle.outcome().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled);
    assert_eq!(outcome.records[0].tool, "py.wait");
    assert_eq!(outcome.records[0].status, ToolStatus::Error);
    eventually(
        "the server to cancel the call",
        Duration::from_secs(30),
        || async { (read() == "cancelled").then_some(()) },
    )
    .await;
    assert_eq!(llm.requests().len(), 1, "no LLM call after the cancel");
    runtime.shutdown().await;
}
