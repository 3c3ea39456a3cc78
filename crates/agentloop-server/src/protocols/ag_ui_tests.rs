//! The mapping, event by event.
#![allow(clippy::unwrap_used)]

use agentloop_core::protocol::{
    ErrorCode, Event, EventKind, FinalizeReason, InputKind, LlmCallPurpose, PendingCall, Plan,
    ResumeReason, RunStatus, ToolStatus, Usage,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{APPROVAL_REASON, AgUiStream, QUESTION_REASON, tool_call_id};
use crate::request_id::RequestScope;

fn call(id: &str) -> String {
    tool_call_id(run_id(), id)
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

fn stream() -> AgUiStream {
    AgUiStream::new("thread-1", "run-a", json!({"theme": "dark"}))
}

/// The AG-UI events of `kinds`, one agentloop event each, seq from 1.
fn events(stream: &mut AgUiStream, kinds: Vec<EventKind>) -> Vec<Value> {
    kinds
        .into_iter()
        .enumerate()
        .flat_map(|(i, kind)| stream.push(&event(i as u64 + 1, kind)))
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect()
}

fn selected(call_id: &str, tool: &str, arguments: Value) -> EventKind {
    EventKind::ToolSelected {
        iteration: 1,
        call_id: call_id.into(),
        tool: tool.into(),
        arguments,
    }
}

fn executed(
    call_id: &str,
    status: ToolStatus,
    result: Option<&str>,
    error: Option<&str>,
) -> EventKind {
    EventKind::ToolExecuted {
        call_id: call_id.into(),
        tool: "test__echo".into(),
        status,
        duration_ms: 3,
        result: result.map(str::to_string),
        error: error.map(str::to_string),
    }
}

/// What `HttpAgent` checks of a sequence (`verifyEvents`): first `RUN_STARTED`; text messages,
/// tool calls and steps opened before they are written to and closed, none open at
/// `RUN_FINISHED`; nothing after the last event.
fn assert_valid_sequence(events: &[Value]) {
    use std::collections::HashSet;
    assert_eq!(events[0]["type"], "RUN_STARTED");
    let (mut texts, mut calls, mut steps) = (HashSet::new(), HashSet::new(), HashSet::new());
    for (i, event) in events.iter().enumerate() {
        let kind = event["type"].as_str().unwrap();
        let message = event["messageId"].as_str().unwrap_or_default().to_string();
        let call = event["toolCallId"].as_str().unwrap_or_default().to_string();
        let step = event["stepName"].as_str().unwrap_or_default().to_string();
        match kind {
            "TEXT_MESSAGE_START" => assert!(texts.insert(message), "{event}"),
            "TEXT_MESSAGE_CONTENT" => {
                assert!(texts.contains(&message), "{event}");
                assert!(!event["delta"].as_str().unwrap().is_empty());
            }
            "TEXT_MESSAGE_END" => assert!(texts.remove(&message), "{event}"),
            "TOOL_CALL_START" => assert!(calls.insert(call), "{event}"),
            "TOOL_CALL_ARGS" => assert!(calls.contains(&call), "{event}"),
            "TOOL_CALL_END" => assert!(calls.remove(&call), "{event}"),
            "STEP_STARTED" => assert!(steps.insert(step), "{event}"),
            "STEP_FINISHED" => assert!(steps.remove(&step), "{event}"),
            "RUN_FINISHED" => {
                assert!(texts.is_empty() && calls.is_empty() && steps.is_empty());
                assert_eq!(i, events.len() - 1, "RUN_FINISHED is last");
            }
            "RUN_ERROR" => assert_eq!(i, events.len() - 1, "RUN_ERROR is last"),
            _ => {}
        }
    }
}

#[test]
fn a_chained_run_is_steps_text_tool_calls_results_and_the_answer() {
    let session = Uuid::from_u128(2);
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::RunStarted {
                session_id: session,
            },
            EventKind::Thinking { iteration: 1 },
            EventKind::AssistantDelta {
                text: "Let me look.".into(),
            },
            selected("c1", "test__echo", json!({"text": "hi"})),
            executed("c1", ToolStatus::Success, Some("{\"echo\":\"hi\"}"), None),
            EventKind::Thinking { iteration: 2 },
            EventKind::AssistantDelta { text: "Do".into() },
            EventKind::AssistantDelta { text: "ne".into() },
            EventKind::FinalResponse {
                delta: "Done".into(),
            },
            done(RunStatus::Completed),
        ],
    );
    assert_eq!(
        types(&events),
        [
            "RUN_STARTED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "TOOL_CALL_START",
            "TOOL_CALL_ARGS",
            "TOOL_CALL_END",
            "TOOL_CALL_RESULT",
            "STEP_FINISHED",
            "STEP_STARTED",
            "TEXT_MESSAGE_START",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_CONTENT",
            "TEXT_MESSAGE_END",
            "STEP_FINISHED",
            "CUSTOM",
            "RUN_FINISHED",
        ]
    );
    assert_valid_sequence(&events);
    assert_eq!(events[0]["threadId"], "thread-1");
    assert_eq!(events[0]["runId"], "run-a");
    assert_eq!(
        events[0]["metadata"]["agentloop"]["sessionId"],
        session.to_string()
    );
    assert_eq!(events[1]["stepName"], "iteration 1");
    // The text beside the call and the call are one assistant message.
    assert_eq!(events[5]["parentMessageId"], events[2]["messageId"]);
    assert_eq!(events[5]["toolCallName"], "test__echo");
    assert_eq!(events[6]["delta"], "{\"text\":\"hi\"}");
    assert_eq!(events[8]["toolCallId"], call("c1"));
    assert_eq!(events[5]["toolCallId"], call("c1"));
    assert_eq!(call("c1"), format!("{}:c1", run_id()));
    assert_eq!(events[8]["content"], "{\"echo\":\"hi\"}");
    assert_eq!(events[8]["role"], "tool");
    assert_eq!(events[8]["metadata"]["agentloop"]["status"], "success");
    // The answer was streamed; final_response repeats it and adds nothing.
    assert_ne!(events[11]["messageId"], events[2]["messageId"]);
    assert_eq!(events[12]["delta"], "Do");
    assert_eq!(events[16]["name"], "agentloop.usage");
    assert_eq!(events[16]["value"]["usage"]["prompt_tokens"], 10);
    let finished = &events[17];
    assert_eq!(finished["outcome"], json!({"type": "success"}));
    assert_eq!(finished["runId"], "run-a");
    assert_eq!(finished["usage"][0]["inputTokens"], 10);
    assert_eq!(finished["usage"][0]["totalTokens"], 15);
    assert!(stream.is_finished());
}

