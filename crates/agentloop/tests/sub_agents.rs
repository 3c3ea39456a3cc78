//! Sub-agents: `[agents.NAME]` is offered as the tool `agent.NAME`; its run uses its own prompt,
//! model, tools and limits, its events appear nested in the caller's stream (and store), its
//! answer is the tool's result and its tokens count toward the caller's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use agentloop::{
    EventKind, RunOutcome, RunStatus, Runtime, Store, ToolStatus,
    core::{LlmCallReport, Telemetry},
};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::*;
use serde_json::json;

const RESEARCHER: &str = r#"
[agents.researcher]
description = "Finds facts with the echo tool."
system_prompt = "You are the researcher."
tools = ["test.echo"]
model = "research-model"
max_iterations = 3
"#;

/// Counts what the runs report.
#[derive(Default)]
struct Counts {
    llm_calls: AtomicUsize,
    runs_finished: AtomicUsize,
}

impl Telemetry for Counts {
    fn llm_call(&self, _report: &LlmCallReport) {
        self.llm_calls.fetch_add(1, Ordering::SeqCst);
    }

    fn run_finished(&self, _outcome: &RunOutcome) {
        self.runs_finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn a_sub_agent_call_nests_its_events_and_answers_as_the_tool_result() {
    let llm = ScriptedLlm::start(vec![
        // The main agent hands the task over.
        Reply::tool_call("agent__researcher", json!({"task": "Find X"})).with_usage(10, 1),
        // The researcher works with its own tool, then answers.
        Reply::tool_call("test__echo", json!({"text": "X is 42"})).with_usage(100, 10),
        Reply::text("X is 42.").with_usage(100, 10),
        // The main agent answers with what it got.
        Reply::text("The researcher says X is 42.").with_usage(10, 1),
    ])
    .await;
    let counts = Arc::new(Counts::default());
    let telemetry = counts.clone();
    let runtime = Runtime::start_with(&config(&llm, None, RESEARCHER), |agent| {
        agent.telemetry(telemetry)
    })
    .await
    .unwrap();
    let (events, outcome) = run(&runtime, "What is X?").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The researcher says X is 42.")
    );
    assert_eq!(
        outcome.usage.prompt_tokens, 220,
        "the sub-agent's tokens count"
    );
    assert_eq!(outcome.usage.completion_tokens, 22);
    // Every LLM call is reported once; the sub-agent's end is not a run of its own.
    assert_eq!(counts.llm_calls.load(Ordering::SeqCst), 4);
    assert_eq!(counts.runs_finished.load(Ordering::SeqCst), 1);
    assert_eq!(
        statuses(&outcome.records),
        [("agent.researcher", "success")]
    );
    assert_eq!(outcome.records[0].result.as_deref(), Some("X is 42."));
    let summary = outcome.records[0].structured_result.as_ref().unwrap();
    assert_eq!(summary["agent"], "researcher");
    assert_eq!(summary["tools_used"], 1);

    // One stream, numbered without gaps; the nested events carry the sub-agent's run id and
    // name the caller as their parent.
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    let parent = outcome.run_id;
    let nested: Vec<_> = events
        .iter()
        .filter(|event| event.parent_run_id == Some(parent))
        .collect();
    let child = nested[0].run_id;
    assert_ne!(child, parent);
    assert!(nested.iter().all(|event| event.run_id == child));
    let nested_types: Vec<&str> = nested
        .iter()
        .map(|event| event.kind.type_name())
        .filter(|kind| *kind != "assistant_delta")
        .collect();
    assert_eq!(
        nested_types,
        [
            "run_started",
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
    assert!(
        events
            .iter()
            .filter(|event| event.parent_run_id.is_none())
            .all(|event| event.run_id == parent)
    );
    // Nested between the caller's selection of the agent and its result.
    let position = |wanted: &dyn Fn(&EventKind) -> bool| {
        events
            .iter()
            .position(|event| event.run_id == parent && wanted(&event.kind))
            .unwrap()
    };
    let selected = position(
        &|kind| matches!(kind, EventKind::ToolSelected { tool, .. } if tool == "agent.researcher"),
    );
    let executed = position(&|kind| {
        matches!(kind, EventKind::ToolExecuted { tool, status: ToolStatus::Success, result: Some(result), .. }
            if tool == "agent.researcher" && result == "X is 42.")
    });
    let first_nested = events
        .iter()
        .position(|event| event.run_id == child)
        .unwrap();
    let last_nested = events
        .iter()
        .rposition(|event| event.run_id == child)
        .unwrap();
    assert!(selected < first_nested && last_nested < executed);

    // The researcher ran with its own prompt, model and tools, on the task alone.
    let requests = llm.requests();
    let research = &requests[1];
    assert_eq!(research["model"], "research-model");
    assert_eq!(
        research["messages"][0]["content"],
        "You are the researcher."
    );
    assert_eq!(research["messages"][1]["content"], "Find X");
    assert_eq!(research["messages"].as_array().unwrap().len(), 2);
    assert_eq!(offered(research), ["test__echo"]);
    // The main agent was offered the researcher, and read its answer as the tool result.
    assert!(offered(&requests[0]).contains(&"agent__researcher".to_string()));
    assert_eq!(requests[0]["model"], "scripted");
    let results = tool_messages(&requests[3]);
    assert_eq!(results.len(), 1);
    assert_eq!(results[0].1, "X is 42.");

    // The store keeps the nested events in the caller's log.
    let stored = runtime.store().events(parent, 0).await.unwrap();
    assert_eq!(stored.len(), events.len());
    assert_eq!(
        stored
            .iter()
            .filter(|event| event.parent_run_id == Some(parent))
            .count(),
        nested.len()
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failing_sub_agent_is_a_tool_error_the_caller_can_work_with() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("agent__researcher", json!({"task": "Find Y"})),
        // The researcher tries a tool outside its allowlist (refused), then its LLM call is
        // rejected: the sub-agent run fails.
        Reply::tool_call("test__add", json!({"a": 1, "b": 2})),
        Reply::error(400, "the model cannot go on"),
        Reply::text("I could not find Y."),
    ])
    .await;
    let runtime = runtime(&llm, None, RESEARCHER).await;
    let (events, outcome) = run(&runtime, "What is Y?").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I could not find Y."));
    let nested_blocked = events.iter().any(|event| {
        event.parent_run_id.is_some()
            && matches!(&event.kind, EventKind::ToolExecuted { tool, status: ToolStatus::Blocked, error: Some(error), .. }
                if tool == "test.add" && error.contains("not one of the tools of the researcher agent"))
    });
    assert!(nested_blocked, "{events:#?}");
    assert_eq!(statuses(&outcome.records), [("agent.researcher", "error")]);
    let error = outcome.records[0].error.as_deref().unwrap();
    assert!(error.contains("the researcher agent failed"), "{error}");
    assert!(error.contains("the model cannot go on"), "{error}");
    runtime.shutdown().await;
}
