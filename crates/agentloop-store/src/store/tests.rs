//! Failures that need the store's own connections: a per-connection limit set on SQLite's
//! connection makes it fail mid-transaction exactly as a full disk does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use agentloop_core::protocol::{ChatMessage, MessageKind, RunStatus, SessionMessage};
use agentloop_core::{NewRun, NewSession, RunEnd, RunProgress, StepRecord, Store, StoreError};
use sqlx::pool::PoolConnection;
use sqlx::{AssertSqlSafe, Postgres, Row};
use uuid::Uuid;

use super::SqlStore;
use crate::columns::now;
use crate::db::Engine;

/// Every connection the PostgreSQL pool may hold, checked out at once so that a check reaches
/// all of them.
async fn every_connection(store: &SqlStore) -> Vec<PoolConnection<Postgres>> {
    let Engine::Postgres(pool) = &store.db.engine else {
        panic!("a PostgreSQL store");
    };
    let mut connections = Vec::new();
    for _ in 0..pool.options().get_max_connections() {
        connections.push(pool.acquire().await.unwrap());
    }
    connections
}

/// `PRAGMA max_page_count` on the store's connection: SQLite refuses to grow the file past it
/// with SQLITE_FULL, and rolls the whole transaction back, as on a full disk.
async fn limit_pages(store: &SqlStore, pages: Option<i64>) {
    let pages = pages.unwrap_or(1 << 30);
    store
        .db
        .query(&format!("PRAGMA max_page_count = {pages}"))
        .fetch_optional(&store.db)
        .await
        .unwrap();
}

async fn page_count(store: &SqlStore) -> i64 {
    let row = store
        .db
        .query("PRAGMA page_count")
        .fetch_one(&store.db)
        .await
        .unwrap();
    store
        .db
        .cells(&row, "pragma")
        .integer("page_count")
        .unwrap()
}

fn message(session_id: Uuid, run_id: Uuid, text: String) -> SessionMessage {
    SessionMessage {
        id: Uuid::new_v4(),
        session_id,
        run_id: Some(run_id),
        kind: MessageKind::Dialogue,
        message: ChatMessage::assistant(text),
        metadata: serde_json::Value::Null,
        created_at: now(),
        superseded_by_run: None,
    }
}

fn big() -> Vec<String> {
    (0..4).map(|n| format!("{n}{}", "x".repeat(1000))).collect()
}

fn step(session_id: Uuid, run_id: Uuid, iterations: u32, texts: Vec<String>) -> StepRecord {
    StepRecord {
        run_id,
        session_id,
        messages: texts
            .into_iter()
            .map(|text| message(session_id, run_id, text))
            .collect(),
        progress: RunProgress {
            iterations,
            ..RunProgress::default()
        },
        ..StepRecord::default()
    }
}

/// A session of alice's in `store`.
async fn new_session(store: &SqlStore, title: &str) -> Uuid {
    let session_id = Uuid::new_v4();
    store
        .create_session(&NewSession {
            id: session_id,
            user_id: "alice".into(),
            title: title.into(),
        })
        .await
        .unwrap();
    session_id
}

/// A run of alice's on `session_id`.
fn new_run(id: Uuid, session_id: Uuid) -> NewRun {
    NewRun {
        id,
        session_id,
        user_id: "alice".into(),
        query: "q".into(),
        model: None,
        save_chat: true,
        context: serde_json::Value::Null,
        started_at: now(),
        owner: None,
        traceparent: None,
    }
}

/// The end of a step that pauses its run.
fn paused() -> RunEnd {
    RunEnd {
        output: None,
        status: RunStatus::AwaitingInput,
        answer_message_id: None,
        failure: None,
        finalize_reason: None,
        finished_at: now(),
    }
}

/// A checkpoint's head larger than the pages a full disk leaves, written by a one-row UPDATE of
/// the run: SQLite has no statement journal for it and rolls the whole transaction back by
/// itself, as it does after a disk I/O error.
fn head_too_big() -> String {
    serde_json::json!({"state": "y".repeat(64 * 1024)}).to_string()
}

