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
    let offered: Vec<String> = llm.requests()[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["function"]["name"].as_str().unwrap().to_string())
        .collect();
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
