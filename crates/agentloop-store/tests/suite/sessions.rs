use agentloop_core::protocol::{EventKind, SessionMessage};
use agentloop_core::{Clock, NewSession, SessionCursor, StepRecord, Store};
use uuid::Uuid;

use super::Fixture;
use super::data::*;

pub async fn reports_its_backend(fixture: &Fixture) {
    assert_eq!(fixture.store.backend(), fixture.backend);
    fixture.store.ping().await.unwrap();
}

pub async fn creates_and_reads_a_session(fixture: &Fixture) {
    let new = NewSession {
        id: Uuid::new_v4(),
        user_id: "alice".into(),
        title: "How many open invoices?".into(),
    };
    let created = fixture.store.create_session(&new).await.unwrap();
    assert_eq!(created.id, new.id);
    assert_eq!(created.user_id, "alice");
    assert_eq!(created.title, "How many open invoices?");
    assert_eq!(created.message_count, 0);
    assert_eq!(created.active_run_id, None);
    assert_eq!(created.created_at, created.updated_at);
    assert_eq!(
        created.created_at,
        fixture.clock.now(),
        "the store keeps its clock's time"
    );

    let read = fixture.store.session(new.id).await.unwrap();
    assert_eq!(read, Some(created));
    assert_eq!(fixture.store.session(Uuid::new_v4()).await.unwrap(), None);

    // A second session of the same user reuses the user's row.
    session(fixture, "alice").await;
    assert_eq!(fixture.count("SELECT COUNT(*) FROM users").await, 1);
}

pub async fn lists_sessions_newest_first_filtered_and_limited(fixture: &Fixture) {
    let first = session(fixture, "alice").await;
    // Creation times are kept to the millisecond: keep them apart.
    fixture.clock.advance(std::time::Duration::from_millis(5));
    let second = session(fixture, "bob").await;
    fixture.clock.advance(std::time::Duration::from_millis(5));
    let third = session(fixture, "alice").await;

    let ids = |sessions: Vec<agentloop_core::protocol::SessionInfo>| {
        sessions.into_iter().map(|s| s.id).collect::<Vec<_>>()
    };
    let all = fixture.store.list_sessions(None, 10).await.unwrap();
    assert_eq!(ids(all), [third, second, first]);

    // A new message makes the oldest session the most recently updated: its session's
    // `updated_at` becomes the time the message arrived.
    fixture.clock.advance(std::time::Duration::from_millis(5));
    let run_id = run(fixture, first).await;
    let again = SessionMessage {
        created_at: fixture.clock.now(),
        ..question(first, run_id, "again?")
    };
    save_messages(fixture, run_id, first, std::slice::from_ref(&again)).await;
    let touched = fixture.store.session(first).await.unwrap().unwrap();
    assert_eq!(touched.updated_at, again.created_at);
    // Never backwards: a message that arrived earlier (the question of a run that began on a
    // new session, which the beginning stamped already) leaves it.
    let earlier = SessionMessage {
        created_at: again.created_at - chrono::Duration::milliseconds(3),
        ..question(first, run_id, "earlier?")
    };
    save_messages(fixture, run_id, first, &[earlier]).await;
    let kept = fixture.store.session(first).await.unwrap().unwrap();
    assert_eq!(kept.updated_at, again.created_at);
    let all = fixture.store.list_sessions(None, 10).await.unwrap();
    assert_eq!(ids(all), [first, third, second]);

    let alices = fixture
        .store
        .list_sessions(Some("alice"), 10)
        .await
        .unwrap();
    assert_eq!(ids(alices), [first, third]);
    let limited = fixture.store.list_sessions(None, 2).await.unwrap();
    assert_eq!(ids(limited), [first, third]);
    let nobody = fixture
        .store
        .list_sessions(Some("carol"), 10)
        .await
        .unwrap();
    assert!(nobody.is_empty());
}

