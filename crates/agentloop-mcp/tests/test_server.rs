//! Calls through `McpSource` to agentloop-test-mcp, a real child process.

// Test helpers outside `#[test]` functions fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use agentloop_core::{
    Tool, ToolContext, ToolError, ToolOutput, ToolProgress, ToolSource, protocol::SourceState,
};
use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::mcp::{
    LOG_ENV, read_test_mcp_log, test_mcp_server_config_toml, test_mcp_server_path,
};
use serde_json::{Value, json};

/// Far longer than any call here takes: a call that hangs fails the test instead.
const PATIENCE: Duration = Duration::from_secs(10);

fn config(log: Option<&Path>) -> McpServerConfig {
    let config = McpServerConfig::new(test_mcp_server_path().to_string_lossy());
    match log {
        Some(log) => config.with_env(LOG_ENV, log.to_string_lossy()),
        None => config,
    }
}

async fn connect(log: Option<&Path>) -> McpSource {
    McpSource::connect("test", &config(log)).await.unwrap()
}

async fn tool(source: &McpSource, name: &str) -> Arc<dyn Tool> {
    let tools = source.tools().await.unwrap();
    tools
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(tool: &Arc<dyn Tool>, arguments: Value) -> Result<ToolOutput, ToolError> {
    tokio::time::timeout(PATIENCE, tool.call(arguments, ToolContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{} did not answer in time", tool.info().name))
}

#[tokio::test]
async fn tools_are_listed_in_the_server_namespace_with_schemas_and_hints() {
    let source = connect(None).await;
    assert_eq!(source.name(), "test");

    let tools = source.tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.info().name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "test.add",
            "test.add_tool",
            "test.bad_forecast",
            "test.big",
            "test.crash",
            "test.echo",
            "test.fail",
            "test.forecast",
            "test.progress",
            "test.record",
            "test.roots",
            "test.rpc_error",
            "test.sleep",
            "test.slow_record"
        ]
    );
    assert!(tools.iter().all(|tool| tool.supports_parallel()));

    let echo = tool(&source, "test.echo").await;
    let info = echo.info();
    assert_eq!(info.description, "Returns its text unchanged");
    assert_eq!(info.input_schema["type"], "object");
    assert_eq!(info.input_schema["properties"]["text"]["type"], "string");
    assert_eq!(info.input_schema["required"], json!(["text"]));
    assert_eq!(info.read_only_hint, Some(true));
    assert_eq!(info.destructive_hint, None);

    let add = tool(&source, "test.add").await;
    assert_eq!(add.info().input_schema["properties"]["b"]["type"], "number");

    let record = tool(&source, "test.record").await;
    assert_eq!(record.info().read_only_hint, Some(false));
    assert_eq!(record.info().destructive_hint, Some(false));

    let fail = tool(&source, "test.fail").await;
    assert_eq!(fail.info().read_only_hint, None);

    source.shutdown().await;
}

#[tokio::test]
async fn results_come_back_as_text() {
    let source = connect(None).await;

    let echo = tool(&source, "test.echo").await;
    assert_eq!(
        call(&echo, json!({"text": "hello, world"})).await,
        Ok(ToolOutput::text("hello, world"))
    );

    let add = tool(&source, "test.add").await;
    assert_eq!(
        call(&add, json!({"a": 2, "b": 3.5})).await,
        Ok(ToolOutput::text("5.5"))
    );

    let big = tool(&source, "test.big").await;
    let text = call(&big, json!({"chars": 100_003})).await.unwrap().text;
    assert_eq!(text.len(), 100_003);
    assert!(text.starts_with("0123456789012"));
    assert!(text.ends_with("9012"));

    source.shutdown().await;
}

#[tokio::test]
async fn failures_reach_the_caller_with_the_server_message() {
    let source = connect(None).await;

    let fail = tool(&source, "test.fail").await;
    assert_eq!(
        call(&fail, json!({"message": "disk full"})).await,
        Err(ToolError::Failed("disk full".to_owned()))
    );

    let rpc_error = tool(&source, "test.rpc_error").await;
    assert_eq!(
        call(&rpc_error, json!({"message": "no such thing"})).await,
        Err(ToolError::Failed("no such thing".to_owned()))
    );

    let echo = tool(&source, "test.echo").await;
    assert!(matches!(
        call(&echo, json!("not an object")).await,
        Err(ToolError::InvalidArguments(_))
    ));

    // A failure is the tool's, not the connection's: the server still answers.
    assert!(source.is_running());
    assert_eq!(
        call(&echo, json!({"text": "still here"})).await,
        Ok(ToolOutput::text("still here"))
    );

    source.shutdown().await;
}

/// A result over the 16 MiB limit of one message fails its call at once, naming the limit and
/// the size, instead of being dropped while the call waits for its timeout; the connection
/// stays up.
#[tokio::test]
async fn a_result_over_the_message_limit_fails_its_call_at_once() {
    let source = connect(None).await;
    let big = tool(&source, "test.big").await;

    let failed = call(&big, json!({"chars": 20_000_000})).await;
    let Err(ToolError::Failed(message)) = failed else {
        panic!("{failed:?}");
    };
    assert!(message.contains("16 MiB"), "{message}");
    // The size of the whole message: the text and the JSON-RPC envelope around it.
    let size: u64 = message
        .split_whitespace()
        .find_map(|word| word.parse().ok())
        .unwrap_or_else(|| panic!("no size in {message}"));
    assert!((20_000_000..20_001_000).contains(&size), "{message}");
    assert!(message.contains("'test'"), "{message}");
    assert_eq!(agentloop_mcp::MAX_MESSAGE_BYTES, 16 * 1024 * 1024);

    assert!(source.is_running());
    let echo = tool(&source, "test.echo").await;
    assert_eq!(
        call(&echo, json!({"text": "still here"})).await,
        Ok(ToolOutput::text("still here"))
    );
    source.shutdown().await;
}

#[tokio::test]
async fn record_runs_once_and_leaves_its_mark_in_the_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let source = connect(Some(&log)).await;

    let record = tool(&source, "test.record").await;
    assert_eq!(
        call(&record, json!({"note": "first"})).await,
        Ok(ToolOutput::text("recorded"))
    );
    let echo = tool(&source, "test.echo").await;
    call(&echo, json!({"text": "x"})).await.unwrap();

    assert_eq!(
        read_test_mcp_log(&log),
        [
            json!({"tool": "record", "note": "first", "arguments": {"note": "first"},
                "idempotency_key": format!("{}:", agentloop_core::ToolContext::default().run_id)}),
            json!({"tool": "echo", "arguments": {"text": "x"}}),
        ]
    );
    source.shutdown().await;
}

