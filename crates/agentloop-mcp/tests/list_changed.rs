//! `notifications/tools/list_changed`: the source's counter moves and its tools are listed anew,
//! over stdio and over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{path::Path, sync::Arc, time::Duration};

use agentloop_core::{Tool, ToolContext, ToolOutput, ToolSource};
use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::mcp::{
    LOG_ENV, read_test_mcp_log, test_mcp_server_http, test_mcp_server_path,
};
use serde_json::{Value, json};

/// Far longer than a notification takes to arrive: one that never does fails the test.
const PATIENCE: Duration = Duration::from_secs(20);

async fn call(source: &McpSource, name: &str, arguments: Value) -> ToolOutput {
    let tool: Arc<dyn Tool> = source
        .tools()
        .await
        .unwrap()
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"));
    tokio::time::timeout(PATIENCE, tool.call(arguments, ToolContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{name} did not answer in time"))
        .unwrap_or_else(|error| panic!("{name} failed: {error}"))
}

async fn names(source: &McpSource) -> Vec<String> {
    source
        .tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.info().name.clone())
        .collect()
}

/// Adds a tool through the server and checks that the source notices and offers it.
async fn a_new_tool_joins(source: &McpSource, log: &Path) {
    let mut changes = source.changes().expect("an MCP source reports changes");
    let before = *changes.borrow_and_update();
    assert!(!names(source).await.contains(&"test.extra".to_owned()));
    // Listing without a change leaves the counter alone.
    assert_eq!(*changes.borrow(), before);

    assert_eq!(
        call(source, "test.add_tool", json!({"name": "extra"})).await,
        ToolOutput::text("added extra")
    );
    tokio::time::timeout(PATIENCE, changes.changed())
        .await
        .expect("changes() did not move after tools/list_changed")
        .unwrap();
    assert!(*changes.borrow() > before);

    let listed = names(source).await;
    assert!(
        listed.contains(&"test.extra".to_owned()),
        "test.extra not in {listed:?}"
    );
    assert!(listed.contains(&"test.echo".to_owned()), "{listed:?}");
    assert_eq!(
        call(source, "test.extra", json!({})).await,
        ToolOutput::text("extra tool extra")
    );

    let logged: Vec<Value> = read_test_mcp_log(log)
        .into_iter()
        .map(|line| line["tool"].clone())
        .collect();
    assert_eq!(logged, ["add_tool", "extra"]);
}

#[tokio::test]
async fn over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let config = McpServerConfig::new(test_mcp_server_path().to_string_lossy())
        .with_env(LOG_ENV, log.to_string_lossy());
    let source = McpSource::connect("test", &config).await.unwrap();

    a_new_tool_joins(&source, &log).await;
    source.shutdown().await;
}

#[tokio::test]
async fn shutting_down_closes_the_changes() {
    let server = test_mcp_server_http(None);
    let source = McpSource::connect("test", &McpServerConfig::http(server.url()))
        .await
        .unwrap();
    let mut changes = source.changes().unwrap();
    let waiting = tokio::spawn(async move { changes.changed().await });

    source.shutdown().await;
    let ended = tokio::time::timeout(PATIENCE, waiting)
        .await
        .expect("changes() stayed open after shutdown")
        .unwrap();
    assert!(ended.is_err(), "a change was reported instead of the end");
}

#[tokio::test]
async fn over_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let server = test_mcp_server_http(Some(&log));
    let source = McpSource::connect("test", &McpServerConfig::http(server.url()))
        .await
        .unwrap();

    a_new_tool_joins(&source, &log).await;
    source.shutdown().await;
}
