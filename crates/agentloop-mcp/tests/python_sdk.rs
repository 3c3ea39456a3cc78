//! A server written with the official MCP Python SDK (`tests/python/server.py`, mcp 2.x's
//! MCPServer, formerly FastMCP) over stdio and over streamable HTTP: structured output checked
//! against its output schema, progress reports, roots, resources and prompts.
//!
//! Needs a Python with `mcp` (`requires::mcp_python`, installed by `.ci/run`); skipped, saying
//! so, without one (a failure with `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::Arc,
    time::Duration,
};

use agentloop_core::{Tool, ToolContext, ToolProgress, ToolSource};
use agentloop_mcp::{McpPromptRole, McpServerConfig, McpSource};
use agentloop_test_support::{requires, wait::eventually};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(30);

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/server.py")
}

async fn tool(source: &McpSource, name: &str) -> Arc<dyn Tool> {
    source
        .tools()
        .await
        .unwrap()
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Everything the Python server offers, through `source` (named `py`).
async fn check(source: &McpSource, root: &Path) {
    // Structured output: the schema pydantic derived, and a result that fits it.
    let weather = tool(source, "py.weather").await;
    let schema = weather
        .info()
        .output_schema
        .clone()
        .expect("an output schema");
    assert_eq!(
        schema["properties"]["temperature"]["type"], "number",
        "{schema}"
    );
    let output = weather
        .call(json!({"city": "Brest"}), ToolContext::default())
        .await
        .unwrap();
    assert_eq!(
        output.structured,
        Some(json!({"temperature": 18.5, "conditions": "Windy in Brest"}))
    );

    // Progress, to the call that asked.
    let steps = tool(source, "py.steps").await;
    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let context = ToolContext {
        progress: Some(sender),
        ..ToolContext::default()
    };
    let output = tokio::time::timeout(PATIENCE, steps.call(json!({"count": 3}), context))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(output.text, "took 3 steps");
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

    // Roots, as the server asks for them.
    let roots = tool(source, "py.roots").await;
    let listed = roots.call(json!({}), ToolContext::default()).await.unwrap();
    assert_eq!(listed.text, format!("file://{}", root.display()));

    // Resources, templates, prompts.
    let resources = source.resources().await.unwrap();
    assert_eq!(resources[0].uri, "memo://today");
    assert_eq!(
        source.read_resource("memo://today").await.unwrap()[0].as_text(),
        "buy milk"
    );
    let templates = source.resource_templates().await.unwrap();
    assert_eq!(templates[0].uri_template, "memo://day/{day}");
    assert_eq!(
        source.read_resource("memo://day/monday").await.unwrap()[0].as_text(),
        "memo for monday"
    );
    let prompts = source.prompts().await.unwrap();
    assert_eq!(prompts[0].name, "review");
    assert!(prompts[0].arguments[0].required);
    let arguments = json!({"code": "fn main() {}"})
        .as_object()
        .cloned()
        .unwrap();
    let messages = source.prompt("review", arguments).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].role, McpPromptRole::User);
    assert_eq!(messages[0].text, "Review this code:\nfn main() {}");
}

#[tokio::test]
async fn a_python_sdk_server_over_stdio() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let config = McpServerConfig::new(python.to_string_lossy())
        .with_args([script().to_string_lossy().into_owned()])
        .with_roots([root_path.to_string_lossy().into_owned()]);
    let source = McpSource::connect("py", &config).await.unwrap();
    check(&source, &root_path).await;
    source.shutdown().await;
}

/// The Python server over HTTP, stopped when dropped.
struct HttpServer(Child);

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn a_python_sdk_server_over_streamable_http() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = HttpServer(
        Command::new(&python)
            .arg(script())
            .args(["--http", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let config = McpServerConfig::http(format!("http://127.0.0.1:{port}/mcp"))
        .with_roots([root_path.to_string_lossy().into_owned()]);
    // Until the server listens.
    let source = eventually("the Python server to answer", PATIENCE, || async {
        McpSource::connect("py", &config).await.ok()
    })
    .await;
    check(&source, &root_path).await;
    source.shutdown().await;
}
