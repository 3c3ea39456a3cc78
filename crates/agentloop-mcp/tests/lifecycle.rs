//! The server's process ends with its `McpSource`: no orphans, whether shut down or dropped.
#![cfg(target_os = "linux")]
// Test helpers outside `#[test]` functions fail loudly too.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::{path::Path, time::Duration};

use agentloop_mcp::{McpServerConfig, McpSource};
use agentloop_test_support::{mcp::test_mcp_server_path, wait::until};

/// Far longer than stopping a server takes: a server that survives fails the test.
const PATIENCE: Duration = Duration::from_secs(15);

/// Starts the test server through a shell that writes the server's pid (`exec` keeps it).
async fn connect_with_pid(dir: &Path) -> (McpSource, u32) {
    let pid_file = dir.join("pid");
    let config = McpServerConfig::new("sh")
        .with_args(["-c", "echo $$ > \"$PID_FILE\"; exec \"$BIN\""])
        .with_env("PID_FILE", pid_file.to_string_lossy())
        .with_env("BIN", test_mcp_server_path().to_string_lossy());
    let source = McpSource::connect("test", &config).await.unwrap();
    let pid = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(is_alive(pid), "the server should run after connecting");
    (source, pid)
}

/// Whether `pid` runs: neither gone nor a zombie waiting to be reaped.
fn is_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state follows the parenthesised command name: `123 (name) S ...`.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

async fn wait_until_gone(pid: u32) {
    let what = format!("the server process {pid} is gone");
    until(&what, PATIENCE, || !is_alive(pid)).await;
}

#[tokio::test]
async fn shutdown_ends_the_server_process() {
    let dir = tempfile::tempdir().unwrap();
    let (source, pid) = connect_with_pid(dir.path()).await;

    source.shutdown().await;
    assert!(!source.is_running());
    wait_until_gone(pid).await;
}

#[tokio::test]
async fn dropping_the_source_ends_the_server_process() {
    let dir = tempfile::tempdir().unwrap();
    let (source, pid) = connect_with_pid(dir.path()).await;

    drop(source);
    wait_until_gone(pid).await;
}
