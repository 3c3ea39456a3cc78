//! The mapping, event by event.
#![allow(clippy::unwrap_used)]

use agentloop_core::protocol::{
    ErrorCode, Event, EventKind, FinalizeReason, InputKind, PendingCall, Plan, RunStatus,
    ToolStatus, Usage,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::UiMessageStream;
use crate::request_id::{self, RequestScope};

/// A stream made while answering the request `req-9`.
fn stream_of_request() -> UiMessageStream {
    let scope = RequestScope {
        id: "req-9".into(),
        expose_details: false,
    };
    request_id::within(scope, UiMessageStream::new)
}

fn run_id() -> Uuid {
    Uuid::from_u128(1)
}

fn event(seq: u64, kind: EventKind) -> Event {
    Event {
        run_id: run_id(),
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
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Usage::default()
        },
        should_refresh: false,
        output: None,
    }
}

/// The parts of `kinds`, one event each, seq from 1.
fn parts(stream: &mut UiMessageStream, kinds: Vec<EventKind>) -> Vec<Value> {
    kinds
        .into_iter()
        .enumerate()
        .flat_map(|(i, kind)| stream.push(&event(i as u64 + 1, kind)))
        .collect()
}

fn types(parts: &[Value]) -> Vec<&str> {
    parts
        .iter()
        .map(|part| part["type"].as_str().unwrap())
        .collect()
}

#[test]
fn a_chained_run_is_steps_tool_parts_and_the_answer_as_text() {
    let session = Uuid::from_u128(2);
    let mut stream = UiMessageStream::new();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::RunStarted {
                session_id: session,
            },
            EventKind::Thinking { iteration: 1 },
            EventKind::AssistantDelta {
                text: "Let me look.".into(),
            },
            EventKind::ToolSelected {
                iteration: 1,
                call_id: "c1".into(),
                tool: "test__echo".into(),
                arguments: json!({"text": "hi"}),
            },
            EventKind::ToolExecuted {
                call_id: "c1".into(),
                tool: "test__echo".into(),
                status: ToolStatus::Success,
                duration_ms: 3,
                result: Some("{\"echo\":\"hi\"}".into()),
                error: None,
            },
            EventKind::Thinking { iteration: 2 },
            EventKind::AssistantDelta {
                text: "Done".into(),
            },
            EventKind::FinalResponse { delta: "Do".into() },
            EventKind::FinalResponse { delta: "ne".into() },
            done(RunStatus::Completed),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-end",
            "tool-input-start",
            "tool-input-available",
            "tool-output-available",
            "finish-step",
            "start-step",
            "reasoning-start",
            "reasoning-delta",
            "reasoning-end",
            "text-start",
            "text-delta",
            "text-delta",
            "text-end",
            "finish-step",
            "data-usage",
            "finish",
        ]
    );
    assert_eq!(parts[0]["messageId"], run_id().to_string());
    assert_eq!(
        parts[0]["messageMetadata"]["sessionId"],
        session.to_string()
    );
    assert_eq!(parts[6]["input"], json!({"text": "hi"}));
    assert_eq!(parts[6]["toolName"], "test__echo");
    assert_eq!(parts[7]["output"], json!({"echo": "hi"}));
    assert_eq!(parts[7]["toolCallId"], "c1");
    assert_eq!(parts[14]["id"], parts[13]["id"]);
    assert_eq!(parts[16]["id"], parts[13]["id"]);
    assert_eq!(parts[18]["data"]["usage"]["prompt_tokens"], 10);
    assert_eq!(parts[19]["finishReason"], "stop");
    assert!(stream.is_finished());
}

