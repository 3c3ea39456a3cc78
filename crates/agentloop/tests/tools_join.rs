//! A slow MCP server never holds a run: starting waits at most `agent.tools_wait_s`, the run
//! goes on with the tools that are ready, and the slow server's tools join when it is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::{Config, ConfigOrigin, RunStatus, Runtime};
use agentloop_test_support::{
    mcp::{test_mcp_server_config_toml, test_mcp_server_path},
    scripted_llm::{Reply, ScriptedLlm},
    wait::until,
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_slow_server_joins_later_and_a_dead_one_is_reported() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("no slow tools yet"),
        Reply::text("now they are here"),
    ])
    .await;
    // The same test server, started behind a two-second delay.
    let slow = format!(
        "[mcp_servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", {}]\n",
        json!(format!(
            "sleep 2; exec {}",
            test_mcp_server_path().display()
        ))
    );
    let text = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n[store]\nurl = \"sqlite::memory:\"\n[agent]\ntools_wait_s = 0.3\n{}\n{slow}\n[mcp_servers.dead]\ncommand = \"/nonexistent/server\"\n",
        llm.base_url(),
        test_mcp_server_config_toml("fast", None),
    );
    let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    let warnings = runtime.warnings().join("\n");
    assert!(
        warnings.contains("MCP server slow is still starting"),
        "{warnings}"
    );
    assert!(
        warnings.contains("MCP server dead is left out"),
        "{warnings}"
    );

    let (_, first) = run(&runtime, "hello").await;
    assert_eq!(first.status, RunStatus::Completed);
    let tools = offered(&llm.requests()[0]);
    assert!(tools.contains(&"fast__echo".to_string()), "{tools:?}");
    assert!(
        !tools.iter().any(|tool| tool.starts_with("slow__")),
        "{tools:?}"
    );

    until("the slow server joins", Duration::from_secs(20), || {
        runtime.agent().catalog().get("slow.echo").is_some()
    })
    .await;
    run(&runtime, "hello again").await;
    let tools = offered(&llm.requests()[1]);
    assert!(tools.contains(&"slow__echo".to_string()), "{tools:?}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn an_http_mcp_server_works_through_the_loop_and_its_changes_reach_later_runs() {
    let server = agentloop_test_support::mcp::test_mcp_server_http(None);
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("web__echo", json!({"text": "over http"})),
        Reply::tool_call("web__add_tool", json!({"name": "weather"})),
        Reply::text("Echoed, and a weather tool appeared."),
        Reply::tool_call("web__weather", json!({})),
        Reply::text("Used the new tool."),
    ])
    .await;
    let text = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n[store]\nurl = \"sqlite::memory:\"\n{}",
        llm.base_url(),
        agentloop_test_support::mcp::test_mcp_http_config_toml("web", server.url()),
    );
    let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());
    let (_, first) = run(&runtime, "echo, then add a tool").await;
    assert_eq!(first.records[0].result.as_deref(), Some("over http"));
    assert!(!offered(&llm.requests()[0]).contains(&"web__weather".to_string()));

    // The server announced its new tool; the next run is offered it and can call it.
    until("the list change lands", Duration::from_secs(20), || {
        runtime.agent().catalog().get("web.weather").is_some()
    })
    .await;
    let (_, second) = run(&runtime, "use the new tool").await;
    assert!(offered(&llm.requests()[3]).contains(&"web__weather".to_string()));
    assert_eq!(
        second.records[0].result.as_deref(),
        Some("extra tool weather")
    );
    runtime.shutdown().await;
}
