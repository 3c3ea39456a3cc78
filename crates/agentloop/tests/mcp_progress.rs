//! Progress of MCP tool calls through the whole loop: the test server's
//! `notifications/progress` become `tool_progress` events before the call's `tool_executed`,
//! and `max_duration_s` caps a call however often it reports.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{EventKind, RunStatus};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_calls_progress_reports_are_events_before_its_result() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__progress", json!({"steps": 3, "ms": 1})),
        Reply::text("done"),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "take three steps").await;
    assert_eq!(outcome.status, RunStatus::Completed);

    let reports: Vec<(f64, Option<f64>, Option<&str>)> = find(&events, "tool_progress")
        .into_iter()
        .map(|kind| match kind {
            EventKind::ToolProgress {
                tool,
                progress,
                total,
                message,
                ..
            } => {
                assert_eq!(tool, "test.progress");
                (*progress, *total, message.as_deref())
            }
            other => panic!("not a progress event: {other:?}"),
        })
        .collect();
    assert_eq!(
        reports,
        [
            (1.0, Some(3.0), Some("step 1")),
            (2.0, Some(3.0), Some("step 2")),
            (3.0, Some(3.0), Some("step 3")),
        ]
    );
    // Live, between the call's selection and its result, with the call's id.
    let kinds = types(&events);
    let selected = kinds
        .iter()
        .position(|kind| *kind == "tool_selected")
        .unwrap();
    let executed = kinds
        .iter()
        .position(|kind| *kind == "tool_executed")
        .unwrap();
    let first = kinds
        .iter()
        .position(|kind| *kind == "tool_progress")
        .unwrap();
    let last = kinds
        .iter()
        .rposition(|kind| *kind == "tool_progress")
        .unwrap();
    assert!(selected < first && last < executed, "{kinds:?}");
    let call_ids: Vec<&str> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ToolSelected { call_id, .. } | EventKind::ToolProgress { call_id, .. } => {
                Some(call_id.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(
        call_ids.windows(2).all(|pair| pair[0] == pair[1]),
        "{call_ids:?}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn max_duration_caps_a_call_that_keeps_reporting() {
    let llm = ScriptedLlm::start(vec![
        // A hundred steps of 100 ms, each well within the timeout: ten seconds in all.
        Reply::tool_call("test__progress", json!({"steps": 100, "ms": 100})),
        Reply::text("it took too long"),
    ])
    .await;
    let extra = "[tools.\"test.progress\"]\ntimeout_s = 30\nmax_duration_s = 0.5\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "take a hundred steps").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(statuses(&outcome.records), [("test.progress", "error")]);
    let error = outcome.records[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("0.5"), "{error}");
    // It did report before the cap.
    assert!(!find(&events, "tool_progress").is_empty());
    runtime.shutdown().await;
}
