//! The official reference servers `@modelcontextprotocol/server-everything` (over stdio and
//! over streamable HTTP: tools, progress, resources, prompts) and `server-filesystem` (roots),
//! installed from npm into `test-servers/`.

// Test helpers outside `#[test]` functions fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{sync::Arc, time::Duration};

use agentloop_core::{Tool, ToolContext, ToolOutput, ToolSource};
use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::mcp::{reference_server_everything, reference_server_everything_http};
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
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
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

#[tokio::test]
async fn server_everything_over_streamable_http() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let mut server = reference_server_everything_http();
    let config = McpServerConfig::http(server.url());
    let source = tokio::time::timeout(PATIENCE, McpSource::connect("everything", &config))
        .await
        .expect("connecting to server-everything over HTTP hung")
        .unwrap();
    assert!(source.is_running());

    let names: Vec<String> = source
        .tools()
        .await
        .unwrap()
        .iter()
        .map(|tool| tool.info().name.clone())
        .collect();
    for expected in ["everything.echo", "everything.get-sum"] {
        assert!(
            names.iter().any(|name| name == expected),
            "{expected} not in {names:?}"
        );
    }
    assert_eq!(
        call(&source, "everything.echo", json!({"message": "over http"})).await,
        ToolOutput::text("Echo: over http")
    );
    assert_eq!(
        call(&source, "everything.get-sum", json!({"a": 2, "b": 3.5})).await,
        ToolOutput::text("The sum of 2 and 3.5 is 5.5.")
    );

    // Restarted, it forgets the session; it says so with HTTP 400 and a JSON-RPC error rather
    // than the 404 of the specification, and a new session is opened all the same.
    let mut changes = source.changes().unwrap();
    changes.borrow_and_update();
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    assert_eq!(
        call(&source, "everything.echo", json!({"message": "again"})).await,
        ToolOutput::text("Echo: again")
    );
    assert!(changes.has_changed().unwrap());

    source.shutdown().await;
    drop(server);
}

/// server-filesystem works in the roots the client lists (`roots/list`), not in the directory
/// of its command line, once the client declares the roots capability.
#[tokio::test]
async fn server_filesystem_is_restricted_to_the_configured_roots() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let (argument, root) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    std::fs::write(root.path().join("inside.txt"), "in the root").unwrap();
    std::fs::write(argument.path().join("outside.txt"), "in the argument").unwrap();
    let (command, args) = agentloop_test_support::mcp::reference_server_filesystem(argument.path());
    let root_path = root.path().canonicalize().unwrap();
    let config = McpServerConfig::new(command)
        .with_args(args)
        .with_roots([root_path.to_string_lossy().into_owned()]);
    let source = McpSource::connect("files", &config).await.unwrap();

    // The server asks for the roots once initialized; its answer replaces its directories.
    let allowed = agentloop_test_support::wait::eventually(
        "server-filesystem to take the roots",
        PATIENCE,
        || async {
            let listed = call(&source, "files.list_allowed_directories", json!({})).await;
            listed
                .text
                .contains(&*root_path.to_string_lossy())
                .then_some(listed.text)
        },
    )
    .await;
    let argument_path = argument.path().canonicalize().unwrap();
    assert!(
        !allowed.contains(&*argument_path.to_string_lossy()),
        "{allowed}"
    );

    let inside = root_path.join("inside.txt");
    let read = call(
        &source,
        "files.read_text_file",
        json!({"path": inside.to_string_lossy()}),
    )
    .await;
    assert_eq!(read.text, "in the root");
    let outside = tool(&source, "files.read_text_file").await;
    let refused = outside
        .call(
            json!({"path": argument_path.join("outside.txt").to_string_lossy()}),
            ToolContext::default(),
        )
        .await;
    assert!(refused.is_err(), "{refused:?}");
    source.shutdown().await;
}

/// server-everything's long-running operation reports each step with `notifications/progress`;
/// its resources (files and templates) are listed and read, its prompts listed.
#[tokio::test]
async fn server_everything_progress_resources_and_prompts() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let (command, args) = reference_server_everything();
    let config = McpServerConfig::new(command).with_args(args);
    let source = McpSource::connect("everything", &config).await.unwrap();

    let operation = tool(&source, "everything.trigger-long-running-operation").await;
    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let context = ToolContext {
        progress: Some(sender),
        ..ToolContext::default()
    };
    let done = tokio::time::timeout(
        PATIENCE,
        operation.call(json!({"duration": 0.3, "steps": 3}), context),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(done.text.contains("Steps: 3"), "{}", done.text);
    let mut seen = Vec::new();
    while let Some(report) = reports.recv().await {
        seen.push((report.progress, report.total));
    }
    assert_eq!(seen, [(1.0, Some(3.0)), (2.0, Some(3.0)), (3.0, Some(3.0))]);

    assert!(source.offers_resources().await);
    let resources = source.resources().await.unwrap();
    let doc = resources
        .iter()
        .find(|resource| resource.uri.starts_with("demo://resource/static/document/"))
        .unwrap_or_else(|| panic!("no doc among {resources:?}"));
    let read = source.read_resource(&doc.uri).await.unwrap();
    assert!(read[0].text.as_deref().is_some_and(|text| !text.is_empty()));
    let templates = source.resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|template| template.uri_template.ends_with("/text/{resourceId}")),
        "{templates:?}"
    );
    assert!(source.offers_prompts().await);
    let prompts = source.prompts().await.unwrap();
    assert!(
        prompts.iter().any(|prompt| prompt.name == "simple-prompt"),
        "{prompts:?}"
    );
    source.shutdown().await;
}
