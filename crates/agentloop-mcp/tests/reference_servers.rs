//! The official reference server `@modelcontextprotocol/server-everything`, installed from npm
//! into `test-servers/`, over stdio.

// Test helpers outside `#[test]` functions fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{sync::Arc, time::Duration};

use agentloop_core::{Tool, ToolContext, ToolOutput, ToolSource};
use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::mcp::reference_server_everything;
use serde_json::{Value, json};

/// Far longer than any call here takes: a call that hangs fails the test instead.
const PATIENCE: Duration = Duration::from_secs(30);

async fn tool(source: &McpSource, name: &str) -> Arc<dyn Tool> {
    source
        .tools()
        .await
        .unwrap()
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("server-everything has no tool {name}"))
}

async fn call(source: &McpSource, name: &str, arguments: Value) -> ToolOutput {
    let tool = tool(source, name).await;
    tokio::time::timeout(PATIENCE, tool.call(arguments, ToolContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{name} did not answer in time"))
        .unwrap_or_else(|error| panic!("{name} failed: {error}"))
}

#[tokio::test]
async fn server_everything_lists_and_runs_its_tools() {
    let (command, args) = reference_server_everything();
    let config = McpServerConfig::new(command).with_args(args);
    let source = McpSource::connect("everything", &config).await.unwrap();

    let names: Vec<String> = source
        .tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.info().name.clone())
        .collect();
    for expected in [
        "everything.echo",
        "everything.get-sum",
        "everything.get-structured-content",
        "everything.get-tiny-image",
    ] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} not in {names:?}"
        );
    }
    let echo = tool(&source, "everything.echo").await;
    assert_eq!(echo.info().description, "Echoes back the input string");
    assert_eq!(echo.info().read_only_hint, Some(true));
    assert_eq!(
        echo.info().input_schema["properties"]["message"]["type"],
        "string"
    );

    assert_eq!(
        call(&source, "everything.echo", json!({"message": "hi there"})).await,
        ToolOutput::text("Echo: hi there")
    );
    assert_eq!(
        call(&source, "everything.get-sum", json!({"a": 2, "b": 3.5})).await,
        ToolOutput::text("The sum of 2 and 3.5 is 5.5.")
    );

    let weather = call(
        &source,
        "everything.get-structured-content",
        json!({"location": "Chicago"}),
    )
    .await;
    let expected = json!({"temperature": 36, "conditions": "Light rain / drizzle", "humidity": 82});
    assert_eq!(weather.structured, Some(expected.clone()));
    assert_eq!(
        serde_json::from_str::<Value>(&weather.text).unwrap(),
        expected
    );

    let image = call(&source, "everything.get-tiny-image", json!({})).await;
    assert!(image.text.contains("[image: image/png]"), "{}", image.text);

    source.shutdown().await;
}
