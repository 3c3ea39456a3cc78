//! Text is stored exactly, whatever it holds: U+0000 (which PostgreSQL's `text` refuses), the
//! store's own escape character U+FDD0, and both next to each other.

use agentloop_core::protocol::{ChatMessage, MessageKind, RunStatus, ToolCall, ToolStatus};
use agentloop_core::{
    ErrorCode, KeyStore, NewRun, NewSession, RunEnd, RunFailure, StepRecord, Store,
};
use serde_json::json;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

/// Each sample is written in every free-text column and in every JSON column.
const SAMPLES: &[&str] = &[
    "a\u{0}b",
    "\u{0}",
    "tool output\u{0}\u{0} with NULs, then \u{FDD0}0 and \u{FDD0}\u{FDD0}",
    "\u{FDD0}",
    "ends with NUL\u{0}",
];

pub async fn any_text_round_trips_exactly(fixture: &Fixture) {
    for (n, sample) in SAMPLES.iter().enumerate() {
        round_trip(fixture, n, sample).await;
    }
}

async fn round_trip(fixture: &Fixture, n: usize, text: &str) {
    let store = &fixture.store;
    let user = format!("user {n} {text}");
    let session_id = Uuid::new_v4();
    let created = store
        .create_session(&NewSession {
            id: session_id,
            user_id: user.clone(),
            title: format!("title {text}"),
        })
        .await
        .unwrap_or_else(|error| panic!("session with {text:?}: {error}"));
    let stored = store.session(session_id).await.unwrap().unwrap();
    assert_eq!(stored, created, "{text:?}");
    assert_eq!(stored.user_id, user);
    assert_eq!(stored.title, format!("title {text}"));
    // The user's id selects, as written.
    let listed = store.list_sessions(Some(user.as_str()), 10).await.unwrap();
    assert_eq!(listed, vec![stored], "{text:?}");

    let run = NewRun {
        query: format!("question {text}"),
        user_id: user.clone(),
        model: Some(format!("model {text}")),
        context: json!({"note": text, text: [text]}),
        ..new_run(session_id, true)
    };
    store.start_run(&run).await.unwrap();

    let call = ToolCall {
        id: format!("call {text}"),
        name: format!("erp.{text}"),
        arguments: json!({"q": text}).to_string(),
    };
    let messages = vec![
        question(session_id, run.id, &format!("question {text}")),
        message(
            session_id,
            run.id,
            MessageKind::ToolCall,
            ChatMessage::assistant_tool_calls(Some(text.into()), vec![call.clone()]),
        ),
        agentloop_core::protocol::SessionMessage {
            metadata: json!({"trace": text}),
            ..message(
                session_id,
                run.id,
                MessageKind::ToolResult,
                ChatMessage::tool_result(&call.id, text),
            )
        },
    ];
    let record = agentloop_core::protocol::ToolExecutionRecord {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        arguments: json!({"q": text, text: 1}),
        result: Some(format!("result {text}")),
        structured_result: Some(json!([text])),
        error: Some(format!("error {text}")),
        status: ToolStatus::Error,
        ..record("unused", 1)
    };
    let events = vec![delta(run.id, 1, text), delta(run.id, 2, "plain")];
    let checkpoint = agentloop_core::Checkpoint {
        input: Some(json!({"system_prompt": text})),
        head: json!({"pending": text}).to_string(),
        last_seq: 2,
        turn: Vec::new(),
    };
    let step = StepRecord {
        messages: messages.clone(),
        records: vec![record.clone()],
        events: events.clone(),
        progress: progress(1, 1, 10),
        end: Some(RunEnd {
            output: None,
            status: RunStatus::AwaitingInput,
            failure: Some(RunFailure {
                code: ErrorCode::InternalError,
                message: format!("failure {text}"),
            }),
            ..completed(None)
        }),
        checkpoint: Some(checkpoint.clone()),
        ..super::data::step(run.id, session_id)
    };
    store
        .save_step(&step)
        .await
        .unwrap_or_else(|error| panic!("step with {text:?}: {error}"));

    assert_eq!(
        store.messages(session_id).await.unwrap(),
        messages,
        "{text:?}"
    );
    assert_eq!(
        store.history(session_id, 10).await.unwrap(),
        messages,
        "{text:?}"
    );
    assert_eq!(
        store.tool_executions(run.id).await.unwrap(),
        vec![record],
        "{text:?}"
    );
    assert_eq!(store.events(run.id, 0).await.unwrap(), events, "{text:?}");
    let saved = store.saved_run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (saved.input, saved.head),
        (
            checkpoint.input,
            Some(serde_json::from_str(&checkpoint.head).unwrap())
        )
    );
    let info = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(info.user_id, user);
    assert_eq!(info.query, run.query);
    assert_eq!(info.model, run.model);
    assert_eq!(info.error_code, Some(ErrorCode::InternalError));
    assert_eq!(info.error_message, Some(format!("failure {text}")));
    assert_eq!(store.session_runs(session_id).await.unwrap(), vec![info]);

    let key = store.create_api_key(&user).await.unwrap();
    assert_eq!(key.info.user_id, user);
    assert_eq!(
        store.authenticate(&key.secret).await.unwrap().as_deref(),
        Some(user.as_str())
    );
    let keys = store.list_api_keys(Some(user.as_str())).await.unwrap();
    assert_eq!(keys, vec![key.info], "{text:?}");
}

/// Text without U+0000 or U+FDD0 reaches the database unchanged, for whoever reads it with SQL.
pub async fn ordinary_text_is_stored_as_it_is(fixture: &Fixture) {
    let title = "Rechnung «7» — 'quoted' \\0 \\u0000 %00";
    let session_id = Uuid::new_v4();
    fixture
        .store
        .create_session(&NewSession {
            id: session_id,
            user_id: "alice".into(),
            title: title.into(),
        })
        .await
        .unwrap();
    assert_eq!(
        fixture
            .text(&format!(
                "SELECT title FROM sessions WHERE id = '{session_id}'"
            ))
            .await,
        title
    );
}
