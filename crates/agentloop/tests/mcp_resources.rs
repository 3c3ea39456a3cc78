//! `mcp.read_resource` through the whole loop: offered because the test MCP server offers
//! resources, called by a scripted model, its result the resource's text.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::RunStatus;
use agentloop_test_support::{
    mcp::server::{GREETING_TEXT, GREETING_URI},
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn the_model_reads_a_resource_of_a_server() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "mcp__read_resource",
            json!({"server": "test", "uri": GREETING_URI}),
        ),
        Reply::text("It says hello."),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "what does the greeting say?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(offered(&llm.requests()[0]).contains(&"mcp__read_resource".to_string()));
    assert_eq!(
        statuses(&outcome.records),
        [("mcp.read_resource", "success")]
    );
    assert_eq!(outcome.records[0].result.as_deref(), Some(GREETING_TEXT));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_workflow_allowlist_withholds_it_like_any_tool() {
    let llm = ScriptedLlm::start(vec![Reply::text("no resources for me")]).await;
    let extra = "[workflows.echoing]\ntools = [\"test.echo\"]\n";
    let runtime = runtime(&llm, None, extra).await;
    let mut request = agentloop::RunRequest::new("hello");
    request.context.workflow = Some("echoing".to_owned());
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let tools = offered(&llm.requests()[0]);
    assert_eq!(tools, ["test__echo"]);
    runtime.shutdown().await;
}
