//! The JSON planner mode (`llm.tool_calling = "json"`) end to end: the scripted LLM only ever
//! answers text, the loop still calls the tools of the test MCP server and keeps its rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;

use agentloop::{
    Config, ConfigOrigin, Event, EventKind, FinalizeReason, RunStatus, Runtime, llm::ToolCalling,
};
use agentloop_test_support::{
    mcp::{read_test_mcp_log, test_mcp_server_config_toml},
    scripted_llm::{Reply, ScriptedLlm},
};
use common::{find, run, statuses, tool_messages, types};
use serde_json::Value;

/// Like `common::config`, with `tool_calling = "json"` in the `[llm]` section.
fn json_config(llm: &ScriptedLlm, log: Option<&Path>, extra: &str) -> Config {
    let text = format!(
        "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\ntimeout_s = 10\nmax_retries = 2\n\
         tool_calling = \"json\"\n\n[store]\nurl = \"sqlite::memory:\"\n\n{}\n{}\n",
        llm.base_url(),
        test_mcp_server_config_toml("test", log),
        extra
    );
    let config = Config::parse(&text, ConfigOrigin::Defaults).expect("test config parses");
    config.validate().expect("test config is valid");
    assert_eq!(config.llm.tool_calling, ToolCalling::Json);
    config
}

async fn json_runtime(llm: &ScriptedLlm, log: Option<&Path>, extra: &str) -> Runtime {
    let runtime = Runtime::start(&json_config(llm, log, extra))
        .await
        .expect("runtime starts");
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());
    runtime
}

/// The texts of the messages of `role` in a recorded request body.
fn texts(request: &Value, role: &str) -> Vec<String> {
    request["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == role)
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn joined(events: &[Event], kind: &str) -> Vec<String> {
    find(events, kind)
        .into_iter()
        .map(|kind| match kind {
            EventKind::AssistantDelta { text } => text.clone(),
            EventKind::FinalResponse { delta } => delta.clone(),
            _ => String::new(),
        })
        .collect()
}

/// The request carried no native tool calling at all: no tools, no tool messages.
fn assert_plain_chat(request: &Value) {
    assert!(request.get("tools").is_none(), "{request}");
    assert!(request.get("tool_choice").is_none(), "{request}");
    assert!(tool_messages(request).is_empty(), "{request}");
    let messages = request["messages"].as_array().unwrap();
    assert!(
        messages
            .iter()
            .all(|message| message.get("tool_calls").is_none()),
        "{request}"
    );
}

const ECHO: &str = r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "hello"}, "reasoning": "First the echo."}"#;
const ADD: &str = r#"{"action": "tool", "tool": "test__add", "parameters": {"a": 2, "b": 3}, "reasoning": "Now the sum."}"#;

fn finalize(answer: &str) -> Reply {
    Reply::text(serde_json::json!({"action": "finalize", "answer": answer}).to_string())
}