#[test]
fn a_failed_tool_is_an_output_error_and_a_plain_text_result_stays_text() {
    // Continuing a message that has the calls already.
    let mut stream = UiMessageStream::with_denied(Vec::new());
    let parts = parts(
        &mut stream,
        vec![
            EventKind::ToolExecuted {
                call_id: "c1".into(),
                tool: "t".into(),
                status: ToolStatus::Error,
                duration_ms: 1,
                result: None,
                error: Some("boom".into()),
            },
            EventKind::ToolExecuted {
                call_id: "c2".into(),
                tool: "t".into(),
                status: ToolStatus::Success,
                duration_ms: 1,
                result: Some("plain words".into()),
                error: None,
            },
            EventKind::ToolExecuted {
                call_id: "c3".into(),
                tool: "t".into(),
                status: ToolStatus::Blocked,
                duration_ms: 0,
                result: None,
                error: None,
            },
        ],
    );
    assert_eq!(
        parts[1],
        json!({"type": "tool-output-error", "toolCallId": "c1", "errorText": "boom", "dynamic": true, "providerExecuted": true})
    );
    assert_eq!(parts[2]["output"], "plain words");
    assert_eq!(parts[3]["errorText"], "blocked");
}

#[test]
fn the_ask_user_call_is_no_tool_part_and_a_call_from_before_is_announced() {
    let mut stream = UiMessageStream::new();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::ToolSelected {
                iteration: 1,
                call_id: "q".into(),
                tool: "ask_user".into(),
                arguments: json!({"question": "Which?"}),
            },
            EventKind::ToolExecuted {
                call_id: "q".into(),
                tool: "ask_user".into(),
                status: ToolStatus::Success,
                duration_ms: 0,
                result: Some("X".into()),
                error: None,
            },
            // A call the run made before this message began (a clarification was answered).
            EventKind::ToolExecuted {
                call_id: "c1".into(),
                tool: "t".into(),
                status: ToolStatus::Success,
                duration_ms: 0,
                result: Some("ok".into()),
                error: None,
            },
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-output-available"
        ]
    );
    assert_eq!(parts[2]["toolCallId"], "c1");
    assert_eq!(parts[2]["providerExecuted"], true);
}

#[test]
fn a_failed_run_sends_an_error_then_finishes_with_error() {
    let mut stream = stream_of_request();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::Error {
                code: ErrorCode::LlmUnreachable,
                message: "no route".into(),
            },
            done(RunStatus::Failed),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "start-step",
            "error",
            "finish-step",
            "data-usage",
            "finish"
        ]
    );
    // The code, the plain sentence and the request's id: the detail is the operator's.
    assert_eq!(
        parts[2]["errorText"],
        format!(
            "llm_unreachable: {} (request id req-9)",
            ErrorCode::LlmUnreachable.user_message()
        )
    );
    assert_eq!(parts[5]["finishReason"], "error");
}

#[test]
fn a_cancelled_run_finishes_with_other_and_its_status() {
    let mut stream = UiMessageStream::new();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::FinalResponse {
                delta: "Cancelled.".into(),
            },
            done(RunStatus::Cancelled),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "text-start",
            "text-delta",
            "text-end",
            "data-usage",
            "finish"
        ]
    );
    assert_eq!(parts[5]["finishReason"], "other");
    assert_eq!(parts[5]["messageMetadata"]["status"], "cancelled");
}

#[test]
fn an_approval_is_a_tool_approval_request_per_call_and_the_message_ends() {
    let mut stream = UiMessageStream::new();
    let call = PendingCall {
        call_id: "c9".into(),
        tool: "test__record".into(),
        arguments: json!({"note": "x"}),
        client: false,
    };
    let parts = parts(
        &mut stream,
        vec![
            EventKind::ToolSelected {
                iteration: 1,
                call_id: "c9".into(),
                tool: "test__record".into(),
                arguments: json!({"note": "x"}),
            },
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Approval,
                question: None,
                calls: vec![call],
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "tool-input-start",
            "tool-input-available",
            "tool-approval-request",
            "data-input-required",
            "data-usage",
            "finish"
        ]
    );
    assert_eq!(
        parts[3],
        json!({"type": "tool-approval-request", "approvalId": "c9", "toolCallId": "c9"})
    );
    assert_eq!(parts[6]["finishReason"], "tool-calls");
}

#[test]
fn a_denied_call_is_output_denied_when_the_run_goes_on() {
    let mut stream = UiMessageStream::with_denied(["c9".to_string()]);
    let parts = parts(
        &mut stream,
        vec![EventKind::ToolExecuted {
            call_id: "c9".into(),
            tool: "test__record".into(),
            status: ToolStatus::Error,
            duration_ms: 0,
            result: None,
            error: Some("denied by the user".into()),
        }],
    );
    assert_eq!(
        parts[1],
        json!({"type": "tool-output-denied", "toolCallId": "c9"})
    );
}

