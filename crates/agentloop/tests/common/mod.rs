//! Shared set-up of the end-to-end tests: a scripted LLM over HTTP and the test MCP server as a
//! real child process, put together by the real configuration code.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::path::Path;

use agentloop::{
    Config, ConfigOrigin, Event, EventKind, RunOutcome, RunRequest, Runtime, ToolExecutionRecord,
};
use agentloop_test_support::{config::TestConfig, scripted_llm::ScriptedLlm};
use serde_json::Value;

/// A configuration for `llm` and the test MCP server (named `test`), with an in-memory store,
/// plus `extra` TOML.
pub fn config(llm: &ScriptedLlm, log: Option<&Path>, extra: &str) -> Config {
    config_with_store(llm, log, "sqlite::memory:", extra)
}

/// Like [`config`], with the store at `store_url`.
pub fn config_with_store(
    llm: &ScriptedLlm,
    log: Option<&Path>,
    store_url: &str,
    extra: &str,
) -> Config {
    let mut text = TestConfig::new(&llm.base_url())
        .llm(&format!("provider = \"{}\"", llm.provider()))
        .llm("timeout_s = 10")
        .llm("max_retries = 2")
        .store(store_url)
        .extra(extra);
    if let Some(log) = log {
        text = text.mcp_log(log);
    }
    let config = Config::parse(&text.toml(), ConfigOrigin::Defaults).expect("test config parses");
    config.validate().expect("test config is valid");
    config
}

pub async fn runtime(llm: &ScriptedLlm, log: Option<&Path>, extra: &str) -> Runtime {
    let runtime = Runtime::start(&config(llm, log, extra))
        .await
        .expect("runtime starts");
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());
    runtime
}

/// Runs `query` to the end and returns its events and outcome.
pub async fn run(runtime: &Runtime, query: &str) -> (Vec<Event>, RunOutcome) {
    runtime
        .agent()
        .run(RunRequest::new(query))
        .collect()
        .await
        .expect("run task does not crash")
}

pub fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|event| event.kind.type_name()).collect()
}

pub fn find<'a>(events: &'a [Event], wanted: &str) -> Vec<&'a EventKind> {
    events
        .iter()
        .filter(|event| event.kind.type_name() == wanted)
        .map(|event| &event.kind)
        .collect()
}

/// The tool messages of a recorded LLM request body, as (tool_call_id, content).
pub fn tool_messages(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "tool")
        .map(|message| {
            (
                message["tool_call_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                message["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The names of the tools offered in a recorded LLM request body.
pub fn offered(request: &Value) -> Vec<String> {
    ScriptedLlm::offered_tools(request)
}

pub fn statuses(records: &[ToolExecutionRecord]) -> Vec<(&str, &str)> {
    records
        .iter()
        .map(|record| (record.tool.as_str(), record.status.as_str()))
        .collect()
}