#[test]
fn an_answer_that_was_not_streamed_is_its_own_message() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            selected("c1", "test__echo", json!({})),
            executed("c1", ToolStatus::Success, Some("x"), None),
            EventKind::ForcedFinalize {
                reason: FinalizeReason::MaxIterations,
            },
            EventKind::FinalResponse {
                delta: "Sum".into(),
            },
            EventKind::FinalResponse {
                delta: "mary".into(),
            },
            done(RunStatus::Completed),
        ],
    );
    assert_valid_sequence(&events);
    let texts: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .collect();
    assert_eq!(texts.len(), 2);
    assert_eq!(texts[0]["delta"], "Sum");
    assert_eq!(texts[1]["delta"], "mary");
    assert_eq!(texts[0]["messageId"], texts[1]["messageId"]);
    let forced = events
        .iter()
        .find(|event| event["name"] == "agentloop.forced_finalize")
        .unwrap();
    assert_eq!(forced["value"]["reason"], "max_iterations");
    // Without a tool call before it, the call's message is the reply's own.
    let start = events
        .iter()
        .find(|event| event["type"] == "TOOL_CALL_START")
        .unwrap();
    assert_eq!(
        start["parentMessageId"],
        format!("{}-1", run_id()),
        "the reply's id comes from its thinking event"
    );
}

