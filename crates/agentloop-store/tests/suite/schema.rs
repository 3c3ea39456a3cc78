use agentloop_core::{Store, StoreError};
use agentloop_store::SqlStore;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

fn assert_corrupt(error: StoreError, table_and_column: &str) {
    match error {
        StoreError::Corrupt { message, .. } => {
            assert!(message.contains(table_and_column), "{message}")
        }
        other => panic!("expected a Corrupt error naming {table_and_column}, got {other:?}"),
    }
}

pub async fn undecodable_rows_are_corrupt_errors(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;

    fixture
        .execute(&format!(
            "UPDATE runs SET status = 'exploded' WHERE id = '{run_id}'"
        ))
        .await;
    assert_corrupt(store.run(run_id).await.unwrap_err(), "runs.status");
    assert_corrupt(
        store.session_runs(session_id).await.unwrap_err(),
        "runs.status",
    );

    fixture
        .execute(&format!(
            "UPDATE runs SET status = 'running', answer_message_id = 'not-a-uuid' \
             WHERE id = '{run_id}'"
        ))
        .await;
    assert_corrupt(
        store.run(run_id).await.unwrap_err(),
        "runs.answer_message_id",
    );

    fixture
        .execute(&format!(
            "INSERT INTO messages (id, session_id, run_id, kind, role, created_at) \
             VALUES ('{}', '{session_id}', 'garbage', 'dialogue', 'user', 0)",
            Uuid::new_v4()
        ))
        .await;
    assert_corrupt(
        store.messages(session_id).await.unwrap_err(),
        "messages.run_id",
    );
    assert_corrupt(
        store.history(session_id, 1).await.unwrap_err(),
        "messages.run_id",
    );

    let other_run = run(fixture, session_id).await;
    fixture
        .execute(&format!(
            "INSERT INTO run_events (run_id, seq, type, payload, created_at) \
             VALUES ('{other_run}', 1, 'done', '{{not json', 0)"
        ))
        .await;
    assert_corrupt(
        store.events(other_run, 0).await.unwrap_err(),
        "run_events.payload",
    );

    fixture
        .execute(&format!(
            "INSERT INTO tool_executions (run_id, call_id, iteration, tool, arguments, \
                 started_at, duration_ms, status) \
             VALUES ('{other_run}', 'call_1', -1, 't', 'null', 0, 0, 'success')"
        ))
        .await;
    assert_corrupt(
        store.tool_executions(other_run).await.unwrap_err(),
        "tool_executions.iteration",
    );

    let broken_session = session(fixture, "alice").await;
    fixture
        .execute(&format!(
            "UPDATE sessions SET created_at = {} WHERE id = '{broken_session}'",
            i64::MAX
        ))
        .await;
    assert_corrupt(
        store.session(broken_session).await.unwrap_err(),
        "sessions.created_at",
    );
    assert_corrupt(
        store.list_sessions(None, 10).await.unwrap_err(),
        "sessions.created_at",
    );
}

pub async fn migrating_an_up_to_date_database_applies_nothing(fixture: &Fixture) {
    let applied = SqlStore::migrate(&fixture.url).await.unwrap();
    assert_eq!(applied, Vec::<String>::new());
    // And the store still works.
    session(fixture, "alice").await;
}

pub async fn a_schema_from_a_newer_agentloop_is_refused(fixture: &Fixture) {
    let checksum = match fixture.backend {
        "postgres" => "decode('00', 'hex')",
        _ => "X'00'",
    };
    let success = match fixture.backend {
        "postgres" => "TRUE",
        _ => "1",
    };
    fixture
        .execute(&format!(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, \
                 execution_time) \
             VALUES (99990101000000, 'from the future', {success}, {checksum}, 0)"
        ))
        .await;
    let error = SqlStore::connect(&fixture.url).await.unwrap_err();
    match error {
        StoreError::Unavailable { message, .. } => {
            assert!(message.contains("99990101000000"), "{message}");
            assert!(message.contains("newer agentloop"), "{message}");
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

pub async fn ping_answers_at_once_on_a_healthy_database(fixture: &Fixture) {
    for _ in 0..3 {
        let started = std::time::Instant::now();
        fixture.store.ping().await.unwrap();
        assert!(
            started.elapsed() < std::time::Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
    }
    // And the store works after it (SQLite's ping took and released the write lock).
    session(fixture, "alice").await;
}
