//! Builders of the values the tests store: realistic, and with times already truncated to the
//! millisecond, since that is what the store keeps.

use agentloop_core::protocol::{
    ChatMessage, Event, EventKind, MessageKind, RunStatus, SessionMessage, ToolCall,
    ToolExecutionRecord, ToolStatus, Usage,
};
use agentloop_core::{NewRun, NewSession, RunEnd, RunProgress, StepRecord, Store};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use super::Fixture;

pub fn now() -> DateTime<Utc> {
    DateTime::from_timestamp_millis(Utc::now().timestamp_millis()).unwrap()
}

/// A time `seconds` after a fixed origin, for ordering that must not depend on the clock.
pub fn at(seconds: i64) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(1_750_000_000_000).unwrap() + Duration::seconds(seconds)
}

pub async fn session(fixture: &Fixture, user_id: &str) -> Uuid {
    let id = Uuid::new_v4();
    fixture
        .store
        .create_session(&NewSession {
            id,
            user_id: user_id.into(),
            title: format!("a question of {user_id}"),
        })
        .await
        .unwrap();
    id
}

pub fn new_run(session_id: Uuid, save_chat: bool) -> NewRun {
    NewRun {
        id: Uuid::new_v4(),
        session_id,
        user_id: "alice".into(),
        query: "How many open invoices?".into(),
        model: Some("gpt-4o-mini".into()),
        save_chat,
        context: json!({"entity": "invoices", "read_only": true}),
        started_at: now(),
        owner: None,
        traceparent: None,
    }
}

/// A started run of `session_id` that saves the chat.
pub async fn run(fixture: &Fixture, session_id: Uuid) -> Uuid {
    let run = new_run(session_id, true);
    fixture.store.start_run(&run).await.unwrap();
    run.id
}

pub fn message(
    session_id: Uuid,
    run_id: Uuid,
    kind: MessageKind,
    message: ChatMessage,
) -> SessionMessage {
    SessionMessage {
        id: Uuid::new_v4(),
        session_id,
        run_id: Some(run_id),
        kind,
        message,
        metadata: serde_json::Value::Null,
        created_at: now(),
        superseded_by_run: None,
    }
}

pub fn question(session_id: Uuid, run_id: Uuid, text: &str) -> SessionMessage {
    message(
        session_id,
        run_id,
        MessageKind::Dialogue,
        ChatMessage::user(text),
    )
}

pub fn answer(session_id: Uuid, run_id: Uuid, text: &str) -> SessionMessage {
    message(
        session_id,
        run_id,
        MessageKind::Dialogue,
        ChatMessage::assistant(text),
    )
}

pub fn tool_call(session_id: Uuid, run_id: Uuid, call_id: &str) -> SessionMessage {
    message(
        session_id,
        run_id,
        MessageKind::ToolCall,
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall {
                id: call_id.into(),
                name: "erp.search_invoices".into(),
                arguments: r#"{"status": "open"}"#.into(),
            }],
        ),
    )
}

pub fn tool_result(session_id: Uuid, run_id: Uuid, call_id: &str) -> SessionMessage {
    message(
        session_id,
        run_id,
        MessageKind::ToolResult,
        ChatMessage::tool_result(call_id, r#"{"count": 3}"#),
    )
}

pub fn trace(session_id: Uuid, run_id: Uuid) -> SessionMessage {
    SessionMessage {
        metadata: json!({"trace": [{"tool": "erp.search_invoices", "ms": 12}]}),
        ..message(
            session_id,
            run_id,
            MessageKind::Trace,
            ChatMessage::system("execution trace"),
        )
    }
}

pub fn record(call_id: &str, iteration: u32) -> ToolExecutionRecord {
    ToolExecutionRecord {
        call_id: call_id.into(),
        iteration,
        tool: "erp.search_invoices".into(),
        arguments: json!({"status": "open", "limit": 20}),
        started_at: now(),
        duration_ms: 12,
        status: ToolStatus::Success,
        result: Some(r#"{"count": 3, "ids": [1, 2, 3]}"#.into()),
        structured_result: Some(json!({"count": 3, "ids": [1, 2, 3]})),
        error: None,
        cost_usd: None,
        logs: Vec::new(),
    }
}

pub fn event(run_id: Uuid, seq: u64, kind: EventKind) -> Event {
    Event {
        run_id,
        seq,
        parent_run_id: None,
        kind,
    }
}

pub fn delta(run_id: Uuid, seq: u64, text: &str) -> Event {
    event(run_id, seq, EventKind::FinalResponse { delta: text.into() })
}

pub fn step(run_id: Uuid, session_id: Uuid) -> StepRecord {
    StepRecord {
        run_id,
        session_id,
        ..StepRecord::default()
    }
}

pub fn progress(iterations: u32, tools_used: u32, tokens: u64) -> RunProgress {
    RunProgress {
        iterations,
        tools_used,
        usage: Usage {
            prompt_tokens: tokens,
            completion_tokens: tokens / 10,
            ..Usage::default()
        },
    }
}

pub fn completed(answer_message_id: Option<Uuid>) -> RunEnd {
    RunEnd {
        output: None,
        status: RunStatus::Completed,
        answer_message_id,
        failure: None,
        finalize_reason: None,
        finished_at: now(),
    }
}

/// Saves one step holding only `messages`.
pub async fn save_messages(
    fixture: &Fixture,
    run_id: Uuid,
    session_id: Uuid,
    messages: &[SessionMessage],
) {
    let step = StepRecord {
        messages: messages.to_vec(),
        ..step(run_id, session_id)
    };
    fixture.store.save_step(&step).await.unwrap();
}