#[test]
fn a_failed_call_gives_its_error_as_the_result() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            selected("c1", "test__echo", json!({})),
            executed("c1", ToolStatus::Blocked, None, Some("the user denied it")),
        ],
    );
    let result = events.last().unwrap();
    assert_eq!(result["type"], "TOOL_CALL_RESULT");
    assert_eq!(result["content"], "the user denied it");
    assert_eq!(result["metadata"]["agentloop"]["status"], "blocked");
}

/// A stream made while answering the request `req-9`.
fn stream_of_request() -> AgUiStream {
    let scope = RequestScope {
        id: "req-9".into(),
        expose_details: false,
    };
    crate::request_id::within(scope, stream)
}

#[test]
fn a_failed_run_ends_with_run_error_and_nothing_after() {
    let mut stream = stream_of_request();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::AssistantDelta {
                text: "Half".into(),
            },
            EventKind::Error {
                code: ErrorCode::LlmUnreachable,
                message: "the provider is down".into(),
            },
            done(RunStatus::Failed),
        ],
    );
    assert_valid_sequence(&events);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "llm_unreachable");
    // The plain sentence and the request's id: the detail is the operator's (the log's).
    assert_eq!(
        last["message"],
        format!(
            "{} (request id req-9)",
            ErrorCode::LlmUnreachable.user_message()
        )
    );
    assert!(stream.is_finished());
    assert!(
        stream
            .push(&event(9, EventKind::FinalResponse { delta: "x".into() }))
            .is_empty()
    );
}

#[test]
fn a_cancelled_run_finishes_cancelled() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::FinalResponse {
                delta: "The run was cancelled.".into(),
            },
            done(RunStatus::Cancelled),
        ],
    );
    assert_valid_sequence(&events);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["outcome"], json!({"type": "cancelled"}));
    assert_eq!(last["result"]["status"], "cancelled");
}

fn pending(call_id: &str, tool: &str, client: bool) -> PendingCall {
    PendingCall {
        call_id: call_id.into(),
        tool: tool.into(),
        arguments: json!({"note": "x"}),
        client,
    }
}

#[test]
fn an_approval_is_an_interrupt_per_call() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            selected("c9", "test__record", json!({"note": "x"})),
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Approval,
                question: None,
                calls: vec![pending("c9", "test__record", false)],
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_valid_sequence(&events);
    let custom = events
        .iter()
        .find(|event| event["name"] == "agentloop.input_required")
        .unwrap();
    assert_eq!(custom["value"]["kind"], "approval");
    assert_eq!(custom["value"]["calls"][0]["call_id"], "c9");
    let outcome = &events.last().unwrap()["outcome"];
    assert_eq!(outcome["type"], "interrupt");
    let interrupt = &outcome["interrupts"][0];
    assert_eq!(interrupt["id"], call("c9"));
    assert_eq!(interrupt["toolCallId"], call("c9"));
    assert_eq!(interrupt["reason"], APPROVAL_REASON);
    assert_eq!(
        interrupt["metadata"]["agentloop"]["arguments"],
        json!({"note": "x"})
    );
}

#[test]
fn a_client_tool_call_finishes_the_run_with_the_call_pending() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            selected("f1", "show_card", json!({"title": "Hi"})),
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Approval,
                question: None,
                calls: vec![pending("f1", "show_card", true)],
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_valid_sequence(&events);
    let start = events
        .iter()
        .find(|event| event["type"] == "TOOL_CALL_START")
        .unwrap();
    assert_eq!(start["toolCallName"], "show_card");
    assert_eq!(
        events.last().unwrap()["outcome"],
        json!({"type": "success", "pendingToolCallIds": [call("f1")]})
    );
}

