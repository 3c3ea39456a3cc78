//! A crashed MCP server through the whole loop: the model crashes it with a tool call, the next
//! LLM request no longer offers its tools, it is restarted, and a later request offers them
//! again and the call goes through. Every server's state is reported by the agent.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{path::Path, time::Duration};

use agentloop::{
    Config, ConfigOrigin, RunStatus, Runtime, ToolStatus,
    core::protocol::{SourceState, SourceStatus, SourceTransport},
};
use agentloop_test_support::{
    mcp::test_mcp_server_path,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::{offered, run};
use serde_json::json;

const PATIENCE: Duration = Duration::from_secs(30);

fn status(runtime: &Runtime, name: &str) -> SourceStatus {
    let statuses = runtime.agent().services().tools.source_statuses();
    statuses
        .iter()
        .find(|status| status.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("no status of {name} in {statuses:?}"))
}

/// Waits until the server `name` is in the state `wanted` accepts, with the test's tools
/// offered or not as `offered` says.
async fn wait_for(
    runtime: &Runtime,
    name: &str,
    offered: bool,
    wanted: impl Fn(&SourceState) -> bool,
) -> SourceStatus {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let status = status(runtime, name);
        let in_catalog = runtime
            .agent()
            .catalog()
            .get(&format!("{name}.echo"))
            .is_some();
        if wanted(&status.health.state) && in_catalog == offered {
            return status;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never got there; last {status:?}, offered: {in_catalog}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn config(llm: &ScriptedLlm, hold: &Path) -> Config {
    // The test server, behind a shell whose next start waits while `hold` exists.
    let script = r#"while [ -e "$HOLD" ]; do sleep 0.05; done; exec "$BIN""#;
    let text = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n[store]\nurl = \"sqlite::memory:\"\n\
         [mcp_servers.test]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n\
         env = {{ HOLD = {}, BIN = {} }}\n\
         max_restarts = 3\nrestart_backoff_s = 0.05\nrestart_backoff_max_s = 0.2\n\
         [mcp_servers.dead]\ncommand = \"/nonexistent/server\"\n",
        llm.base_url(),
        json!(script),
        json!(hold.to_string_lossy()),
        json!(test_mcp_server_path().to_string_lossy()),
    );
    let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
    config.validate().unwrap();
    config
}

#[tokio::test]
async fn a_crashed_server_leaves_the_requests_and_comes_back_after_its_restart() {
    let dir = tempfile::tempdir().unwrap();
    let hold = dir.path().join("hold");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__crash", json!({})),
        Reply::text("The server crashed."),
        Reply::text("Its tools are gone for now."),
        Reply::tool_call("test__echo", json!({"text": "back"})),
        Reply::text("It is back."),
    ])
    .await;
    let runtime = Runtime::start(&config(&llm, &hold)).await.unwrap();

    let dead = status(&runtime, "dead");
    assert_eq!(dead.health.transport, SourceTransport::Stdio);
    assert!(
        matches!(&dead.health.state, SourceState::Down { reason } if reason.contains("/nonexistent/server")),
        "{dead:?}"
    );
    let test = status(&runtime, "test");
    assert_eq!(test.health.state, SourceState::Up);
    assert!(test.tools > 0, "{test:?}");

    std::fs::write(&hold, "").unwrap();
    let (_, crashed) = run(&runtime, "crash it").await;
    assert_eq!(crashed.records[0].tool, "test.crash");
    assert_eq!(crashed.records[0].status, ToolStatus::Error);
    let error = crashed.records[0].error.clone().unwrap_or_default();
    assert!(error.contains("exited with status 3"), "{error}");

    let restarting = wait_for(&runtime, "test", false, |state| {
        matches!(state, SourceState::Restarting { .. })
    })
    .await;
    assert_eq!(restarting.tools, 0);
    let (_, meanwhile) = run(&runtime, "anything?").await;
    assert_eq!(meanwhile.status, RunStatus::Completed);
    let tools = offered(&llm.requests()[2]);
    assert!(
        !tools.iter().any(|tool| tool.starts_with("test__")),
        "{tools:?}"
    );

    std::fs::remove_file(&hold).unwrap();
    let up = wait_for(&runtime, "test", true, SourceState::is_up).await;
    assert_eq!(up.health.restarts, 1);
    let (_, back) = run(&runtime, "echo back").await;
    assert!(offered(&llm.requests()[3]).contains(&"test__echo".to_owned()));
    assert_eq!(back.records[0].status, ToolStatus::Success);
    assert_eq!(back.records[0].result.as_deref(), Some("back"));
    runtime.shutdown().await;
}
