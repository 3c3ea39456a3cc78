//! Starting servers: what the user sees when a server cannot start, and `connect_all`.

// Test helpers outside `#[test]` functions fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{collections::BTreeMap, time::Duration};

use agentloop_core::{InvalidSetting, ToolSource};
use agentloop_mcp::{McpError, McpServerConfig, McpSource, connect_all};
use agentloop_test_support::mcp::test_mcp_server_path;

/// Far longer than any startup here takes: a start that hangs fails the test instead.
const PATIENCE: Duration = Duration::from_secs(30);

async fn connect(name: &str, config: &McpServerConfig) -> Result<McpSource, McpError> {
    tokio::time::timeout(PATIENCE, McpSource::connect(name, config))
        .await
        .unwrap_or_else(|_| panic!("connecting to {name} hung"))
}

fn shell(script: &str) -> McpServerConfig {
    McpServerConfig::new("sh").with_args(["-c", script])
}

#[tokio::test]
async fn a_missing_command_names_the_command_and_the_server() {
    let error = connect(
        "ghost",
        &McpServerConfig::new("agentloop-no-such-command-7"),
    )
    .await
    .unwrap_err();
    assert!(matches!(error, McpError::Spawn { .. }), "{error:?}");
    assert_eq!(error.server(), Some("ghost"));
    let message = error.to_string();
    assert!(message.contains("agentloop-no-such-command-7"), "{message}");
    assert!(message.contains("'ghost'"), "{message}");
    assert!(message.contains("not found"), "{message}");
}

#[tokio::test]
async fn a_missing_working_directory_is_not_reported_as_a_missing_command() {
    let config = McpServerConfig::new("sh").with_cwd("/agentloop/no/such/dir");
    let message = connect("files", &config).await.unwrap_err().to_string();
    assert!(message.contains("mcp_servers.files.cwd"), "{message}");
    assert!(!message.contains("not found"), "{message}");
}

#[tokio::test]
async fn a_server_exiting_at_start_shows_its_stderr_and_status() {
    let error = connect("broken", &shell("echo boom >&2; exit 1"))
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Handshake { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains("'broken'"), "{message}");
    assert!(message.contains("boom"), "{message}");
    assert!(message.contains("exited with status 1"), "{message}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_naming_the_setting() {
    // `exec` so that killing the server leaves no `sleep` behind.
    let config = shell("exec sleep 60").with_startup_timeout_s(0.5);
    let error = connect("slow", &config).await.unwrap_err();
    assert!(
        matches!(error, McpError::StartupTimeout { .. }),
        "{error:?}"
    );
    assert!(
        error
            .to_string()
            .contains("mcp_servers.slow.startup_timeout_s"),
        "{error}"
    );
}

#[tokio::test]
async fn invalid_configurations_are_refused_before_spawning() {
    let error = connect("files", &McpServerConfig::new(""))
        .await
        .unwrap_err();
    assert_eq!(
        error,
        McpError::InvalidConfig(InvalidSetting::new(
            "mcp_servers.files.command",
            "mcp_servers.files.command must not be empty"
        ))
    );

    let binary = test_mcp_server_path();
    let error = connect("my.files", &McpServerConfig::new(binary.to_string_lossy()))
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::InvalidConfig(_)), "{error:?}");
}

#[tokio::test]
async fn connect_all_starts_servers_together_and_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    let binary = test_mcp_server_path();
    // Each of `a` and `b` waits for the other to have started before it execs the test server,
    // so both start only if they are started at the same time; one after the other, `a` would
    // wait until its startup timeout.
    let rendezvous = |me: &str, other: &str| {
        shell(&format!(
            ": > \"$DIR/{me}\"; until [ -e \"$DIR/{other}\" ]; do sleep 0.05; done; exec \"$BIN\""
        ))
        .with_env("DIR", dir.path().to_string_lossy())
        .with_env("BIN", binary.to_string_lossy())
        .with_startup_timeout_s(20.0)
    };
    let servers = BTreeMap::from([
        ("a".to_owned(), rendezvous("a", "b")),
        ("b".to_owned(), rendezvous("b", "a")),
        (
            "c".to_owned(),
            McpServerConfig::new("agentloop-no-such-command-7"),
        ),
    ]);

    let (sources, failures) = tokio::time::timeout(
        PATIENCE,
        connect_all(&servers, &agentloop_mcp::oauth::OAuthContext::in_memory()),
    )
    .await
    .unwrap();

    let mut started: Vec<&str> = sources.iter().map(|source| source.name()).collect();
    started.sort_unstable();
    assert_eq!(started, ["a", "b"], "failures: {failures:?}");
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].0, "c");
    assert!(matches!(failures[0].1, McpError::Spawn { .. }));

    for source in &sources {
        assert!(!source.tools().await.unwrap().is_empty());
        source.shutdown().await;
    }
}