#[test]
fn a_question_is_the_assistants_text_and_an_interrupt() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            selected("q1", "ask_user", json!({"question": "Which one?"})),
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Clarification,
                question: Some("Which one?".into()),
                calls: Vec::new(),
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    assert_valid_sequence(&events);
    assert!(
        !types(&events).contains(&"TOOL_CALL_START"),
        "ask_user is no tool call for the client"
    );
    let text = events
        .iter()
        .find(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .unwrap();
    assert_eq!(text["delta"], "Which one?");
    let interrupt = &events.last().unwrap()["outcome"]["interrupts"][0];
    assert_eq!(interrupt["reason"], QUESTION_REASON);
    assert_eq!(interrupt["id"], run_id().to_string());
    assert_eq!(interrupt["message"], "Which one?");
}

#[test]
fn agentloops_own_events_are_custom_events_and_the_plan_is_state() {
    let plan: Plan = serde_json::from_value(json!({
        "goal": "g", "sub_tasks": [{"id": "1", "description": "d"}]
    }))
    .unwrap();
    let mut stream = stream();
    let events = events(
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
            EventKind::UserMessage {
                text: "also this".into(),
            },
            EventKind::RunResumed {
                reason: ResumeReason::Adopted,
                instance: "i2".into(),
            },
            EventKind::LlmCall {
                iteration: 1,
                purpose: LlmCallPurpose::Step,
                model: Some("gpt-4o-mini".into()),
                duration_ms: 120,
                prompt_tokens: 1000,
                completion_tokens: 50,
                cached_tokens: 0,
                cost_usd: Some(0.00018),
            },
        ],
    );
    let names: Vec<&str> = events[2..]
        .iter()
        .map(|event| event["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "agentloop.side_effect",
            "agentloop.duplicate",
            "agentloop.user_message",
            "agentloop.run_resumed",
            "agentloop.llm_call"
        ]
    );
    assert_eq!(events[1]["type"], "STATE_SNAPSHOT");
    assert_eq!(events[1]["snapshot"]["plan"]["goal"], "g");
    assert_eq!(
        events[1]["snapshot"]["theme"], "dark",
        "the client's state is kept"
    );
    assert_eq!(events[2]["value"]["note"], "wrote");
    assert_eq!(events[4]["value"]["text"], "also this");
    assert_eq!(events[5]["value"]["reason"], "adopted");
    assert_eq!(events[6]["value"]["purpose"], "step");
    assert_eq!(events[6]["value"]["cost_usd"], 0.00018);
    assert!(events[6]["value"].get("type").is_none());
}

#[test]
fn a_sub_agents_events_are_custom_events_and_its_done_ends_nothing() {
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
        ["RUN_STARTED", "STEP_STARTED", "CUSTOM", "CUSTOM", "CUSTOM"]
    );
    assert_eq!(all[2]["name"], "agentloop.subagent");
    assert_eq!(all[2]["value"]["run_id"], sub.to_string());
    assert_eq!(all[2]["value"]["delta"], "sub answer");
    assert_eq!(all[3]["value"]["type"], "error");
    assert_eq!(
        all[3]["value"]["message"],
        ErrorCode::LlmTimeout.user_message()
    );
    assert_eq!(all[3]["value"]["request_id"], "req-9");
    assert_eq!(all[4]["value"]["type"], "done");
    assert!(!stream.is_finished());
}

#[test]
fn a_resumed_run_starts_with_run_started_and_its_reply_gets_an_id() {
    // After an approval, the stream begins in the middle of the run.
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![
            executed("c9", ToolStatus::Success, Some("ok"), None),
            EventKind::Thinking { iteration: 2 },
            EventKind::AssistantDelta {
                text: "All done.".into(),
            },
            EventKind::FinalResponse {
                delta: "All done.".into(),
            },
            done(RunStatus::Completed),
        ],
    );
    assert_valid_sequence(&events);
    assert_eq!(
        events[0]["metadata"]["agentloop"]["runId"],
        run_id().to_string()
    );
    assert_eq!(events[1]["type"], "TOOL_CALL_RESULT");
    let contents = events
        .iter()
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .count();
    assert_eq!(contents, 1, "the answer once");
}

