use agentloop_core::Store;
use agentloop_core::protocol::{ChatMessage, MessageKind, SessionMessage, ToolCall};
use serde_json::json;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

pub async fn messages_keep_their_order_and_every_field(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let with_calls = message(
        session_id,
        run_id,
        MessageKind::ToolCall,
        ChatMessage::assistant_tool_calls(
            Some("Let me look.".into()),
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "erp.search_invoices".into(),
                    arguments: r#"{"status": "open"}"#.into(),
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "erp.count".into(),
                    // Not JSON: kept as the model wrote it.
                    arguments: "{broken".into(),
                },
            ],
        ),
    );
    let note = SessionMessage {
        run_id: None,
        metadata: json!({"side_effect": "invoice 7 was sent", "tags": ["a", 1, null]}),
        ..message(
            session_id,
            run_id,
            MessageKind::Note,
            ChatMessage::system("Invoice 7 was sent."),
        )
    };
    let first_step = vec![
        question(
            session_id,
            run_id,
            "How many open invoices? 🧾 «quoted» 'single'",
        ),
        with_calls,
        tool_result(session_id, run_id, "call_a"),
        tool_result(session_id, run_id, "call_b"),
    ];
    let second_step = vec![
        note,
        trace(session_id, run_id),
        answer(session_id, run_id, "Three."),
    ];
    save_messages(fixture, run_id, session_id, &first_step).await;
    save_messages(fixture, run_id, session_id, &second_step).await;

    let stored = fixture.store.messages(session_id).await.unwrap();
    let expected: Vec<SessionMessage> = first_step.into_iter().chain(second_step).collect();
    assert_eq!(stored, expected);
    assert!(
        fixture
            .store
            .messages(Uuid::new_v4())
            .await
            .unwrap()
            .is_empty()
    );
}

/// d1 tc tr d2 trace note d3 tc tr d4 trace, where dN are dialogue messages.
pub async fn conversation(fixture: &Fixture) -> (Uuid, Vec<SessionMessage>) {
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let messages = vec![
        question(session_id, run_id, "d1"),
        tool_call(session_id, run_id, "call_1"),
        tool_result(session_id, run_id, "call_1"),
        answer(session_id, run_id, "d2"),
        trace(session_id, run_id),
        message(
            session_id,
            run_id,
            MessageKind::Note,
            ChatMessage::system("note"),
        ),
        question(session_id, run_id, "d3"),
        tool_call(session_id, run_id, "call_2"),
        tool_result(session_id, run_id, "call_2"),
        answer(session_id, run_id, "d4"),
        trace(session_id, run_id),
    ];
    save_messages(fixture, run_id, session_id, &messages).await;
    (session_id, messages)
}

pub async fn history_starts_at_the_nth_last_dialogue_message(fixture: &Fixture) {
    let (session_id, messages) = conversation(fixture).await;
    let pick = |indexes: &[usize]| -> Vec<SessionMessage> {
        indexes.iter().map(|&i| messages[i].clone()).collect()
    };
    let history = |n| fixture.store.history(session_id, n);

    assert_eq!(history(1).await.unwrap(), pick(&[9]));
    assert_eq!(history(2).await.unwrap(), pick(&[6, 7, 8, 9]));
    assert_eq!(history(3).await.unwrap(), pick(&[3, 5, 6, 7, 8, 9]));
    let everything_but_traces = pick(&[0, 1, 2, 3, 5, 6, 7, 8, 9]);
    assert_eq!(history(4).await.unwrap(), everything_but_traces);
    assert_eq!(history(5).await.unwrap(), everything_but_traces);
    assert_eq!(history(1000).await.unwrap(), everything_but_traces);
}

pub async fn history_of_zero_or_of_an_unknown_session_is_empty(fixture: &Fixture) {
    let (session_id, _) = conversation(fixture).await;
    assert!(
        fixture
            .store
            .history(session_id, 0)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        fixture
            .store
            .history(Uuid::new_v4(), 5)
            .await
            .unwrap()
            .is_empty()
    );
}

/// One message read by its id (a run's answer), only in its own session.
pub async fn one_message_is_read_by_its_id_in_its_session(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let question = question(session_id, run_id, "How many open invoices?");
    let answer = message(
        session_id,
        run_id,
        MessageKind::Dialogue,
        ChatMessage::assistant("Seven."),
    );
    let step = agentloop_core::StepRecord {
        messages: vec![question.clone(), answer.clone()],
        ..step(run_id, session_id)
    };
    store.save_step(&step).await.unwrap();
    assert_eq!(
        store.message(session_id, answer.id).await.unwrap(),
        Some(answer.clone())
    );
    assert_eq!(
        store.message(session_id, Uuid::new_v4()).await.unwrap(),
        None
    );
    let other = session(fixture, "bob").await;
    assert_eq!(
        store.message(other, answer.id).await.unwrap(),
        None,
        "not in another session"
    );
}

/// Answers a guardrail refused, and the notes that sent the model back, are kept in the session
/// and left out of the history a later run reads.
pub async fn history_leaves_out_blocked_messages(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let messages = vec![
        question(session_id, run_id, "d1"),
        message(
            session_id,
            run_id,
            MessageKind::Blocked,
            ChatMessage::assistant("the refused answer"),
        ),
        message(
            session_id,
            run_id,
            MessageKind::Blocked,
            ChatMessage::user("Your answer above was not accepted."),
        ),
        answer(session_id, run_id, "d2"),
    ];
    save_messages(fixture, run_id, session_id, &messages).await;
    let history = fixture.store.history(session_id, 10).await.unwrap();
    assert_eq!(history, vec![messages[0].clone(), messages[3].clone()]);
    let stored = fixture.store.messages(session_id).await.unwrap();
    assert_eq!(stored, messages, "the session keeps them");
    assert_eq!(stored[1].kind, MessageKind::Blocked);
}
