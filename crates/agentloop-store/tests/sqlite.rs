//! The store suite on SQLite: a fresh database file in a temporary directory per test.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[macro_use]
mod suite;

use agentloop_core::{StepRecord, Store, StoreError};
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
        StoreError::Unavailable { message, .. } => message,
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
        [
            "1 initial schema",
            "2 api keys",
            "3 paused runs",
            "5 tool outputs once",
            "6 durable runs",
            "7 run costs",
            "8 run trace",
            "9 tool costs",
            "11 positions without sequence",
            "12 superseded messages",
            "13 run output",
            "14 attachments",
            "15 mcp oauth tokens",
            "16 a2a push",
            "17 tool logs",
            "18 retention"
        ]
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
        matches!(&error, StoreError::Query { message, .. } if message.contains("FOREIGN KEY")),
        "{error:?}"
    );
    // The database's own error is kept as the cause.
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    assert!(
        cause.is_some_and(|cause| cause.contains("FOREIGN KEY")),
        "{error:?}"
    );
    // WAL is a property of the file, visible from any connection.
    assert_eq!(fixture.text("PRAGMA journal_mode").await, "wal");
    fixture.teardown().await;
}

fn file_url(path: &std::path::Path) -> String {
    format!("sqlite://{}", path.display())
}

/// A store whose file vanished goes on writing to the deleted file: ping says so, and the next
/// start, which can only begin an empty store, says it created one (the server prints that).
#[tokio::test]
async fn a_deleted_file_is_noticed_by_ping_and_reported_at_the_next_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentloop.db");
    let store = SqlStore::connect(&file_url(&path)).await.unwrap();
    assert!(store.created_new_file(), "the first start creates the file");
    store.ping().await.unwrap();

    // Reopening the same file creates nothing.
    let again = SqlStore::connect(&file_url(&path)).await.unwrap();
    assert!(!again.created_new_file());
    again.close().await;

    std::fs::remove_file(&path).unwrap();
    let message = unavailable(store.ping().await.unwrap_err());
    assert!(message.contains("was deleted"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    store.close().await;

    let restarted = SqlStore::connect(&file_url(&path)).await.unwrap();
    assert!(restarted.created_new_file(), "a new, empty store");
    assert!(
        restarted.list_sessions(None, 10).await.unwrap().is_empty(),
        "a new store"
    );
    restarted.ping().await.unwrap();
}

#[tokio::test]
async fn opening_only_an_existing_store_creates_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentloop.db");
    let url = file_url(&path);
    assert!(SqlStore::open_existing(&url).await.unwrap().is_none());
    assert!(!path.exists(), "a reader left a database behind");
    assert_eq!(SqlStore::missing_file(&url), Some(path.clone()));

    SqlStore::connect(&url).await.unwrap().close().await;
    let store = SqlStore::open_existing(&url).await.unwrap().unwrap();
    assert!(!store.created_new_file());
    assert_eq!(store.location(), path.display().to_string());
    assert!(store.list_sessions(None, 10).await.unwrap().is_empty());
    store.close().await;
    assert_eq!(SqlStore::missing_file(&url), None);
}

#[tokio::test]
async fn a_file_replaced_under_the_store_is_noticed_by_ping() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentloop.db");
    let store = SqlStore::connect(&file_url(&path)).await.unwrap();
    let other = dir.path().join("restored.db");
    SqlStore::migrate(&file_url(&other)).await.unwrap();
    store.ping().await.unwrap();

    std::fs::rename(&other, &path).unwrap();
    let message = unavailable(store.ping().await.unwrap_err());
    assert!(message.contains("replaced"), "{message}");
    assert!(message.contains("restart"), "{message}");
    store.close().await;
}