#[test]
fn the_result_of_a_frontend_tool_the_request_brought_is_not_sent_back() {
    let mut stream = stream().with_client_results(["f1".to_string()]);
    let events = events(
        &mut stream,
        vec![
            executed("f1", ToolStatus::Success, Some("orange"), None),
            executed("s1", ToolStatus::Success, Some("server side"), None),
        ],
    );
    let results: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "TOOL_CALL_RESULT")
        .collect();
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["toolCallId"], call("s1"));
}

#[test]
fn a_blocked_run_ends_with_run_error_naming_the_guardrail() {
    let mut stream = stream_of_request();
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
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
    assert_valid_sequence(&events);
    assert!(events.iter().any(|event| event["type"] == "CUSTOM"
        && event["name"] == "agentloop.answer_retracted"
        && event["value"]["name"] == "no-secrets"));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_ERROR");
    assert_eq!(last["code"], "blocked");
    assert!(
        last["message"]
            .as_str()
            .unwrap()
            .contains("guardrail `no-secrets`"),
        "{last}"
    );
}

#[test]
fn a_calls_progress_is_a_custom_event_naming_its_tool_call() {
    let mut stream = stream();
    let events = events(
        &mut stream,
        vec![EventKind::ToolProgress {
            call_id: "c1".into(),
            tool: "test.progress".into(),
            progress: 3.0,
            total: None,
            message: None,
        }],
    );
    let progress = events
        .iter()
        .find(|event| event["name"] == "agentloop.tool_progress")
        .expect("a tool_progress event");
    assert_eq!(
        progress["value"],
        json!({
            "toolCallId": call("c1"),
            "tool": "test.progress",
            "progress": 3.0,
            "total": null,
            "message": null,
        })
    );
}

#[test]
fn a_typed_answer_streams_its_partials_as_custom_events_and_ends_in_the_results_output() {
    let mut stream = stream();
    let value = json!({"title": "Checkout is down", "priority": 1});
    let mut end = done(RunStatus::Completed);
    if let EventKind::Done { output, .. } = &mut end {
        *output = Some(value.clone());
    }
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::OutputDelta {
                partial: json!({"title": "Checkout"}),
            },
            end,
        ],
    );
    assert_valid_sequence(&events);
    assert!(events.iter().any(|event| event["type"] == "CUSTOM"
        && event["name"] == "agentloop.output_delta"
        && event["value"]["partial"] == json!({"title": "Checkout"})));
    let last = events.last().unwrap();
    assert_eq!(last["type"], "RUN_FINISHED");
    assert_eq!(last["result"]["output"], value);
}

#[test]
fn a_running_calls_question_is_a_custom_event_and_no_interrupt() {
    let mut stream = stream();
    let question = EventKind::InputRequired {
        kind: InputKind::Elicitation,
        question: Some("Who for?".into()),
        calls: Vec::new(),
        elicitation: Some(Box::new(agentloop_core::protocol::Elicitation {
            id: "c9/1".into(),
            call_id: "c9".into(),
            tool: "py.book".into(),
            server: "py".into(),
            mode: agentloop_core::protocol::ElicitationMode::Url,
            message: "Pay".into(),
            requested_schema: None,
            url: Some("https://pay.example/1".into()),
            purpose: agentloop_core::protocol::ElicitationPurpose::Question,
        })),
    };
    let events = events(
        &mut stream,
        vec![
            EventKind::Thinking { iteration: 1 },
            question,
            done(RunStatus::Completed),
        ],
    );
    assert_valid_sequence(&events);
    let custom = events
        .iter()
        .find(|event| event["name"] == "agentloop.input_required")
        .unwrap();
    assert_eq!(custom["value"]["kind"], "elicitation");
    assert_eq!(
        custom["value"]["elicitation"]["url"],
        "https://pay.example/1"
    );
    assert_eq!(events.last().unwrap()["outcome"]["type"], "success");
}
