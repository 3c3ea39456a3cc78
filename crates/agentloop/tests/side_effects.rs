//! Side effects and hooks through the real loop: a webhook runs once per successful call, its
//! note reaches the model and the client, a failing one never fails the run; Rust hooks rewrite
//! or skip calls before they run (the test MCP server's log proves what ran).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::Arc;

use agentloop::{EventKind, RunContext, RunRequest, RunStatus, Runtime, ToolStatus};
use agentloop_test_support::{
    mcp::read_test_mcp_log,
    scripted_llm::{Reply, ScriptedLlm},
    webhook::RecordingWebhook,
};
use async_trait::async_trait;
use common::*;
use serde_json::{Value, json};

#[tokio::test]
async fn a_webhook_runs_once_per_successful_call_and_its_note_reaches_model_and_client() {
    let webhook = RecordingWebhook::start(|_| {
        (
            200,
            json!({"note": "Quote totals recomputed", "refresh": true}),
        )
    })
    .await;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "add a line"})),
        Reply::tool_call("test__record", json!({"note": "add a line"})),
        Reply::tool_call("test__fail", json!({"message": "no"})),
        Reply::text("Added the line; totals are up to date."),
    ])
    .await;
    let extra = format!(
        "[tools.\"test.record\"]\nside_effect_webhook = \"{url}\"\n[tools.\"test.fail\"]\nside_effect_webhook = \"{url}\"\n",
        url = webhook.url()
    );
    let runtime = runtime(&llm, None, &extra).await;
    let request = RunRequest::new("Add a line").context(RunContext {
        user_id: Some("ann".into()),
        entity_id: Some("project-7".into()),
        ..RunContext::default()
    });
    let (events, outcome) = runtime.agent().run(request).collect().await.unwrap();

    assert_eq!(outcome.status, RunStatus::Completed);
    let received = webhook.received();
    assert_eq!(
        received.len(),
        1,
        "once: the repeat did not run, the failed call had none"
    );
    let body = &received[0];
    assert_eq!(body["tool"], "test.record");
    assert_eq!(body["input"], json!({"note": "add a line"}));
    assert_eq!(body["result"], "recorded");
    assert_eq!(body["context"]["entity_id"], "project-7");
    assert_eq!(body["context"]["user_id"], "ann");
    assert_eq!(body["context"]["run_id"], json!(outcome.run_id));

    let side_effects: Vec<&EventKind> = find(&events, "side_effect");
    assert_eq!(side_effects.len(), 1);
    assert!(
        matches!(side_effects[0], EventKind::SideEffect { tool, note, .. }
        if tool == "test.record" && note == "Quote totals recomputed")
    );
    assert!(matches!(
        events.last().unwrap().kind,
        EventKind::Done {
            should_refresh: true,
            ..
        }
    ));
    assert!(outcome.should_refresh);
    let next = &llm.requests()[1];
    let notes: Vec<&str> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        notes.contains(&"[Side Effect] Quote totals recomputed"),
        "{notes:?}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failing_webhook_is_a_note_and_never_fails_the_run() {
    let webhook = RecordingWebhook::start(|_| (500, json!({"error": "database locked"}))).await;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "x"})),
        Reply::text("Recorded, but the totals may be stale."),
    ])
    .await;
    let extra = format!(
        "[tools.\"test.record\"]\nside_effect_webhook = \"{}\"\n",
        webhook.url()
    );
    let runtime = runtime(&llm, None, &extra).await;
    let (events, outcome) = run(&runtime, "record").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.records[0].status,
        ToolStatus::Success,
        "the call itself succeeded"
    );
    assert!(!outcome.should_refresh);
    let note = match find(&events, "side_effect")[0] {
        EventKind::SideEffect { note, .. } => note.clone(),
        _ => unreachable!(),
    };
    assert!(
        note.starts_with("[Side Effect Error]") && note.contains("500"),
        "{note}"
    );
    assert!(note.contains("database locked"), "{note}");
    let stored = runtime.store().clone();
    let messages = agentloop::Store::messages(stored.as_ref(), outcome.session_id)
        .await
        .unwrap();
    assert!(
        messages.iter().any(|m| m.message.text_content() == note),
        "kept in the session"
    );
    runtime.shutdown().await;
}

/// Upper-cases what `test.echo` echoes and refuses `test.record` notes that say "forbidden".
struct Guard;

#[async_trait]
impl agentloop::core::ToolHook for Guard {
    async fn before_call(
        &self,
        tool: &str,
        arguments: &mut Value,
        _context: &agentloop::ToolContext,
    ) -> agentloop::core::BeforeCall {
        match tool {
            "test.echo" => {
                let text = arguments["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_uppercase();
                arguments["text"] = json!(text);
                agentloop::core::BeforeCall::Proceed
            }
            "test.record"
                if arguments["note"]
                    .as_str()
                    .is_some_and(|n| n.contains("forbidden")) =>
            {
                agentloop::core::BeforeCall::Skip {
                    reason: "notes may not say forbidden".into(),
                }
            }
            _ => agentloop::core::BeforeCall::Proceed,
        }
    }
}

#[tokio::test]
async fn a_rust_hook_rewrites_arguments_or_skips_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__echo", json!({"text": "quiet"})),
            ("test__record", json!({"note": "forbidden words"})),
        ]),
        Reply::text("done"),
    ])
    .await;
    let config = config(&llm, Some(&log), "");
    let runtime = Runtime::start_with(&config, |agent| agent.hook(Arc::new(Guard)))
        .await
        .unwrap();
    let (_, outcome) = run(&runtime, "echo and record").await;
    assert_eq!(outcome.records[0].result.as_deref(), Some("QUIET"));
    assert_eq!(
        outcome.records[0].arguments,
        json!({"text": "QUIET"}),
        "the record shows what ran"
    );
    assert_eq!(outcome.records[1].status, ToolStatus::Skipped);
    assert_eq!(
        outcome.records[1].error.as_deref(),
        Some("notes may not say forbidden")
    );
    let executed: Vec<String> = read_test_mcp_log(&log)
        .iter()
        .map(|line| line["tool"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        executed,
        ["echo"],
        "the skipped record never reached the server"
    );
    runtime.shutdown().await;
}
