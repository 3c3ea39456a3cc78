//! The Responses mapping, event by event.
#![allow(clippy::unwrap_used)]

use agentloop_core::protocol::{PendingCall, Usage};

use super::*;

fn event(seq: u64, kind: EventKind) -> Event {
    Event {
        run_id: Uuid::from_u128(2),
        seq,
        parent_run_id: None,
        kind,
    }
}

fn done(status: RunStatus) -> EventKind {
    EventKind::Done {
        status,
        iterations: 1,
        tools_used: 0,
        message_id: None,
        usage: Usage {
            prompt_tokens: 20,
            completion_tokens: 5,
            ..Usage::default()
        },
        should_refresh: false,
        output: None,
    }
}

fn fold(mapper: &mut ResponseEvents, kinds: Vec<EventKind>) -> Vec<Value> {
    kinds
        .into_iter()
        .enumerate()
        .flat_map(|(index, kind)| mapper.push(&event(index as u64 + 1, kind), |_| "plain".into()))
        .collect()
}

fn types(events: &[Value]) -> Vec<&str> {
    events.iter().map(|e| e["type"].as_str().unwrap()).collect()
}

#[test]
fn an_answer_streams_as_the_semantic_events_numbered_from_zero() {
    let echo = Echo {
        model: "agentloop".into(),
        ..Echo::default()
    };
    let mut mapper = ResponseEvents::new(Uuid::from_u128(2), 100, echo);
    let out = fold(
        &mut mapper,
        vec![
            EventKind::Thinking { iteration: 1 },
            EventKind::FinalResponse {
                delta: "Hel".into(),
            },
            EventKind::FinalResponse { delta: "lo".into() },
            done(RunStatus::Completed),
        ],
    );
    assert_eq!(
        types(&out),
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    let numbers: Vec<u64> = out
        .iter()
        .map(|e| e["sequence_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, (0..10).collect::<Vec<u64>>());
    let response = &out.last().unwrap()["response"];
    assert_eq!(response["id"], response_id(Uuid::from_u128(2)));
    assert_eq!(response["status"], "completed");
    assert_eq!(response["output"][0]["content"][0]["text"], "Hello");
    assert_eq!(response["usage"]["total_tokens"], 25);
    assert_eq!(
        run_of(response["id"].as_str().unwrap()),
        Some(Uuid::from_u128(2))
    );
}

#[test]
fn client_calls_are_function_call_items_and_a_failure_is_response_failed() {
    let mut mapper = ResponseEvents::new(Uuid::from_u128(2), 100, Echo::default());
    let out = fold(
        &mut mapper,
        vec![
            EventKind::InputRequired {
                elicitation: None,
                kind: InputKind::Approval,
                question: None,
                calls: vec![PendingCall {
                    call_id: "c1".into(),
                    tool: "pick".into(),
                    arguments: serde_json::json!({"n": 1}),
                    client: true,
                }],
            },
            done(RunStatus::AwaitingInput),
        ],
    );
    let response = &out.last().unwrap()["response"];
    assert_eq!(response["output"][0]["type"], "function_call");
    assert_eq!(response["output"][0]["call_id"], "c1");
    assert_eq!(response["output"][0]["arguments"], "{\"n\":1}");
    let mut failed = ResponseEvents::new(Uuid::from_u128(3), 100, Echo::default());
    let out = fold(
        &mut failed,
        vec![
            EventKind::Error {
                code: ErrorCode::LlmTimeout,
                message: "detail".into(),
            },
            done(RunStatus::Failed),
        ],
    );
    let last = out.last().unwrap();
    assert_eq!(last["type"], "response.failed");
    assert_eq!(last["response"]["error"]["code"], "llm_timeout");
    assert_eq!(last["response"]["error"]["message"], "plain");
}

#[test]
fn a_background_response_not_begun_is_queued() {
    let echo = Echo {
        background: true,
        ..Echo::default()
    };
    let mapper = ResponseEvents::new(Uuid::from_u128(4), 100, echo);
    assert_eq!(mapper.response()["status"], "queued");
    assert_eq!(mapper.response()["usage"], Value::Null);
}
