//! A server on PostgreSQL that loses its database: a TCP proxy in front of the real server is
//! cut (every connection reset) and restored, as a database restart or a network fault would.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::Store;
use agentloop_test_support::{
    postgres::TestSchema,
    scripted_llm::{Reply, ScriptedLlm},
    tcp_proxy::TcpProxy,
    wait::{eventually, until},
};
use common::TestServer;
use serde_json::{Value, json};

async fn readiness(server: &TestServer) -> (u16, Value) {
    let response = server
        .client
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap())
}

/// Waits (at most `limit`) for `/readyz` to answer `wanted`.
async fn wait_readiness(server: &TestServer, wanted: u16, limit: Duration) -> Value {
    let what = format!("readiness {wanted}");
    eventually(&what, limit, || async {
        let (status, body) = readiness(server).await;
        (status == wanted).then_some(body)
    })
    .await
}

#[tokio::test]
async fn readiness_follows_the_database_and_an_unsaved_answer_is_a_failed_run() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let (proxy, url) = TcpProxy::in_front_of_url(schema.url()).await;
    let llm = ScriptedLlm::start(vec![
        Reply::text("an answer nobody can keep").with_delay(Duration::from_millis(800)),
    ])
    .await;
    let server = TestServer::start_on(llm, &url, "[agent]\nstore_retry_s = 1\n").await;
    let key = server.key("ann").await;

    let (status, body) = readiness(&server).await;
    assert_eq!(
        (status, body["store"]["status"].as_str()),
        (200, Some("ok"))
    );

    // The database goes away while the model thinks: the answer cannot be saved.
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "what is kept?"}))
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(common::read_sse(response));
    // The question is saved before the LLM is asked; then the database goes.
    until("the LLM is asked", Duration::from_secs(10), || {
        !server.llm.requests().is_empty()
    })
    .await;
    proxy.cut();
    let events = reading.await.unwrap();
    let run_id = events[0].data["run_id"].as_str().unwrap().to_string();
    let session_id = events[0].data["session_id"].as_str().unwrap().to_string();
    let done = events.last().unwrap();
    assert_eq!(done.event, "done");
    assert_eq!(
        done.data["status"],
        "failed",
        "{:?}",
        common::kinds(&events)
    );
    let error = events.iter().find(|e| e.event == "error").unwrap();
    assert_eq!(error.data["code"], "store_unavailable");
    // The client is told the plain sentence; the detail ("had answered") is in the store.
    assert_eq!(
        error.data["message"],
        agentloop::core::protocol::ErrorCode::StoreUnavailable.user_message(),
        "{}",
        error.data
    );
    assert!(events.iter().all(|e| e.event != "final_response"));

    let body = wait_readiness(&server, 503, Duration::from_secs(10)).await;
    assert_eq!(body["status"], "unavailable");
    assert!(body["store"]["error"].is_string(), "{body}");

    // The database comes back: ready again, and the run's failed end is saved, its session
    // free for the next question.
    proxy.restore();
    wait_readiness(&server, 200, Duration::from_secs(15)).await;
    let run_uuid = uuid::Uuid::parse_str(&run_id).unwrap();
    let saved = eventually(
        "the run's failed end is saved",
        Duration::from_secs(15),
        || async {
            let run = server.store.run(run_uuid).await.unwrap().unwrap();
            (run.status.as_str() == "failed").then_some(run)
        },
    )
    .await;
    assert!(
        saved
            .error_message
            .as_deref()
            .is_some_and(|message| message.contains("had answered")),
        "{saved:?}"
    );
    let session = server
        .store
        .session(uuid::Uuid::parse_str(&session_id).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.active_run_id, None);
    let stored = server.store.events(run_uuid, 0).await.unwrap();
    let stored_types: Vec<&str> = stored.iter().map(|e| e.kind.type_name()).collect();
    let received: Vec<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        stored_types, received,
        "the log is what the client received"
    );

    server.shutdown().await;
    drop(proxy);
    schema.drop_schema().await;
}