#[test]
fn a_clarification_question_is_the_assistants_text() {
    let mut stream = UiMessageStream::new();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Clarification,
                question: Some("Which project?".into()),
                calls: Vec::new(),
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "text-start",
            "text-delta",
            "text-end",
            "data-input-required",
            "data-usage",
            "finish"
        ]
    );
    assert_eq!(parts[2]["delta"], "Which project?");
    assert_eq!(parts[6]["finishReason"], "stop");
}

#[test]
fn agentloops_own_events_are_data_parts() {
    let plan: Plan = serde_json::from_value(json!({
        "goal": "g", "sub_tasks": [{"id": "1", "description": "d"}]
    }))
    .unwrap();
    let mut stream = UiMessageStream::new();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::PlanUpdated { plan },
            EventKind::SideEffect {
                call_id: "c".into(),
                tool: "t".into(),
                note: "wrote".into(),
            },
            EventKind::DuplicateDetected {
                call_id: "c".into(),
                tool: "t".into(),
                arguments: json!({}),
            },
            EventKind::ForcedFinalize {
                reason: FinalizeReason::MaxIterations,
            },
            EventKind::UserMessage {
                text: "also this".into(),
            },
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "data-plan",
            "data-side-effect",
            "data-duplicate",
            "data-forced-finalize",
            "data-user-message"
        ]
    );
    assert_eq!(parts[1]["id"], "plan");
    assert_eq!(parts[1]["data"]["goal"], "g");
    assert_eq!(parts[2]["data"]["note"], "wrote");
    assert_eq!(parts[4]["data"]["reason"], "max_iterations");
    assert_eq!(parts[5]["data"]["text"], "also this");
}

#[test]
fn a_sub_agents_events_are_data_parts_and_its_done_ends_nothing() {
    let sub = Uuid::from_u128(7);
    let mut stream = stream_of_request();
    let mut all = stream.push(&event(1, EventKind::Thinking { iteration: 1 }));
    for (seq, kind) in [
        (
            2,
            EventKind::FinalResponse {
                delta: "sub answer".into(),
            },
        ),
        (
            3,
            EventKind::Error {
                code: ErrorCode::LlmTimeout,
                message: "the LLM at http://10.0.0.5/v1 did not answer".into(),
            },
        ),
        (4, done(RunStatus::Completed)),
    ] {
        all.extend(stream.push(&Event {
            run_id: sub,
            seq,
            parent_run_id: Some(run_id()),
            kind,
        }));
    }
    assert_eq!(
        types(&all),
        [
            "start",
            "start-step",
            "data-subagent",
            "data-subagent",
            "data-subagent"
        ]
    );
    assert_eq!(all[2]["id"], sub.to_string());
    assert_eq!(all[2]["data"]["delta"], "sub answer");
    assert_eq!(
        all[3]["data"]["message"],
        ErrorCode::LlmTimeout.user_message()
    );
    assert_eq!(all[3]["data"]["request_id"], "req-9");
    assert_eq!(all[4]["data"]["type"], "done");
    assert!(!stream.is_finished());
    assert_eq!(all[0]["messageId"], run_id().to_string());
}

#[test]
fn nothing_follows_finish() {
    let mut stream = UiMessageStream::new();
    stream.push(&event(1, done(RunStatus::Completed)));
    assert!(
        stream
            .push(&event(2, EventKind::FinalResponse { delta: "x".into() }))
            .is_empty()
    );
}

