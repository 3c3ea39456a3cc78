//! Supervision: a server that stops is restarted (over HTTP, reconnected) with backoff and a
//! limit; while it is not up its tools are withdrawn from the agent's registry, and they come
//! back with it. Real processes throughout: the test server's `crash` tool kills its own
//! process, and a shell in front of it decides whether the next start waits or fails.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{collections::BTreeMap, path::Path, sync::Arc, time::Duration};

use agentloop_core::{
    Tool, ToolContext, ToolError, ToolOutput, ToolRegistry, ToolSource,
    protocol::{SourceState, SourceStatus, SourceTransport},
};
use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::mcp::{
    LOG_ENV, TestMcpHttp, read_test_mcp_log, test_mcp_server_http, test_mcp_server_path,
};
use agentloop_test_support::wait::never;
use serde_json::{Value, json};

/// Far longer than a restart takes: a state that never comes fails the test instead.
const PATIENCE: Duration = Duration::from_secs(30);

/// The test server started by a shell that, before each start, appends a line to `starts`,
/// waits while the file `hold` exists, and exits with status 7 when the file `fail` exists.
fn wrapped(dir: &Path) -> McpServerConfig {
    let script = r#"echo start >> "$STARTS"
while [ -e "$HOLD" ]; do sleep 0.05; done
if [ -e "$FAIL" ]; then echo "refusing to start" >&2; exit 7; fi
exec "$BIN""#;
    McpServerConfig::new("sh")
        .with_args(["-c", script])
        .with_env("STARTS", dir.join("starts").to_string_lossy())
        .with_env("HOLD", dir.join("hold").to_string_lossy())
        .with_env("FAIL", dir.join("fail").to_string_lossy())
        .with_env("BIN", test_mcp_server_path().to_string_lossy())
        .with_env(LOG_ENV, dir.join("calls.jsonl").to_string_lossy())
}

fn starts(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("starts"))
        .unwrap_or_default()
        .lines()
        .count()
}

fn touch(path: &Path) {
    std::fs::write(path, "").unwrap();
}

async fn connect(name: &str, config: &McpServerConfig) -> Arc<McpSource> {
    let source = tokio::time::timeout(PATIENCE, McpSource::connect(name, config))
        .await
        .unwrap_or_else(|_| panic!("connecting to {name} hung"))
        .unwrap();
    Arc::new(source)
}

/// A registry (what the agent offers new runs) with `source` in it.
async fn registry_with(source: &Arc<McpSource>) -> Arc<ToolRegistry> {
    let registry = Arc::new(ToolRegistry::new(
        Vec::new(),
        BTreeMap::new(),
        BTreeMap::new(),
    ));
    registry
        .add_source(source.clone() as Arc<dyn ToolSource>)
        .await
        .unwrap();
    registry
}

fn offered(registry: &ToolRegistry) -> Vec<String> {
    registry
        .catalog()
        .entries()
        .iter()
        .map(|entry| entry.name().to_owned())
        .collect()
}

fn status(registry: &ToolRegistry) -> SourceStatus {
    let statuses = registry.source_statuses();
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    statuses[0].clone()
}