#[tokio::test]
async fn the_model_chains_tools_by_answering_json() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(ECHO),
        Reply::text(ADD),
        finalize("The echo said hello and 2 + 3 = 5."),
    ])
    .await;
    let runtime = json_runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "Echo hello, then add 2 and 3").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The echo said hello and 2 + 3 = 5.")
    );
    assert_eq!(
        statuses(&outcome.records),
        [("test.echo", "success"), ("test.add", "success")]
    );
    assert_eq!(outcome.records[1].result.as_deref(), Some("5"));

    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    for request in &requests {
        assert_plain_chat(request);
        assert_eq!(request["messages"][0], requests[0]["messages"][0]);
        let protocol = request["messages"][1]["content"].as_str().unwrap();
        assert_eq!(request["messages"][1]["role"], "system");
        assert!(
            protocol.contains("test__echo") && protocol.contains("test__add"),
            "{protocol}"
        );
    }
    let results = texts(&requests[1], "user");
    assert!(
        results[results.len() - 1].starts_with("Result of test__echo (call_")
            && results[results.len() - 1].ends_with("):\nhello"),
        "{results:?}"
    );
    let calls = texts(&requests[1], "assistant");
    let call: Value = serde_json::from_str(&calls[calls.len() - 1]).unwrap();
    assert_eq!(call["tool"], "test__echo");
    assert_eq!(call["parameters"]["text"], "hello");
    assert!(
        texts(&requests[2], "user")
            .iter()
            .any(|text| text.starts_with("Result of test__add") && text.ends_with("5")),
        "{:?}",
        texts(&requests[2], "user")
    );

    // The same events as in native mode; the reasoning streams as assistant text, raw JSON never.
    let without_deltas: Vec<&str> = types(&events)
        .into_iter()
        .filter(|kind| *kind != "assistant_delta")
        .collect();
    assert_eq!(
        without_deltas,
        [
            "run_started",
            "thinking",
            "llm_call",
            "tool_selected",
            "tool_executed",
            "thinking",
            "llm_call",
            "tool_selected",
            "tool_executed",
            "thinking",
            "llm_call",
            "final_response",
            "done"
        ]
    );
    assert_eq!(
        joined(&events, "assistant_delta"),
        [
            "First the echo.",
            "Now the sum.",
            "The echo said hello and 2 + 3 = 5."
        ]
    );
    assert_eq!(
        joined(&events, "final_response"),
        ["The echo said hello and 2 + 3 = 5."]
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn fenced_single_quoted_and_broken_replies_are_recovered() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(format!("Sure, here it is:\n```json\n{ECHO}\n```\nDone.")),
        Reply::text("{'action': 'tool', 'tool': 'test__add', 'parameters': {'a': 2, 'b': 3},}"),
        Reply::text("I will call echo now"),
        finalize("hello and 5"),
    ])
    .await;
    let runtime = json_runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "echo and add").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("hello and 5"));
    assert_eq!(outcome.finalize_reason, None);
    assert_eq!(
        statuses(&outcome.records),
        [("test.echo", "success"), ("test.add", "success")]
    );
    assert!(find(&events, "forced_finalize").is_empty());

    let requests = llm.requests();
    assert_eq!(requests.len(), 4, "one retry, for the broken reply only");
    let retry = &requests[3];
    assert_plain_chat(retry);
    let assistant = texts(retry, "assistant");
    assert_eq!(assistant[assistant.len() - 1], "I will call echo now");
    let users = texts(retry, "user");
    let correction = &users[users.len() - 1];
    assert!(
        correction.contains("could not be read: the reply holds no JSON object")
            && correction.contains(r#""action": "finalize""#),
        "{correction}"
    );
    // The broken attempt is not part of the conversation the run keeps.
    assert!(
        outcome
            .messages
            .iter()
            .all(|message| message.message.text_content() != "I will call echo now")
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn two_broken_replies_in_a_row_force_the_summary() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(ECHO),
        Reply::text("I will call echo now"),
        Reply::text("Still no JSON, sorry."),
        finalize("I echoed hello."),
    ])
    .await;
    let runtime = json_runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "echo").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I echoed hello."));
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DegenerateResponse)
    );
    assert!(
        find(&events, "forced_finalize").contains(&&EventKind::ForcedFinalize {
            reason: FinalizeReason::DegenerateResponse
        })
    );
    // The forced answer is delivered once, not again by the loop.
    assert_eq!(joined(&events, "final_response"), ["I echoed hello."]);
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    let protocol = requests[3]["messages"][1]["content"].as_str().unwrap();
    assert!(
        protocol.contains("Calling tools is not possible now"),
        "{protocol}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_summary_that_stays_broken_falls_back_to_the_records() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(ADD),
        Reply::text("no"),
        Reply::text("no"),
        Reply::text("still no"),
        Reply::text(ECHO),
    ])
    .await;
    let runtime = json_runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "add").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DegenerateResponse)
    );
    let answer = outcome.answer.unwrap();
    assert!(answer.contains("test.add (success"), "{answer}");
    assert_eq!(statuses(&outcome.records), [("test.add", "success")]);
    assert_eq!(llm.requests().len(), 5);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_repeated_call_is_detected_as_in_native_mode() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let record = r#"{"action": "tool", "tool": "test__record", "parameters": {"note": "once"}}"#;
    let llm = ScriptedLlm::start(vec![
        Reply::text(record),
        Reply::text(record),
        Reply::text(record),
        finalize("Recorded it."),
    ])
    .await;
    let runtime = json_runtime(&llm, Some(&log), "").await;
    let (events, outcome) = run(&runtime, "record once").await;

    assert_eq!(outcome.answer.as_deref(), Some("Recorded it."));
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DuplicateCalls)
    );
    assert_eq!(
        statuses(&outcome.records),
        [
            ("test.record", "success"),
            ("test.record", "skipped"),
            ("test.record", "skipped")
        ]
    );
    assert_eq!(find(&events, "duplicate_detected").len(), 2);
    assert_eq!(read_test_mcp_log(&log).len(), 1, "the server ran it once");
    let users = texts(&llm.requests()[2], "user");
    assert!(
        users[users.len() - 1].contains("Not executed again"),
        "{users:?}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn consecutive_failures_and_unknown_tools_follow_the_native_rules() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(r#"{"action": "tool", "tool": "test__delete_everything"}"#),
        Reply::text(
            r#"{"action": "tool", "tool": "test__fail", "parameters": {"message": "offline"}}"#,
        ),
        Reply::text(
            r#"{"action": "tool", "tool": "test__fail", "parameters": {"message": "still"}}"#,
        ),
        finalize("Nothing could be read."),
    ])
    .await;
    let runtime = json_runtime(&llm, None, "[agent]\nmax_consecutive_failures = 3\n").await;
    let (_, outcome) = run(&runtime, "read").await;

    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::ConsecutiveFailures)
    );
    assert_eq!(outcome.answer.as_deref(), Some("Nothing could be read."));
    let users = texts(&llm.requests()[1], "user");
    let unknown = &users[users.len() - 1];
    assert!(
        unknown.contains("unknown tool 'test__delete_everything'")
            && unknown.contains("test__echo"),
        "{unknown}"
    );
    runtime.shutdown().await;
}