/// Another process holds the write lock past busy_timeout: ping fails within its 2 s, a step
/// fails after busy_timeout as `Unavailable`, and once the lock is released every later step is
/// stored (no connection was left inside a failed transaction).
#[tokio::test]
async fn a_write_lock_held_elsewhere_fails_calls_in_seconds_and_nothing_after_it() {
    use sqlx::{Connection, Executor};

    let fixture = fixture().await;
    let store = &fixture.store;
    let session_id = suite::session(&fixture, "alice").await;
    let run_id = suite::run(&fixture, session_id).await;

    sqlx::any::install_default_drivers();
    let mut other = sqlx::AnyConnection::connect(&fixture.url).await.unwrap();
    other.execute("BEGIN IMMEDIATE").await.unwrap();

    let started = std::time::Instant::now();
    let message = unavailable(store.ping().await.unwrap_err());
    let waited = started.elapsed();
    assert!(message.contains("locked"), "{message}");
    assert!(
        waited < std::time::Duration::from_millis(2500),
        "{waited:?}"
    );

    let step = |iterations| agentloop_core::StepRecord {
        messages: vec![suite::question(session_id, run_id, "still there?")],
        progress: suite::progress(iterations, 0, 10),
        ..suite::step(run_id, session_id)
    };
    let started = std::time::Instant::now();
    let message = unavailable(store.save_step(&step(1)).await.unwrap_err());
    assert!(message.contains("locked"), "{message}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );

    other.execute("ROLLBACK").await.unwrap();
    other.close().await.unwrap();
    store.ping().await.unwrap();
    for iterations in 1..=6 {
        store.save_step(&step(iterations)).await.unwrap();
    }
    assert_eq!(store.messages(session_id).await.unwrap().len(), 6);
    assert_eq!(store.run(run_id).await.unwrap().unwrap().iterations, 6);
    fixture.teardown().await;
}

/// A store whose file takes no writes (here opened read-only; a read-only remount or a full disk
/// look the same to SQLite) is not healthy, though every read still works.
#[tokio::test]
async fn ping_fails_when_the_file_takes_no_writes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("agentloop.db");
    SqlStore::migrate(&file_url(&path)).await.unwrap();
    let store = SqlStore::connect(&format!("{}?mode=ro", file_url(&path)))
        .await
        .unwrap();
    assert!(store.list_sessions(None, 10).await.unwrap().is_empty());
    let message = unavailable(store.ping().await.unwrap_err());
    assert!(message.contains("readonly"), "{message}");
    assert!(message.contains(&path.display().to_string()), "{message}");
    store.close().await;

    let writable = SqlStore::connect(&file_url(&path)).await.unwrap();
    writable.ping().await.unwrap();
    writable.close().await;
}