/// Waits until the registry reports what `wanted` accepts, both in the source's status and in
/// the tools it offers; fails after [`PATIENCE`] with what it saw last.
async fn wait_for(
    registry: &ToolRegistry,
    what: &str,
    wanted: impl Fn(&SourceStatus, &[String]) -> bool,
) -> SourceStatus {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let (status, offered) = (status(registry), offered(registry));
        if wanted(&status, &offered) {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never {what}; last {status:?} offering {offered:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

async fn call(tool: &Arc<dyn Tool>, arguments: Value) -> Result<ToolOutput, ToolError> {
    tokio::time::timeout(PATIENCE, tool.call(arguments, ToolContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{} did not answer in time", tool.info().name))
}

fn has_tools_of(offered: &[String], server: &str) -> bool {
    offered.iter().any(|name| name == &format!("{server}.echo"))
}

#[tokio::test]
async fn a_crashed_server_is_restarted_and_its_tools_come_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = wrapped(dir.path()).with_restarts(3, 0.05, 0.2);
    let source = connect("test", &config).await;
    let registry = registry_with(&source).await;
    let before = status(&registry);
    assert_eq!(before.health.state, SourceState::Up);
    assert_eq!(before.health.transport, SourceTransport::Stdio);
    assert_eq!(before.health.restarts, 0);
    assert!(has_tools_of(&offered(&registry), "test"));
    let echo = tool(&source, "test.echo").await;
    let crash = tool(&source, "test.crash").await;

    // The next start waits until the test lets it go, so the time in between is observable.
    touch(&dir.path().join("hold"));
    let crashed = call(&crash, json!({})).await;
    assert!(
        matches!(&crashed, Err(ToolError::Unavailable(message)) if message.contains("exited with status 3")),
        "{crashed:?}"
    );

    let restarting = wait_for(
        &registry,
        "withdrawn while restarting",
        |status, offered| {
            matches!(status.health.state, SourceState::Restarting { .. }) && offered.is_empty()
        },
    )
    .await;
    let SourceState::Restarting { reason, attempt } = &restarting.health.state else {
        unreachable!()
    };
    assert!(reason.contains("exited with status 3"), "{reason}");
    assert_eq!(*attempt, 1);
    assert_eq!(restarting.tools, 0);

    // A call from a run that still holds the tool gets an error the model can act on.
    let meanwhile = call(&echo, json!({"text": "anyone?"})).await;
    let Err(ToolError::Unavailable(message)) = meanwhile else {
        panic!("a call while restarting gave {meanwhile:?}");
    };
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(message.contains("restarting it"), "{message}");

    std::fs::remove_file(dir.path().join("hold")).unwrap();
    let up = wait_for(&registry, "offered again", |status, offered| {
        status.health.state == SourceState::Up && has_tools_of(offered, "test")
    })
    .await;
    assert_eq!(up.health.restarts, 1);
    assert_eq!(starts(dir.path()), 2);
    assert!(source.is_running());

    // The tool held from before reaches the new process, and so does the one offered now.
    assert_eq!(
        call(&echo, json!({"text": "back"})).await,
        Ok(ToolOutput::text("back"))
    );
    let fresh = registry.catalog().get("test.echo").unwrap().tool.clone();
    assert_eq!(
        call(&fresh, json!({"text": "fresh"})).await,
        Ok(ToolOutput::text("fresh"))
    );
    let logged: Vec<Value> = read_test_mcp_log(&dir.path().join("calls.jsonl"))
        .into_iter()
        .map(|line| line["tool"].clone())
        .collect();
    assert_eq!(logged, [json!("crash"), json!("echo"), json!("echo")]);

    source.shutdown().await;
    assert!(matches!(
        &status(&registry).health.state,
        SourceState::Down { reason } if reason.contains("shut down")
    ));
}

#[tokio::test]
async fn a_server_that_keeps_failing_to_start_is_given_up_after_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = wrapped(dir.path()).with_restarts(2, 0.05, 0.1);
    let source = connect("test", &config).await;
    let registry = registry_with(&source).await;
    let echo = tool(&source, "test.echo").await;
    let crash = tool(&source, "test.crash").await;

    touch(&dir.path().join("fail"));
    let _ = call(&crash, json!({})).await;

    let down = wait_for(&registry, "down", |status, _| {
        matches!(status.health.state, SourceState::Down { .. })
    })
    .await;
    let SourceState::Down { reason } = &down.health.state else {
        unreachable!()
    };
    assert!(reason.contains("exited with status 7"), "{reason}");
    assert!(reason.contains("refusing to start"), "{reason}");
    assert!(reason.contains("gave up after 2 restarts"), "{reason}");
    assert!(reason.contains("mcp_servers.test.max_restarts"), "{reason}");
    assert_eq!(down.health.restarts, 0);
    assert_eq!(down.tools, 0);
    assert!(offered(&registry).is_empty());
    // The first start and exactly two restarts.
    assert_eq!(starts(dir.path()), 3);

    let late = call(&echo, json!({"text": "anyone?"})).await;
    let Err(ToolError::Unavailable(message)) = late else {
        panic!("a call after giving up gave {late:?}");
    };
    assert!(message.contains("exited with status 3"), "{message}");
    assert!(message.contains("gave up restarting it"), "{message}");

    // Given up means given up: no further start, even once it could start again.
    // A supervisor still at work would start it within its longest backoff (0.1 s); five
    // times that with no start is a supervisor that stopped.
    std::fs::remove_file(dir.path().join("fail")).unwrap();
    never(
        "started again after giving up",
        Duration::from_millis(500),
        || starts(dir.path()) != 3,
    )
    .await;
    assert!(matches!(
        status(&registry).health.state,
        SourceState::Down { .. }
    ));
    source.shutdown().await;
}

#[tokio::test]
async fn a_server_that_crashes_again_after_a_restart_counts_towards_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let config = wrapped(dir.path()).with_restarts(1, 0.05, 0.1);
    let source = connect("test", &config).await;
    let registry = registry_with(&source).await;

    let crash = tool(&source, "test.crash").await;
    let _ = call(&crash, json!({})).await;
    wait_for(&registry, "restarted", |status, offered| {
        status.health.restarts == 1 && status.health.state.is_up() && !offered.is_empty()
    })
    .await;
    // At once again: the one restart allowed in a row is spent.
    let crash = registry.catalog().get("test.crash").unwrap().tool.clone();
    let _ = call(&crash, json!({})).await;
    let down = wait_for(&registry, "down", |status, _| {
        matches!(status.health.state, SourceState::Down { .. })
    })
    .await;
    assert_eq!(down.health.restarts, 1);
    assert_eq!(starts(dir.path()), 2);
    source.shutdown().await;
}

#[tokio::test]
async fn a_server_over_http_that_went_away_is_reconnected_once_it_is_back() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let mut server = test_mcp_server_http(Some(&log));
    let addr = server.addr().to_owned();
    // Patient: however long the new process takes to start, the test decides when it is back.
    let config = McpServerConfig::http(server.url()).with_restarts(1000, 0.05, 0.2);
    let source = connect("web", &config).await;
    let registry = registry_with(&source).await;
    assert_eq!(status(&registry).health.transport, SourceTransport::Http);
    let echo = tool(&source, "web.echo").await;

    tokio::task::spawn_blocking(move || {
        server.kill();
        server
    })
    .await
    .unwrap();
    let result = call(&echo, json!({"text": "anyone?"})).await;
    let Err(ToolError::Unavailable(message)) = result else {
        panic!("a call to the dead server gave {result:?}");
    };
    assert!(message.contains("cannot be reached"), "{message}");

    let away = wait_for(&registry, "withdrawn while away", |status, offered| {
        matches!(status.health.state, SourceState::Restarting { .. }) && offered.is_empty()
    })
    .await;
    let SourceState::Restarting { reason, .. } = &away.health.state else {
        unreachable!()
    };
    assert!(reason.contains("cannot be reached"), "{reason}");

    // A new process on the same address: it knows none of the old sessions.
    let server = tokio::task::spawn_blocking(move || TestMcpHttp::spawn(&addr, Some(&log), None))
        .await
        .unwrap();
    let back = wait_for(&registry, "offered again", |status, offered| {
        status.health.state == SourceState::Up && has_tools_of(offered, "web")
    })
    .await;
    assert!(back.health.restarts >= 1, "{back:?}");
    assert_eq!(
        call(&echo, json!({"text": "back"})).await,
        Ok(ToolOutput::text("back"))
    );
    source.shutdown().await;
    drop(server);
}