#[tokio::test]
async fn calls_run_concurrently_over_one_connection() {
    let source = connect(None).await;
    let sleep = tool(&source, "test.sleep").await;
    let echo = tool(&source, "test.echo").await;

    let sleeping = tokio::spawn(async move { call(&sleep, json!({"ms": 1500})).await });
    // The echo answers while the sleep is still pending: requests are not queued behind it.
    let echoed = call(&echo, json!({"text": "overtaking"})).await;
    assert_eq!(echoed, Ok(ToolOutput::text("overtaking")));
    assert!(
        !sleeping.is_finished(),
        "the echo should have answered before the 1.5 s sleep ended"
    );
    assert_eq!(
        sleeping.await.unwrap(),
        Ok(ToolOutput::text("slept 1500 ms"))
    );

    source.shutdown().await;
}

#[tokio::test]
async fn a_dead_server_fails_its_calls_at_once_with_why() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    // Not restarted, so that the calls below surely meet the dead server (supervision.rs
    // tests restarts).
    let config = config(Some(&log)).with_restarts(0, 0.5, 30.0);
    let source = McpSource::connect("test", &config).await.unwrap();
    let crash = tool(&source, "test.crash").await;
    let echo = tool(&source, "test.echo").await;

    let crashed = call(&crash, json!({})).await;
    let Err(ToolError::Unavailable(message)) = crashed else {
        panic!("crash gave {crashed:?}");
    };
    assert!(
        message.contains("MCP server 'test' is not running"),
        "{message}"
    );
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(!source.is_running());

    let after = call(&echo, json!({"text": "anyone?"})).await;
    let Err(ToolError::Unavailable(message)) = after else {
        panic!("echo after the crash gave {after:?}");
    };
    assert!(message.contains("'test'"), "{message}");
    assert!(message.contains("exited with status 3"), "{message}");
    let status = source.status();
    assert!(
        matches!(&status.state, SourceState::Down { reason } if reason.contains("restarts are off")),
        "{status:?}"
    );

    // The echo never reached the dead server.
    let tools: Vec<Value> = read_test_mcp_log(&log)
        .into_iter()
        .map(|line| line["tool"].clone())
        .collect();
    assert_eq!(tools, [json!("crash")]);

    source.shutdown().await;
}

#[tokio::test]
async fn after_shutdown_calls_fail_as_unavailable() {
    let source = connect(None).await;
    let echo = tool(&source, "test.echo").await;
    source.shutdown().await;

    assert!(!source.is_running());
    let result = call(&echo, json!({"text": "late"})).await;
    let Err(ToolError::Unavailable(message)) = result else {
        panic!("a call after shutdown gave {result:?}");
    };
    assert!(message.contains("shut down"), "{message}");
}