#[tokio::test]
async fn a_full_disk_mid_transaction_does_not_poison_later_steps() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("agentloop.db").display());
    let store = SqlStore::connect(&url).await.unwrap();
    let session_id = new_session(&store, "disk").await;
    let run_id = Uuid::new_v4();
    store.start_run(&new_run(run_id, session_id)).await.unwrap();

    // The disk is full: a step that needs new pages fails in the middle of its transaction, and
    // SQLite rolls the whole transaction back (see `head_too_big`).
    limit_pages(&store, Some(page_count(&store).await)).await;
    let pause = paused();
    let checkpoint = agentloop_core::Checkpoint {
        input: Some(serde_json::json!({"history": []})),
        head: head_too_big(),
        last_seq: 3,
        turn: Vec::new(),
    };
    for attempt in 0..3 {
        let paused = StepRecord {
            end: Some(pause.clone()),
            checkpoint: Some(checkpoint.clone()),
            ..step(session_id, run_id, 1, big())
        };
        let error = store.save_step(&paused).await.unwrap_err();
        assert!(
            matches!(&error, StoreError::Unavailable { message, .. } if message.contains("full")),
            "attempt {attempt}: {error:?}"
        );
    }
    assert!(store.messages(session_id).await.unwrap().is_empty());

    // Space again: the step that failed is stored when tried again, and every later step too,
    // on whichever connection it gets.
    limit_pages(&store, None).await;
    let paused = StepRecord {
        end: Some(pause.clone()),
        checkpoint: Some(checkpoint.clone()),
        ..step(session_id, run_id, 1, big())
    };
    store.save_step(&paused).await.unwrap();
    let saved = store.saved_run(run_id).await.unwrap().unwrap();
    assert_eq!(
        saved.head,
        Some(serde_json::from_str(&checkpoint.head).unwrap())
    );
    assert_eq!(saved.input, checkpoint.input);
    for iteration in 2..10 {
        store
            .save_step(&step(session_id, run_id, iteration, big()))
            .await
            .unwrap_or_else(|error| panic!("step {iteration} after the disk was freed: {error}"));
    }
    assert_eq!(store.messages(session_id).await.unwrap().len(), 9 * 4);
    assert_eq!(store.run(run_id).await.unwrap().unwrap().iterations, 9);
    store.ping().await.unwrap();
    store.close().await;
}

/// The only connection of a memory database cannot be closed like a file's: a transaction that
/// failed half-way is rolled back before anything else uses the connection, and nothing written
/// after it is swallowed by it.
#[tokio::test]
async fn a_failed_transaction_on_a_memory_database_is_rolled_back_before_the_next_use() {
    let store = SqlStore::connect("sqlite::memory:").await.unwrap();
    let session_id = new_session(&store, "memory").await;
    let run = |id| new_run(id, session_id);
    let run_id = Uuid::new_v4();
    store.start_run(&run(run_id)).await.unwrap();

    // The run's counters are written, then a message of a session that has no row breaks the
    // foreign key: the transaction is left unfinished.
    let orphan = step(Uuid::new_v4(), run_id, 5, vec!["lost".into()]);
    let error = store.save_step(&orphan).await.unwrap_err();
    assert!(matches!(error, StoreError::Query { .. }), "{error:?}");

    // Written outside a transaction right after: must not join the abandoned one.
    let second = Uuid::new_v4();
    store.start_run(&run(second)).await.unwrap();
    assert_eq!(store.run(run_id).await.unwrap().unwrap().iterations, 0);
    store
        .save_step(&step(session_id, run_id, 2, big()))
        .await
        .unwrap();
    assert_eq!(store.run(run_id).await.unwrap().unwrap().iterations, 2);
    assert!(store.run(second).await.unwrap().is_some());
    assert_eq!(store.messages(session_id).await.unwrap().len(), 4);
    store.ping().await.unwrap();
}

async fn setting(store: &SqlStore, name: &str) -> String {
    let Engine::Postgres(pool) = &store.db.engine else {
        panic!("a PostgreSQL store");
    };
    sqlx::query(AssertSqlSafe(format!("SELECT current_setting('{name}')")))
        .fetch_one(pool)
        .await
        .unwrap()
        .try_get::<String, _>(0)
        .unwrap()
}

/// A statement that hangs on the server (a lock never released) ends after 15 s; a timeout the
/// URL sets wins.
#[tokio::test]
async fn postgres_statements_are_bounded_unless_the_url_says_otherwise() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = agentloop_test_support::postgres::TestSchema::create().await;
    let store = SqlStore::connect(schema.url()).await.unwrap();
    // Every connection of the pool, not only the first.
    let connections = every_connection(&store).await;
    drop(connections);
    for _ in 0..3 {
        assert_eq!(setting(&store, "statement_timeout").await, "15s");
    }
    store.close().await;

    let url = format!("{}%20-c%20statement_timeout%3D42s", schema.url());
    let store = SqlStore::connect(&url).await.unwrap();
    assert_eq!(setting(&store, "statement_timeout").await, "42s");
    store.close().await;
    schema.drop_schema().await;
}

