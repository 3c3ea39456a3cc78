//! The store suite on PostgreSQL at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`, else a private cluster), each test in a schema of
//! its own. Without PostgreSQL these tests are skipped, saying so (a failure with
//! `AGENTLOOP_TEST_ALL=1`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[macro_use]
mod suite;

use std::time::{Duration, Instant};

use agentloop_core::{NewSession, Store, StoreError};
use agentloop_store::SqlStore;
use agentloop_test_support::postgres::TestSchema;
use agentloop_test_support::tcp_proxy::TcpProxy;
use suite::Fixture;
use uuid::Uuid;

async fn fixture() -> Option<Fixture> {
    if !agentloop_test_support::requires::postgres().await {
        return None;
    }
    let schema = TestSchema::create().await;
    let url = schema.url().to_string();
    let cleanup = Box::pin(schema.drop_schema());
    Some(Fixture::new(url, "postgres", Some(cleanup), Box::new(())).await)
}

suite_tests!(fixture);

#[tokio::test]
async fn the_schema_in_the_url_holds_the_tables() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let mut schema = TestSchema::create().await;
    let url = schema.url().to_string();
    assert_eq!(
        SqlStore::migrate(&url).await.unwrap(),
        [
            "1 initial schema",
            "2 api keys",
            "3 paused runs",
            "4 escaped text",
            "5 tool outputs once",
            "6 durable runs",
            "7 run costs",
            "8 run trace",
            "9 tool costs",
            "10 notify by trigger",
            "12 superseded messages",
            "13 run output",
            "14 attachments",
            "15 mcp oauth tokens",
            "16 a2a push",
            "17 tool logs",
            "18 retention"
        ]
    );
    let name = schema.name().to_string();
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&name)
    .fetch_one(schema.admin())
    .await
    .unwrap();
    // users, sessions, messages, runs, tool_executions, tool_outputs, run_events, api_keys,
    // instances, run_inputs, run_turn, attachments, mcp_oauth_tokens, a2a_push_targets,
    // a2a_push_outbox, _sqlx_migrations
    assert_eq!(tables, 16);
    assert!(SqlStore::migrate(&url).await.unwrap().is_empty());
    schema.drop_schema().await;
}