#[tokio::test]
async fn the_config_table_of_test_support_starts_a_logging_server() {
    #[derive(serde::Deserialize)]
    struct ConfigFile {
        mcp_servers: BTreeMap<String, McpServerConfig>,
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let text = test_mcp_server_config_toml("logged", Some(&log));
    let file: ConfigFile = toml::from_str(&text).unwrap();

    let source = McpSource::connect("logged", &file.mcp_servers["logged"])
        .await
        .unwrap();
    let echo = tool(&source, "logged.echo").await;
    call(&echo, json!({"text": "via toml"})).await.unwrap();
    assert_eq!(
        read_test_mcp_log(&log),
        [json!({"tool": "echo", "arguments": {"text": "via toml"}})]
    );
    source.shutdown().await;
}

#[tokio::test]
async fn titles_hints_and_output_schemas_are_listed() {
    let source = connect(None).await;

    let forecast = tool(&source, "test.forecast").await;
    let info = forecast.info();
    assert_eq!(info.title.as_deref(), Some("Weather forecast"));
    assert_eq!(info.read_only_hint, Some(true));
    assert_eq!(info.open_world_hint, Some(true));
    let schema = info
        .output_schema
        .as_ref()
        .expect("forecast has an output schema");
    assert_eq!(schema["required"], json!(["temperature", "conditions"]));

    let echo = tool(&source, "test.echo").await;
    assert_eq!(echo.info().title, None);
    assert_eq!(echo.info().output_schema, None);
    assert_eq!(echo.info().open_world_hint, None);

    source.shutdown().await;
}

#[tokio::test]
async fn a_structured_result_is_checked_against_the_output_schema() {
    let source = connect(None).await;

    let forecast = tool(&source, "test.forecast").await;
    let output = call(&forecast, json!({"city": "Lyon"})).await.unwrap();
    assert_eq!(output.text, "21.5 and sunny in Lyon");
    assert_eq!(
        output.structured,
        Some(json!({"temperature": 21.5, "conditions": "Sunny"}))
    );

    let bad = tool(&source, "test.bad_forecast").await;
    match call(&bad, json!({"city": "Lyon"})).await {
        Err(ToolError::Failed(message)) => {
            assert!(
                message
                    .starts_with("the tool's structured result does not match its output schema"),
                "{message}"
            );
            // Both problems, where they are: the model can tell the server is at fault.
            assert!(
                message.contains("\"conditions\" is a required property"),
                "{message}"
            );
            assert!(message.contains("at /temperature"), "{message}");
        }
        other => panic!("expected a failure, got {other:?}"),
    }

    source.shutdown().await;
}

#[tokio::test]
async fn progress_reports_reach_the_call_that_asked() {
    let source = connect(None).await;
    let progress = tool(&source, "test.progress").await;

    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let context = ToolContext {
        progress: Some(sender),
        ..ToolContext::default()
    };
    let output = tokio::time::timeout(
        PATIENCE,
        progress.call(json!({"steps": 3, "ms": 1}), context),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(output.text, "took 3 steps");

    // Every sender is gone once the call ended: its context, and the route of its reports.
    let mut seen = Vec::new();
    while let Some(report) = reports.recv().await {
        seen.push(report);
    }
    let expected: Vec<ToolProgress> = (1..=3)
        .map(|step| ToolProgress {
            progress: f64::from(step),
            total: Some(3.0),
            message: Some(format!("step {step}")),
        })
        .collect();
    assert_eq!(seen, expected);

    // Another call's reports are its own: a call without a listener gets none, and breaks
    // nothing.
    let silent = call(&progress, json!({"steps": 2, "ms": 1})).await.unwrap();
    assert_eq!(silent.text, "took 2 steps");

    source.shutdown().await;
}

#[tokio::test]
async fn configured_roots_are_advertised_and_listed_to_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = config(None).with_roots([
        dir.path().to_string_lossy().into_owned(),
        "file:///srv/shared".to_owned(),
    ]);
    let source = McpSource::connect("test", &config).await.unwrap();
    let roots = tool(&source, "test.roots").await;
    let listed = call(&roots, json!({})).await.unwrap().text;
    let expected = format!("file://{}\nfile:///srv/shared", dir.path().display());
    assert_eq!(listed, expected);
    source.shutdown().await;

    // Without roots, the capability is not declared.
    let source = connect(None).await;
    let roots = tool(&source, "test.roots").await;
    assert_eq!(
        call(&roots, json!({})).await.unwrap().text,
        "no roots capability"
    );
    source.shutdown().await;
}
