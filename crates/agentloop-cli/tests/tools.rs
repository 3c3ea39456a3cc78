//! `agentloop tools` reports the state of each MCP server, as a user reads it and as JSON.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, stderr, stdout, write_config};
use serde_json::Value;

#[tokio::test]
async fn tools_shows_the_state_of_each_server() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "http://127.0.0.1:9/v1",
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );

    let output = agentloop(dir.path(), &["tools"]).await;
    // A server that is down fails the command, after listing the others.
    assert!(!output.status.success(), "{}", stderr(&output));
    let listing = stdout(&output);
    assert!(
        listing.starts_with("llm: openai scripted at http://127.0.0.1:9/v1\n"),
        "{listing}"
    );
    assert!(
        listing
            .lines()
            .any(|line| line.starts_with("test (stdio, up, ") && line.ends_with(" tools)")),
        "{listing}"
    );
    let errors = stderr(&output);
    let broken = errors
        .lines()
        .find(|line| line.starts_with("broken: down: "))
        .unwrap_or_else(|| panic!("no state of broken in {errors}"));
    assert!(broken.contains("/nonexistent/mcp-server"), "{broken}");

    let output = agentloop(dir.path(), &["tools", "--json"]).await;
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value["llm"]["provider"], "openai");
    assert_eq!(value["llm"]["base_url"], "http://127.0.0.1:9/v1");
    let test = &value["servers"][0];
    assert_eq!(test["server"], "test");
    assert_eq!(test["transport"], "stdio");
    assert_eq!(test["state"], "up");
    assert_eq!(test["restarts"], 0);
    assert!(!test["tools"].as_array().unwrap().is_empty(), "{test}");
    let broken = &value["failed"][0];
    assert_eq!(broken["server"], "broken");
    assert_eq!(broken["transport"], "stdio");
    assert_eq!(broken["state"], "down");
    assert!(
        broken["reason"]
            .as_str()
            .unwrap()
            .contains("/nonexistent/mcp-server"),
        "{broken}"
    );
}
