//! The Chat Completions mapping, event by event.
#![allow(clippy::unwrap_used)]

use agentloop_core::protocol::{
    ErrorCode, Event, EventKind, PendingCall, RunStatus, ToolStatus, Usage,
};
use serde_json::json;

use super::*;

fn event(seq: u64, kind: EventKind) -> Event {
    Event {
        run_id: Uuid::from_u128(1),
        seq,
        parent_run_id: None,
        kind,
    }
}

fn done(status: RunStatus) -> EventKind {
    EventKind::Done {
        status,
        iterations: 2,
        tools_used: 1,
        message_id: None,
        usage: Usage {
            prompt_tokens: 30,
            completion_tokens: 12,
            ..Usage::default()
        },
        should_refresh: false,
        output: None,
    }
}

fn fold(chunks: &mut ChatChunks, kinds: Vec<EventKind>) -> Vec<Value> {
    kinds
        .into_iter()
        .enumerate()
        .flat_map(|(index, kind)| {
            chunks.push(&event(index as u64 + 1, kind), |_| "plain".to_string())
        })
        .collect()
}

fn deltas(chunks: &[Value], field: &str) -> String {
    chunks
        .iter()
        .filter_map(|chunk| chunk["choices"][0]["delta"][field].as_str())
        .collect()
}

fn steps() -> Vec<EventKind> {
    vec![
        EventKind::Thinking { iteration: 1 },
        EventKind::AssistantDelta {
            text: "let me add".into(),
        },
        EventKind::ToolSelected {
            iteration: 1,
            call_id: "c1".into(),
            tool: "math.add".into(),
            arguments: json!({"a": 1}),
        },
        EventKind::ToolExecuted {
            call_id: "c1".into(),
            tool: "math.add".into(),
            status: ToolStatus::Success,
            duration_ms: 3,
            result: Some("2".into()),
            error: None,
        },
        EventKind::FinalResponse {
            delta: "It is ".into(),
        },
        EventKind::FinalResponse { delta: "2.".into() },
        done(RunStatus::Completed),
    ]
}

#[test]
fn the_answer_is_content_and_the_steps_are_reasoning_with_the_runs_usage() {
    let mut chunks = ChatChunks::new(Uuid::from_u128(1), 7, "agentloop", true, HashSet::new());
    let out = fold(&mut chunks, steps());
    assert_eq!(out[0]["choices"][0]["delta"]["role"], "assistant");
    assert_eq!(deltas(&out, "content"), "It is 2.");
    let reasoning = deltas(&out, "reasoning_content");
    assert!(reasoning.starts_with("let me add"), "{reasoning}");
    assert!(reasoning.contains("→ math.add {\"a\":1}"), "{reasoning}");
    assert!(reasoning.contains("← math.add: 2"), "{reasoning}");
    let last = out.last().unwrap();
    assert_eq!(last["choices"][0]["finish_reason"], "stop");
    assert_eq!(last["object"], "chat.completion.chunk");
    assert!(chunks.is_finished());
    let completion = chunks.completion();
    assert_eq!(completion["id"], completion_id(Uuid::from_u128(1)));
    assert_eq!(completion["choices"][0]["message"]["content"], "It is 2.");
    assert_eq!(completion["usage"]["total_tokens"], 42);
    assert_eq!(chunks.usage_chunk()["usage"]["prompt_tokens"], 30);
}

#[test]
fn with_reasoning_off_only_the_answer_is_sent() {
    let mut chunks = ChatChunks::new(Uuid::from_u128(1), 7, "agentloop", false, HashSet::new());
    let out = fold(&mut chunks, steps());
    assert_eq!(deltas(&out, "reasoning_content"), "");
    assert_eq!(deltas(&out, "content"), "It is 2.");
    assert!(
        chunks.completion()["choices"][0]["message"]
            .get("reasoning_content")
            .is_none()
    );
}

#[test]
fn a_call_of_a_client_tool_ends_the_completion_with_tool_calls() {
    let client = HashSet::from(["pick_color".to_string()]);
    let mut chunks = ChatChunks::new(Uuid::from_u128(1), 7, "agentloop", true, client);
    let out = fold(
        &mut chunks,
        vec![
            EventKind::ToolSelected {
                iteration: 1,
                call_id: "c9".into(),
                tool: "pick_color".into(),
                arguments: json!({"from": "rgb"}),
            },
            EventKind::InputRequired {
                elicitation: None,
                kind: agentloop_core::protocol::InputKind::Approval,
                question: None,
                calls: vec![PendingCall {
                    call_id: "c9".into(),
                    tool: "pick_color".into(),
                    arguments: json!({"from": "rgb"}),
                    client: true,
                }],
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_eq!(
        deltas(&out, "reasoning_content"),
        "",
        "not a step of the server"
    );
    let calls = out
        .iter()
        .find_map(|chunk| chunk["choices"][0]["delta"]["tool_calls"].as_array())
        .unwrap();
    assert_eq!(calls[0]["id"], "c9");
    assert_eq!(calls[0]["function"]["name"], "pick_color");
    assert_eq!(calls[0]["function"]["arguments"], "{\"from\":\"rgb\"}");
    assert_eq!(
        out.last().unwrap()["choices"][0]["finish_reason"],
        "tool_calls"
    );
    let message = &chunks.completion()["choices"][0]["message"];
    assert_eq!(message["content"], Value::Null);
    assert_eq!(message["tool_calls"][0]["id"], "c9");
    assert!(message["tool_calls"][0].get("index").is_none());
}

#[test]
fn a_failed_run_keeps_its_error_and_sends_no_finish() {
    let mut chunks = ChatChunks::new(Uuid::from_u128(1), 7, "agentloop", true, HashSet::new());
    let out = fold(
        &mut chunks,
        vec![
            EventKind::Error {
                code: ErrorCode::LlmUnreachable,
                message: "detail for the operator".into(),
            },
            done(RunStatus::Failed),
        ],
    );
    assert!(
        out.iter()
            .all(|chunk| chunk["choices"][0]["finish_reason"].is_null())
    );
    let (code, message) = chunks.error().unwrap();
    assert_eq!(*code, ErrorCode::LlmUnreachable);
    assert_eq!(message, "plain");
}

#[test]
fn a_sub_agents_events_are_left_out() {
    let mut chunks = ChatChunks::new(Uuid::from_u128(1), 7, "agentloop", true, HashSet::new());
    let mut nested = event(
        1,
        EventKind::FinalResponse {
            delta: "inner".into(),
        },
    );
    nested.parent_run_id = Some(Uuid::from_u128(1));
    assert!(chunks.push(&nested, |_| String::new()).is_empty());
    assert!(!chunks.is_finished());
}
