//! The official MCP reference server `@modelcontextprotocol/server-everything` (from npm) over
//! stdio, driven through the whole loop by a scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use agentloop::{Config, ConfigOrigin, RunRequest, RunStatus, Runtime};
use agentloop_test_support::{
    mcp::reference_server_everything,
    scripted_llm::{Reply, ScriptedLlm},
};
use serde_json::json;

#[tokio::test]
async fn the_loop_lists_and_calls_the_reference_everything_server() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let (command, args) = reference_server_everything();
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("everything__get-sum", json!({"a": 2, "b": 40})),
        Reply::tool_call("everything__echo", json!({"message": "42"})),
        Reply::text("2 + 40 = 42, and the echo says so."),
    ])
    .await;
    let config = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\n[store]\nurl = \"sqlite::memory:\"\n\n[mcp_servers.everything]\ncommand = {}\nargs = {}\nstartup_timeout_s = 60\n",
        llm.base_url(),
        toml_string(&command),
        json!(args),
    );
    let config = Config::parse(&config, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());

    // Its tools are offered to the model under provider-safe names.
    let (_, outcome) = runtime
        .agent()
        .run(RunRequest::new("Add 2 and 40, then echo it"))
        .collect()
        .await
        .unwrap();
    let offered = ScriptedLlm::offered_tools(&llm.requests()[0]);
    assert!(
        offered.contains(&"everything__echo".to_string()),
        "{offered:?}"
    );
    assert!(
        offered.contains(&"everything__get-sum".to_string()),
        "{offered:?}"
    );

    assert_eq!(outcome.status, RunStatus::Completed);
    let results: Vec<(&str, &str)> = outcome
        .records
        .iter()
        .map(|record| (record.tool.as_str(), record.result.as_deref().unwrap_or("")))
        .collect();
    assert_eq!(
        results,
        [
            ("everything.get-sum", "The sum of 2 and 40 is 42."),
            ("everything.echo", "Echo: 42")
        ]
    );
    runtime.shutdown().await;
}

fn toml_string(text: &str) -> String {
    json!(text).to_string()
}

#[tokio::test]
async fn the_reference_filesystem_server_in_a_read_only_context() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("notes.txt"), "quarterly numbers: 42").unwrap();
    let (command, args) = agentloop_test_support::mcp::reference_server_filesystem(root.path());
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "fs__read_text_file",
            json!({"path": root.path().join("notes.txt")}),
        ),
        Reply::tool_call(
            "fs__write_file",
            json!({"path": root.path().join("notes.txt"), "content": "overwritten"}),
        ),
        Reply::text("The notes say 42; this project is read-only, so I did not change them."),
    ])
    .await;
    let config = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\n[store]\nurl = \"sqlite::memory:\"\n\n[mcp_servers.fs]\ncommand = {}\nargs = {}\nstartup_timeout_s = 60\n",
        llm.base_url(),
        toml_string(&command),
        json!(args),
    );
    let config = Config::parse(&config, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    let catalog = runtime.agent().catalog().clone();
    let write = catalog
        .get("fs.write_file")
        .expect("the server offers write_file");
    assert!(write.is_mutating(), "destructive by its annotations");
    assert!(!catalog.get("fs.read_text_file").unwrap().is_mutating());

    let request =
        RunRequest::new("What do the notes say? Then fix them.").context(agentloop::RunContext {
            read_only: true,
            ..agentloop::RunContext::default()
        });
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let offered = ScriptedLlm::offered_tools(&llm.requests()[0]);
    assert!(
        offered.contains(&"fs__read_text_file".to_string()),
        "{offered:?}"
    );
    for mutating in [
        "fs__write_file",
        "fs__edit_file",
        "fs__create_directory",
        "fs__move_file",
    ] {
        assert!(
            !offered.contains(&mutating.to_string()),
            "{mutating} offered: {offered:?}"
        );
    }
    assert_eq!(
        outcome.records[0].result.as_deref(),
        Some("quarterly numbers: 42")
    );
    assert_eq!(outcome.records[1].status.as_str(), "blocked");
    assert_eq!(
        std::fs::read_to_string(root.path().join("notes.txt")).unwrap(),
        "quarterly numbers: 42",
        "write_file never ran"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_loop_calls_the_reference_everything_server_over_streamable_http() {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let server = agentloop_test_support::mcp::reference_server_everything_http();
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("everything__get-sum", json!({"a": 20, "b": 22})),
        Reply::text("20 + 22 = 42."),
    ])
    .await;
    let config = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\n[store]\nurl = \"sqlite::memory:\"\n\n[mcp_servers.everything]\nurl = {}\nstartup_timeout_s = 60\n",
        llm.base_url(),
        toml_string(&server.url()),
    );
    let config = Config::parse(&config, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());
    let (_, outcome) = runtime
        .agent()
        .run(RunRequest::new("Add 20 and 22"))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.records[0].result.as_deref(),
        Some("The sum of 20 and 22 is 42.")
    );
    runtime.shutdown().await;
}