/// Migration 11 rebuilds `messages` and `tool_executions` without `AUTOINCREMENT` (which wrote
/// `sqlite_sequence` in every step): a database of the schema before keeps every row, in its
/// order, and what is saved after comes after it.
#[tokio::test]
async fn positions_numbered_by_autoincrement_are_kept_when_the_tables_are_rebuilt() {
    let fixture = fixture().await;
    let session_id = suite::session(&fixture, "alice").await;
    let run_id = suite::run(&fixture, session_id).await;
    let before = vec![
        suite::question(session_id, run_id, "first"),
        suite::tool_call(session_id, run_id, "call_1"),
        suite::tool_result(session_id, run_id, "call_1"),
        suite::answer(session_id, run_id, "second"),
    ];
    let step = StepRecord {
        messages: before.clone(),
        records: vec![suite::record("call_1", 1), suite::record("call_2", 1)],
        ..suite::step(run_id, session_id)
    };
    fixture.store.save_step(&step).await.unwrap();

    // The schema before migration 11: both tables numbered by AUTOINCREMENT, with gaps as
    // deleted rows leave them.
    for (table, columns) in [
        ("messages", MESSAGE_COLUMNS),
        ("tool_executions", RECORD_COLUMNS),
    ] {
        let create = fixture
            .text(&format!(
                "SELECT sql FROM sqlite_schema WHERE type = 'table' AND name = '{table}'"
            ))
            .await;
        let old = create
            .replacen(
                "position INTEGER PRIMARY KEY",
                "position INTEGER PRIMARY KEY AUTOINCREMENT",
                1,
            )
            .replacen(
                &format!("CREATE TABLE \"{table}\""),
                &format!("CREATE TABLE {table}_old"),
                1,
            )
            .replacen(
                &format!("CREATE TABLE {table} "),
                &format!("CREATE TABLE {table}_old "),
                1,
            );
        assert!(
            old.contains("AUTOINCREMENT") && old.contains("_old"),
            "{old}"
        );
        fixture.execute(&old).await;
        fixture
            .execute(&format!(
                "INSERT INTO {table}_old (position, {columns}) \
                 SELECT position * 10, {columns} FROM {table}"
            ))
            .await;
        fixture.execute(&format!("DROP TABLE {table}")).await;
        fixture
            .execute(&format!("ALTER TABLE {table}_old RENAME TO {table}"))
            .await;
    }
    fixture
        .execute("CREATE INDEX messages_by_session ON messages (session_id, position)")
        .await;
    // Nor what the later migrations added outside these tables (13: `runs.output`).
    fixture.execute("ALTER TABLE runs DROP COLUMN output").await;
    fixture
        .execute("DELETE FROM _sqlx_migrations WHERE version >= 11")
        .await;
    fixture.execute("DROP TABLE attachments").await;
    fixture.execute("DROP TABLE mcp_oauth_tokens").await;
    fixture.execute("DROP TABLE a2a_push_outbox").await;
    fixture.execute("DROP TABLE a2a_push_targets").await;
    fixture.execute("DROP INDEX runs_unpruned").await;
    fixture
        .execute("ALTER TABLE runs DROP COLUMN pruned_at")
        .await;
    let positions_before = fixture.count("SELECT SUM(position) FROM messages").await;

    let applied = SqlStore::migrate(&fixture.url).await.unwrap();
    // A database from before migration 11 has none of the later ones either.
    assert_eq!(
        applied,
        [
            "11 positions without sequence",
            "12 superseded messages",
            "13 run output",
            "14 attachments",
            "15 mcp oauth tokens",
            "16 a2a push",
            "17 tool logs",
            "18 retention"
        ]
    );
    assert_eq!(
        fixture.count("SELECT SUM(position) FROM messages").await,
        positions_before,
        "the positions are kept"
    );
    assert_eq!(
        fixture
            .count("SELECT COUNT(*) FROM sqlite_schema WHERE sql LIKE '%AUTOINCREMENT%'")
            .await,
        0
    );
    let store = SqlStore::connect(&fixture.url).await.unwrap();
    assert_eq!(store.messages(session_id).await.unwrap(), before);
    assert_eq!(store.tool_executions(run_id).await.unwrap().len(), 2);

    // What is saved next comes after, and no step writes sqlite_sequence any more.
    let later = vec![suite::question(session_id, run_id, "third")];
    let step = StepRecord {
        messages: later.clone(),
        ..suite::step(run_id, session_id)
    };
    store.save_step(&step).await.unwrap();
    let all: Vec<_> = before.into_iter().chain(later).collect();
    assert_eq!(store.messages(session_id).await.unwrap(), all);
    assert_eq!(
        fixture
            .count(
                "SELECT COUNT(*) FROM sqlite_sequence \
                 WHERE name IN ('messages', 'tool_executions')"
            )
            .await,
        0
    );
}

const MESSAGE_COLUMNS: &str = "id, session_id, run_id, kind, role, content, tool_calls, \
    tool_call_id, metadata, created_at, content_hash";
const RECORD_COLUMNS: &str = "run_id, call_id, iteration, tool, arguments, started_at, \
    duration_ms, status, result, structured_result, error, result_hash, structured_is_result, \
    cost_usd";