#[test]
fn a_blocked_run_sends_the_guardrail_parts_an_error_naming_it_and_finishes_content_filter() {
    use agentloop_core::protocol::{GuardrailAction, GuardrailSide};
    let mut stream = stream_of_request();
    let parts = parts(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::GuardrailChecked {
                name: "no-secrets".into(),
                on: GuardrailSide::Output,
                allowed: false,
                duration_ms: 1,
                error: None,
            },
            EventKind::GuardrailTripped {
                name: "no-secrets".into(),
                on: GuardrailSide::Output,
                reason: "a password".into(),
                action: GuardrailAction::Block,
            },
            EventKind::AnswerRetracted {
                name: "no-secrets".into(),
            },
            EventKind::Error {
                code: ErrorCode::Blocked,
                message: "The answer was blocked by the guardrail `no-secrets`: a password".into(),
            },
            done(RunStatus::Blocked),
        ],
    );
    assert_eq!(
        types(&parts),
        [
            "start",
            "start-step",
            "data-guardrail-checked",
            "data-guardrail-tripped",
            "data-answer-retracted",
            "error",
            "finish-step",
            "data-usage",
            "finish"
        ]
    );
    // A guardrail's refusal is for the user: its message is shown as it is.
    assert!(
        parts[5]["errorText"]
            .as_str()
            .unwrap()
            .starts_with("blocked: The answer was blocked by the guardrail `no-secrets`"),
        "{}",
        parts[5]
    );
    assert_eq!(parts.last().unwrap()["finishReason"], "content-filter");
}

#[test]
fn a_calls_progress_is_one_data_part_per_call_replaced_by_each_report() {
    let mut stream = UiMessageStream::new();
    let report = |progress: f64| EventKind::ToolProgress {
        call_id: "c1".into(),
        tool: "test.progress".into(),
        progress,
        total: Some(2.0),
        message: Some(format!("step {progress}")),
    };
    let parts = parts(&mut stream, vec![report(1.0), report(2.0)]);
    // After the message's `start`.
    assert_eq!(
        parts[1..],
        [1.0, 2.0].map(|progress| json!({
            "type": "data-tool-progress",
            // The same id: the client keeps the latest.
            "id": "c1",
            "data": {
                "callId": "c1",
                "tool": "test.progress",
                "progress": progress,
                "total": 2.0,
                "message": format!("step {progress}"),
            },
        }))
    );
}

#[test]
fn a_typed_answer_streams_as_one_data_output_part_completed_by_the_runs_value() {
    let mut stream = UiMessageStream::new();
    let value = json!({"title": "Checkout is down", "priority": 1});
    let mut end = done(RunStatus::Completed);
    if let EventKind::Done { output, .. } = &mut end {
        *output = Some(value.clone());
    }
    let parts = parts(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::OutputDelta {
                partial: json!({"title": "Checkout"}),
            },
            end,
        ],
    );
    let outputs: Vec<&Value> = parts
        .iter()
        .filter(|part| part["type"] == "data-output")
        .collect();
    assert_eq!(
        outputs,
        [
            &json!({"type": "data-output", "id": "output",
                    "data": {"value": {"title": "Checkout"}, "complete": false}}),
            &json!({"type": "data-output", "id": "output",
                    "data": {"value": value, "complete": true}}),
        ]
    );
    assert_eq!(parts.last().unwrap()["type"], "finish");
}

fn a_question() -> EventKind {
    EventKind::InputRequired {
        kind: InputKind::Elicitation,
        question: Some("Who for?".into()),
        calls: Vec::new(),
        elicitation: Some(Box::new(agentloop_core::protocol::Elicitation {
            id: "c9/1".into(),
            call_id: "c9".into(),
            tool: "py.book".into(),
            server: "py".into(),
            mode: agentloop_core::protocol::ElicitationMode::Form,
            message: "Who for?".into(),
            requested_schema: Some(json!({"type": "object", "properties": {}})),
            url: None,
            purpose: agentloop_core::protocol::ElicitationPurpose::Question,
        })),
    }
}

#[test]
fn a_running_calls_question_is_a_data_part_and_the_run_goes_on() {
    let mut stream = UiMessageStream::new();
    let parts = parts(&mut stream, vec![a_question(), done(RunStatus::Completed)]);
    assert_eq!(
        types(&parts),
        ["start", "data-input-required", "data-usage", "finish"]
    );
    assert_eq!(parts[1]["data"]["kind"], "elicitation");
    assert_eq!(parts[1]["data"]["elicitation"]["id"], "c9/1");
    assert_eq!(parts[1]["data"]["runId"], run_id().to_string());
    assert_eq!(parts[3]["finishReason"], "stop");
}