#[tokio::test]
async fn a_closed_port_is_named_without_the_password() {
    let url = "postgres://agent:hunter2@127.0.0.1:1/agentloop";
    let error = SqlStore::connect(url).await.unwrap_err();
    let StoreError::Unavailable { message, .. } = error else {
        panic!("expected Unavailable, got {error:?}");
    };
    assert!(message.contains("PostgreSQL"), "{message}");
    assert!(message.contains("127.0.0.1:1/agentloop"), "{message}");
    assert!(message.contains("store.url"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn postgresql_is_an_accepted_scheme_too() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let url = schema.url().replacen("postgres://", "postgresql://", 1);
    let store = SqlStore::connect(&url).await.unwrap();
    assert_eq!(store.backend(), "postgres");
    store.close().await;
    schema.drop_schema().await;
}

fn unavailable(error: StoreError) -> String {
    match error {
        StoreError::Unavailable { message, .. } => message,
        other => panic!("expected Unavailable, got {other:?}"),
    }
}

/// A port that accepts connections and never says a word (a wrong port, a proxy with nothing
/// behind it): the start fails in seconds, naming the place and what to check.
#[tokio::test]
async fn a_silent_endpoint_fails_the_start_in_seconds() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let held = tokio::spawn(async move {
        let mut connections = Vec::new();
        while let Ok((connection, _)) = listener.accept().await {
            connections.push(connection);
        }
    });
    let url = format!("postgres://agent:hunter2@{address}/agentloop");
    let started = std::time::Instant::now();
    let error = tokio::time::timeout(std::time::Duration::from_secs(30), SqlStore::connect(&url))
        .await
        .expect("connect must give up by itself")
        .unwrap_err();
    let waited = started.elapsed();
    let message = unavailable(error);
    eprintln!("a silent endpoint failed the start after {waited:?}: {message}");
    assert!(message.contains("no answer within 5 s"), "{message}");
    assert!(message.contains(&address.to_string()), "{message}");
    assert!(message.contains("store.url"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
    assert!(waited < std::time::Duration::from_secs(7), "{waited:?}");
    held.abort();
}

async fn store_behind_a_proxy() -> (TestSchema, TcpProxy, SqlStore) {
    let schema = TestSchema::create().await;
    let (proxy, url) = TcpProxy::in_front_of_url(schema.url()).await;
    let store = SqlStore::connect(&url).await.unwrap();
    (schema, proxy, store)
}

async fn new_session(store: &SqlStore) -> Result<Uuid, StoreError> {
    let id = Uuid::new_v4();
    store
        .create_session(&NewSession {
            id,
            user_id: "alice".into(),
            title: "t".into(),
        })
        .await?;
    Ok(id)
}

/// Calls `ping` until it succeeds, for at most `limit`; how long it took.
async fn ping_until_it_answers(store: &SqlStore, limit: Duration) -> Duration {
    let started = Instant::now();
    loop {
        match store.ping().await {
            Ok(()) => return started.elapsed(),
            Err(error) if started.elapsed() < limit => {
                eprintln!("not yet: {error}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(error) => panic!("the store did not recover within {limit:?}: {error}"),
        }
    }
}

/// PostgreSQL goes away (every connection reset, new ones refused): ping fails at once and
/// within its 2 s, store calls fail within the 5 s acquire timeout, and when PostgreSQL is back
/// the pool opens fresh connections by itself.
#[tokio::test]
async fn when_postgres_is_cut_calls_fail_in_seconds_and_the_pool_recovers() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let (schema, proxy, store) = store_behind_a_proxy().await;
    let kept = new_session(&store).await.unwrap();
    store.ping().await.unwrap();

    proxy.cut();
    let started = Instant::now();
    let message = unavailable(store.ping().await.unwrap_err());
    let ping_failed_after = started.elapsed();
    eprintln!("ping failed {ping_failed_after:?} after the cut: {message}");
    assert!(
        ping_failed_after <= Duration::from_millis(2200),
        "{ping_failed_after:?}"
    );
    assert!(message.contains("127.0.0.1"), "{message}");

    for _ in 0..2 {
        let started = Instant::now();
        let error = store.session(kept).await.unwrap_err();
        let failed_after = started.elapsed();
        eprintln!("a call failed {failed_after:?} after the cut: {error}");
        assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
        assert!(failed_after <= Duration::from_secs(6), "{failed_after:?}");
    }

    proxy.restore();
    let recovered_after = ping_until_it_answers(&store, Duration::from_secs(10)).await;
    eprintln!("ping answered {recovered_after:?} after the restore");
    assert_eq!(store.session(kept).await.unwrap().unwrap().id, kept);
    for _ in 0..12 {
        new_session(&store).await.unwrap();
    }
    store.close().await;
    schema.drop_schema().await;
}

/// The network drops every packet without closing anything: nothing answers, so only the
/// store's own clocks end the waits: ping after 2 s, a call after the 5 s acquire timeout (the
/// pool's check of its idle connection gets no answer either).
#[tokio::test]
async fn when_postgres_stops_answering_ping_and_calls_give_up_on_their_own() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let (schema, proxy, store) = store_behind_a_proxy().await;
    let kept = new_session(&store).await.unwrap();

    proxy.blackhole();
    let started = Instant::now();
    let message = unavailable(store.ping().await.unwrap_err());
    let ping_failed_after = started.elapsed();
    eprintln!("ping failed {ping_failed_after:?} into the blackhole: {message}");
    assert!(message.contains("within 2 s"), "{message}");
    assert!(
        ping_failed_after <= Duration::from_millis(2500),
        "{ping_failed_after:?}"
    );

    let started = Instant::now();
    let error = store.session(kept).await.unwrap_err();
    let failed_after = started.elapsed();
    eprintln!("a call failed {failed_after:?} into the blackhole: {error}");
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
    assert!(failed_after <= Duration::from_secs(6), "{failed_after:?}");

    proxy.restore();
    ping_until_it_answers(&store, Duration::from_secs(10)).await;
    assert_eq!(store.session(kept).await.unwrap().unwrap().id, kept);
    new_session(&store).await.unwrap();
    store.close().await;
    schema.drop_schema().await;
}

/// Rows written before migration 4 hold U+FDD0 as it is; the migration escapes it, so that they
/// read back unchanged and still select by user.
#[tokio::test]
async fn text_written_before_the_escape_reads_back_unchanged() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let mut schema = TestSchema::create().await;
    let url = schema.url().to_string();
    let store = SqlStore::connect(&url).await.unwrap();
    let session_id = new_session(&store).await.unwrap();
    let run = suite::new_run(session_id, true);
    store.start_run(&run).await.unwrap();
    let message = suite::question(session_id, run.id, "plain");
    store
        .save_step(&agentloop_core::StepRecord {
            messages: vec![message.clone()],
            // Without a structured form: the row's result is rewritten below, as text.
            records: vec![agentloop_core::protocol::ToolExecutionRecord {
                structured_result: None,
                ..suite::record("call_1", 1)
            }],
            ..suite::step(run.id, session_id)
        })
        .await
        .unwrap();
    let key = agentloop_core::KeyStore::create_api_key(&store, "alice")
        .await
        .unwrap();
    store.close().await;

    let old = "old \u{FDD0} text, \u{FDD0}\u{FDD0}0 and \u{FDD0}0";
    let old_user = "user \u{FDD0}";
    let name = schema.name().to_string();
    let statements: Vec<(String, Vec<String>)> = vec![
        (
            format!("INSERT INTO {name}.users (id, created_at) VALUES ($1, 0)"),
            vec![old_user.into()],
        ),
        (
            format!("UPDATE {name}.sessions SET user_id = $1, title = $2 WHERE id = $3"),
            vec![old_user.into(), old.into(), session_id.to_string()],
        ),
        (
            format!("UPDATE {name}.api_keys SET user_id = $1 WHERE id = $2"),
            vec![old_user.into(), key.info.id.clone()],
        ),
        (
            format!(
                "UPDATE {name}.runs SET user_id = $1, query = $2, error_message = $2 WHERE id = $3"
            ),
            vec![old_user.into(), old.into(), run.id.to_string()],
        ),
        (
            format!("UPDATE {name}.messages SET content = $1 WHERE id = $2"),
            vec![old.into(), message.id.to_string()],
        ),
        (
            format!("UPDATE {name}.tool_executions SET tool = $1, result = $1 WHERE run_id = $2"),
            vec![old.into(), run.id.to_string()],
        ),
        (
            format!("DELETE FROM {name}._sqlx_migrations WHERE version = 4"),
            vec![],
        ),
    ];
    for (sql, binds) in statements {
        let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        for bind in binds {
            query = query.bind(bind);
        }
        query
            .execute(&mut *schema.admin())
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    assert_eq!(SqlStore::migrate(&url).await.unwrap(), ["4 escaped text"]);
    let store = SqlStore::connect(&url).await.unwrap();
    let session = store.session(session_id).await.unwrap().unwrap();
    assert_eq!(session.user_id, old_user);
    assert_eq!(session.title, old);
    let listed = store.list_sessions(Some(old_user), 10).await.unwrap();
    assert_eq!(listed, vec![session]);
    let info = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(
        (info.user_id.as_str(), info.query.as_str()),
        (old_user, old)
    );
    assert_eq!(info.error_message.as_deref(), Some(old));
    let messages = store.messages(session_id).await.unwrap();
    assert_eq!(messages[0].message.content.as_deref(), Some(old));
    let records = store.tool_executions(run.id).await.unwrap();
    assert_eq!(
        (records[0].tool.as_str(), records[0].result.as_deref()),
        (old, Some(old))
    );
    assert_eq!(
        agentloop_core::KeyStore::authenticate(&store, &key.secret)
            .await
            .unwrap()
            .as_deref(),
        Some(old_user)
    );
    store.close().await;
    schema.drop_schema().await;
}

/// A step saved through one store (one instance) is news to a follower of another store on the
/// same database: `NOTIFY` by the trigger on `run_events`, in the step's transaction; `LISTEN`
/// in the follower's store.
#[tokio::test]
async fn a_step_saved_by_another_instance_is_news_to_this_one() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let here = SqlStore::connect(schema.url()).await.unwrap();
    let elsewhere = SqlStore::connect(schema.url()).await.unwrap();
    let mut news = agentloop_core::Store::run_news(&here).unwrap();
    let session_id = new_session(&elsewhere).await.unwrap();
    let run = suite::new_run(session_id, true);
    elsewhere.start_run(&run).await.unwrap();
    // The listener connects in the background: steps are saved until one is heard.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seq = 0;
    let heard = loop {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no news of a step saved by another store"
        );
        seq += 1;
        let step = agentloop_core::StepRecord {
            events: vec![suite::delta(run.id, seq, "x")],
            ..suite::step(run.id, session_id)
        };
        elsewhere.save_step(&step).await.unwrap();
        if let Ok(Ok(id)) =
            tokio::time::timeout(std::time::Duration::from_millis(500), news.recv()).await
        {
            break id;
        }
    };
    assert_eq!(heard, run.id);
    schema.drop_schema().await;
}
