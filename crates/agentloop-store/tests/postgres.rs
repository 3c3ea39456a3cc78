//! The store suite on PostgreSQL at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`), each test in a schema of its own. PostgreSQL must
//! be running: these tests fail, never skip, when it is not.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[macro_use]
mod suite;

use agentloop_core::StoreError;
use agentloop_store::SqlStore;
use agentloop_test_support::postgres::TestSchema;
use suite::Fixture;

async fn fixture() -> Fixture {
    let schema = TestSchema::create().await;
    let url = schema.url().to_string();
    let cleanup = Box::pin(schema.drop_schema());
    Fixture::new(url, "postgres", Some(cleanup), Box::new(())).await
}

suite_tests!(fixture);

#[tokio::test]
async fn the_schema_in_the_url_holds_the_tables() {
    let mut schema = TestSchema::create().await;
    let url = schema.url().to_string();
    assert_eq!(
        SqlStore::migrate(&url).await.unwrap(),
        ["1 initial schema", "2 api keys", "3 paused runs"]
    );
    let name = schema.name().to_string();
    let tables: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = $1",
    )
    .bind(&name)
    .fetch_one(schema.admin())
    .await
    .unwrap();
    // users, sessions, messages, runs, tool_executions, run_events, api_keys, _sqlx_migrations
    assert_eq!(tables, 8);
    assert!(SqlStore::migrate(&url).await.unwrap().is_empty());
    schema.drop_schema().await;
}

#[tokio::test]
async fn a_closed_port_is_named_without_the_password() {
    let url = "postgres://agent:hunter2@127.0.0.1:1/agentloop";
    let error = SqlStore::connect(url).await.unwrap_err();
    let StoreError::Unavailable(message) = error else {
        panic!("expected Unavailable, got {error:?}");
    };
    assert!(message.contains("PostgreSQL"), "{message}");
    assert!(message.contains("127.0.0.1:1/agentloop"), "{message}");
    assert!(message.contains("store.url"), "{message}");
    assert!(!message.contains("hunter2"), "{message}");
}

#[tokio::test]
async fn postgresql_is_an_accepted_scheme_too() {
    let schema = TestSchema::create().await;
    let url = schema.url().replacen("postgres://", "postgresql://", 1);
    let store = SqlStore::connect(&url).await.unwrap();
    assert_eq!(store.backend(), "postgres");
    store.close().await;
    schema.drop_schema().await;
}