/// A SQLite file store with a session and `runs` runs begun on it.
async fn store_with_runs(dir: &tempfile::TempDir, runs: usize) -> (SqlStore, Uuid, Vec<Uuid>) {
    let url = format!("sqlite://{}", dir.path().join("agentloop.db").display());
    let store = SqlStore::connect(&url).await.unwrap();
    let session_id = new_session(&store, "groups").await;
    let mut ids = Vec::new();
    for _ in 0..runs {
        let id = Uuid::now_v7();
        store.start_run(&new_run(id, session_id)).await.unwrap();
        ids.push(id);
    }
    (store, session_id, ids)
}

/// Saves `steps` at once while the store's connection is taken, so that they all wait for it,
/// then lets it go; their results in order, and how many groups they were committed in.
async fn saved_at_once(
    store: &SqlStore,
    steps: &[StepRecord],
) -> (Vec<Result<(), StoreError>>, u64) {
    let Engine::Sqlite(lite) = &store.db.engine else {
        panic!("a SQLite store");
    };
    let held = lite.lock().await.unwrap();
    let groups_before = lite.groups_begun();
    let mut saves = Box::pin(futures::future::join_all(
        steps.iter().map(|step| store.save_step(step)),
    ));
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    assert!(saves.as_mut().poll(&mut context).is_pending());
    assert_eq!(
        lite.waiting(),
        steps.len(),
        "every step waits for the connection"
    );
    drop(held);
    let results = saves.await;
    (results, lite.groups_begun() - groups_before)
}

#[tokio::test]
async fn steps_of_runs_saved_at_once_are_committed_together_and_fail_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (store, session_id, runs) = store_with_runs(&dir, 4).await;
    // The third names a session that has no row: its message breaks a foreign key after its
    // run's counters were written.
    let steps: Vec<StepRecord> = runs
        .iter()
        .enumerate()
        .map(|(n, &run_id)| {
            let session = if n == 2 { Uuid::new_v4() } else { session_id };
            StepRecord {
                session_id,
                ..step(session, run_id, 5, vec![format!("answer {n}")])
            }
        })
        .collect();
    let (results, groups) = saved_at_once(&store, &steps).await;
    assert_eq!(groups, 1, "one commit for all four");
    for (n, result) in results.iter().enumerate() {
        let run = store.run(runs[n]).await.unwrap().unwrap();
        if n == 2 {
            assert!(
                matches!(result, Err(StoreError::Query { .. })),
                "{result:?}"
            );
            assert_eq!(run.iterations, 0, "its counters undone with it");
        } else {
            result.as_ref().unwrap();
            assert_eq!(run.iterations, 5);
        }
    }
    let texts: Vec<String> = store
        .messages(session_id)
        .await
        .unwrap()
        .into_iter()
        .map(|message| message.message.content.unwrap_or_default())
        .collect();
    assert_eq!(texts, ["answer 0", "answer 1", "answer 3"]);

    // Seen from another connection: committed, not only visible to the store's own.
    drop(store);
    let store = SqlStore::connect(&format!(
        "sqlite://{}",
        dir.path().join("agentloop.db").display()
    ))
    .await
    .unwrap();
    assert_eq!(store.messages(session_id).await.unwrap().len(), 3);
}

/// A full disk in one member makes SQLite roll the whole transaction back: the members before
/// it learn that their steps were not saved, and the ones after it begin a new group.
#[tokio::test]
async fn a_full_disk_in_a_group_fails_the_members_it_undid_and_no_others() {
    let dir = tempfile::tempdir().unwrap();
    let (store, session_id, runs) = store_with_runs(&dir, 3).await;
    let counters = |run_id, iterations| step(session_id, run_id, iterations, Vec::new());
    let pause = StepRecord {
        end: Some(paused()),
        checkpoint: Some(agentloop_core::Checkpoint {
            input: None,
            head: head_too_big(),
            last_seq: 3,
            turn: Vec::new(),
        }),
        ..step(session_id, runs[1], 1, big())
    };
    limit_pages(&store, Some(page_count(&store).await)).await;
    let steps = [counters(runs[0], 7), pause, counters(runs[2], 9)];
    let (results, groups) = saved_at_once(&store, &steps).await;
    assert!(
        matches!(&results[0], Err(StoreError::Unavailable { message, .. }) if message.contains("rolled back")),
        "{:?}",
        results[0]
    );
    assert!(
        matches!(&results[1], Err(StoreError::Unavailable { message, .. }) if message.contains("full")),
        "{:?}",
        results[1]
    );
    results[2].as_ref().unwrap();
    assert_eq!(groups, 2, "the third began a group of its own");
    limit_pages(&store, None).await;
    assert_eq!(store.run(runs[0]).await.unwrap().unwrap().iterations, 0);
    assert_eq!(store.run(runs[2]).await.unwrap().unwrap().iterations, 9);
    assert!(store.messages(session_id).await.unwrap().is_empty());
}
