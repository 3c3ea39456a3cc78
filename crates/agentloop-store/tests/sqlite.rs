//! The store suite on SQLite: a fresh database file in a temporary directory per test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[macro_use]
mod suite;

use agentloop_core::{Store, StoreError};
use agentloop_store::SqlStore;
use suite::Fixture;

async fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentloop.db").display());
    Fixture::new(url, "sqlite", None, Box::new(dir)).await
}

suite_tests!(fixture);

fn unavailable(error: StoreError) -> String {
    match error {
        StoreError::Unavailable(message) => message,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

#[tokio::test]
async fn a_missing_directory_is_named_with_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("missing").join("agentloop.db");
    let message = unavailable(
        SqlStore::connect(&format!("sqlite://{}", path.display()))
            .await
            .unwrap_err(),
    );
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("SQLite"), "{message}");
    assert!(message.contains("store.url"), "{message}");
    assert!(message.contains("DATABASE_URL"), "{message}");
}

#[tokio::test]
async fn other_databases_are_refused_with_the_accepted_forms() {
    let message = unavailable(
        SqlStore::connect("mysql://root:hunter2@127.0.0.1/agentloop")
            .await
            .unwrap_err(),
    );
    assert!(message.contains("\"mysql\""), "{message}");
    assert!(message.contains("sqlite://"), "{message}");
    assert!(message.contains("postgres://"), "{message}");
    assert!(message.contains("store.url"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn a_new_file_is_created_and_migrated_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    let url = format!("sqlite://{}", path.display());
    assert_eq!(
        SqlStore::migrate(&url).await.unwrap(),
        ["1 initial schema", "2 api keys", "3 paused runs"]
    );
    assert!(path.exists());
    assert!(SqlStore::migrate(&url).await.unwrap().is_empty());
}

#[tokio::test]
async fn a_memory_database_keeps_its_data_across_queries() {
    let store = SqlStore::connect("sqlite::memory:").await.unwrap();
    let session_id = uuid::Uuid::new_v4();
    store
        .create_session(&agentloop_core::NewSession {
            id: session_id,
            user_id: "alice".into(),
            title: "t".into(),
        })
        .await
        .unwrap();
    for _ in 0..5 {
        assert!(store.session(session_id).await.unwrap().is_some());
    }
}

#[tokio::test]
async fn every_connection_runs_with_foreign_keys_and_wal() {
    let fixture = fixture().await;
    // Through the store's own pool: a message of a session that does not exist is refused.
    let session_id = uuid::Uuid::new_v4();
    let run_id = suite::run(&fixture, session_id).await;
    let orphan = agentloop_core::StepRecord {
        messages: vec![suite::question(session_id, run_id, "hello?")],
        ..suite::step(run_id, session_id)
    };
    let error = fixture.store.save_step(&orphan).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::Query(message) if message.contains("FOREIGN KEY")),
        "{error:?}"
    );
    // WAL is a property of the file, visible from any connection.
    assert_eq!(fixture.text("PRAGMA journal_mode").await, "wal");
    fixture.teardown().await;
}