/// Pages of 3 hold every session once, in the order of the whole listing, ties of
/// `updated_at` included; another user's sessions are never listed.
pub async fn pages_of_sessions_hold_every_session_once(fixture: &Fixture) {
    let store = &fixture.store;
    let mut alices = Vec::new();
    for _ in 0..8 {
        alices.push(session(fixture, "alice").await);
        session(fixture, "bob").await;
    }
    // Three of them updated in the same millisecond: the id orders them.
    for id in &alices[2..5] {
        fixture
            .execute(&format!(
                "UPDATE sessions SET updated_at = 1750000000000 WHERE id = '{id}'"
            ))
            .await;
    }
    let whole = store.list_sessions(Some("alice"), 100).await.unwrap();
    assert_eq!(whole.len(), 8);

    let mut paged = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .list_sessions_after(Some("alice"), after, 3)
            .await
            .unwrap();
        assert!(page.len() <= 3);
        let Some(last) = page.last() else { break };
        after = Some(SessionCursor::after(last));
        paged.extend(page);
    }
    assert_eq!(paged, whole);
    let mut ids: Vec<Uuid> = paged.iter().map(|s| s.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 8);
    assert!(paged.iter().all(|s| s.user_id == "alice"));

    // Without a user, after the last session: nothing.
    let everyone = store.list_sessions(None, 100).await.unwrap();
    assert_eq!(everyone.len(), 16);
    let last = SessionCursor::after(&everyone[15]);
    assert!(
        store
            .list_sessions_after(None, Some(last), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let second_half = store
        .list_sessions_after(None, Some(SessionCursor::after(&everyone[7])), 100)
        .await
        .unwrap();
    assert_eq!(second_half, everyone[8..]);
}

pub async fn counts_the_messages_of_a_session(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let other = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let messages = [
        question(session_id, run_id, "How many?"),
        tool_call(session_id, run_id, "call_1"),
        tool_result(session_id, run_id, "call_1"),
        answer(session_id, run_id, "Three."),
    ];
    save_messages(fixture, run_id, session_id, &messages).await;

    let info = fixture.store.session(session_id).await.unwrap().unwrap();
    assert_eq!(info.message_count, 4);
    assert!(info.updated_at >= info.created_at);
    let listed = fixture.store.list_sessions(None, 10).await.unwrap();
    let counts: Vec<(Uuid, u64)> = listed.iter().map(|s| (s.id, s.message_count)).collect();
    assert!(counts.contains(&(session_id, 4)), "{counts:?}");
    assert!(counts.contains(&(other, 0)), "{counts:?}");
}

pub async fn deletes_a_session_with_everything_it_owns(fixture: &Fixture) {
    let doomed = session(fixture, "alice").await;
    let kept = session(fixture, "alice").await;
    let mut runs = Vec::new();
    for session_id in [doomed, kept] {
        let run_id = run(fixture, session_id).await;
        let step = StepRecord {
            messages: vec![
                question(session_id, run_id, "How many?"),
                answer(session_id, run_id, "Three."),
            ],
            records: vec![record("call_1", 1)],
            events: vec![event(run_id, 1, EventKind::RunStarted { session_id })],
            end: Some(completed(None)),
            ..step(run_id, session_id)
        };
        fixture.store.save_step(&step).await.unwrap();
        runs.push(run_id);
    }

    assert!(fixture.store.delete_session(doomed).await.unwrap());

    let store = &fixture.store;
    assert_eq!(store.session(doomed).await.unwrap(), None);
    assert!(store.messages(doomed).await.unwrap().is_empty());
    assert!(store.session_runs(doomed).await.unwrap().is_empty());
    assert_eq!(store.run(runs[0]).await.unwrap(), None);
    assert!(store.tool_executions(runs[0]).await.unwrap().is_empty());
    assert!(store.events(runs[0], 0).await.unwrap().is_empty());
    let doomed_run = runs[0];
    for table in ["tool_executions", "run_events"] {
        let left = fixture
            .count(&format!(
                "SELECT COUNT(*) FROM {table} WHERE run_id = '{doomed_run}'"
            ))
            .await;
        assert_eq!(left, 0, "{table} rows of the deleted run");
    }
    let left = fixture
        .count(&format!(
            "SELECT COUNT(*) FROM messages WHERE session_id = '{doomed}'"
        ))
        .await;
    assert_eq!(left, 0, "messages of the deleted session");

    // The other session is untouched.
    assert_eq!(store.messages(kept).await.unwrap().len(), 2);
    assert_eq!(store.session_runs(kept).await.unwrap().len(), 1);
    assert_eq!(store.tool_executions(runs[1]).await.unwrap().len(), 1);
    assert_eq!(store.events(runs[1], 0).await.unwrap().len(), 1);
}

pub async fn deleting_an_unknown_session_reports_false(fixture: &Fixture) {
    assert!(!fixture.store.delete_session(Uuid::new_v4()).await.unwrap());
    let session_id = session(fixture, "alice").await;
    assert!(fixture.store.delete_session(session_id).await.unwrap());
    assert!(!fixture.store.delete_session(session_id).await.unwrap());
}

/// A session's `updated_at` moves with a user's message and with the end of its run, not with
/// every step between (each would write the session row and its two indexes again).
pub async fn a_session_is_updated_by_its_questions_and_the_end_of_its_runs(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let updated = || async {
        fixture
            .store
            .session(session_id)
            .await
            .unwrap()
            .unwrap()
            .updated_at
    };
    let created = updated().await;

    fixture.clock.advance(std::time::Duration::from_secs(10));
    save_messages(
        fixture,
        run_id,
        session_id,
        &[question(session_id, run_id, "Why?")],
    )
    .await;
    let asked = updated().await;
    assert!(asked > created, "{asked} after {created}");

    fixture.clock.advance(std::time::Duration::from_secs(10));
    save_messages(
        fixture,
        run_id,
        session_id,
        &[
            tool_call(session_id, run_id, "call_1"),
            tool_result(session_id, run_id, "call_1"),
        ],
    )
    .await;
    assert_eq!(updated().await, asked);

    fixture.clock.advance(std::time::Duration::from_secs(10));
    let reply = answer(session_id, run_id, "Because.");
    let last = StepRecord {
        end: Some(completed(Some(reply.id))),
        messages: vec![reply],
        ..step(run_id, session_id)
    };
    fixture.store.save_step(&last).await.unwrap();
    let ended = updated().await;
    assert!(ended > asked, "{ended} after {asked}");
    // Listed first among alice's sessions from then on.
    let other = session(fixture, "alice").await;
    fixture
        .execute(&format!(
            "UPDATE sessions SET updated_at = 0 WHERE id = '{other}'"
        ))
        .await;
    let listed = fixture
        .store
        .list_sessions(Some("alice"), 10)
        .await
        .unwrap();
    assert_eq!(listed.first().map(|info| info.id), Some(session_id));
}
