//! The HTTP API's refusals over real HTTP: 401 without a valid key, 400 naming the field, 413,
//! 429 with `Retry-After`, and 404 for what belongs to another user.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

fn echo_then_answer() -> Vec<Reply> {
    vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::text("The echo said hello."),
    ]
}

#[tokio::test]
async fn requests_without_a_valid_key_get_401_with_a_json_error() {
    let server = TestServer::start(Vec::new(), "").await;
    let revoked = server.key("ann").await;
    agentloop::KeyStore::revoke_api_key(server.store.as_ref(), &revoked)
        .await
        .unwrap();
    let no_key = server
        .client
        .post(format!("{}/v1/runs", server.url))
        .json(&json!({"query": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(no_key.headers()["www-authenticate"], "Bearer");
    let (status, error) = error_of(no_key).await;
    assert_eq!(
        (status, error["code"].as_str().unwrap()),
        (401, "unauthorized")
    );
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("agentloop keys create")
    );
    for key in ["al_0000", &revoked, ""] {
        let (status, _) = error_of(server.get("/v1/sessions", key).send().await.unwrap()).await;
        assert_eq!(status, 401, "{key:?}");
    }
    // A key the store does not know: most likely made in another store.
    let (_, unknown) = error_of(server.get("/v1/sessions", "al_0000").send().await.unwrap()).await;
    let message = unknown["message"].as_str().unwrap();
    assert_eq!(unknown["code"], "unauthorized");
    for hint in [
        "its own store",
        "--config",
        "DATABASE_URL",
        "agentloop keys list",
    ] {
        assert!(message.contains(hint), "{hint}: {message}");
    }
    let basic = server
        .client
        .get(format!("{}/v1/sessions", server.url))
        .basic_auth("ann", Some("x"))
        .send()
        .await
        .unwrap();
    assert_eq!(basic.status(), 401);
    assert_eq!(server.llm.requests().len(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_bad_body_gets_400_naming_the_field() {
    let server = TestServer::start(Vec::new(), "").await;
    let key = server.key("ann").await;
    let cases = [
        (json!({}), "query"),
        (json!({"query": 12}), "query"),
        (json!({"query": ""}), "query"),
        (json!({"query": "q", "stream": "yes"}), "stream"),
        (
            json!({"query": "q", "context": {"read_only": 1}}),
            "context.read_only",
        ),
        (json!({"query": "q", "max_iterations": 0}), "max_iterations"),
        (json!({"query": "q", "sesion_id": "typo"}), "sesion_id"),
        (
            json!({"query": "q", "session_id": "not-a-uuid"}),
            "session_id",
        ),
    ];
    for (body, field) in cases {
        let response = server
            .post("/v1/runs", &key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(error["details"]["field"], field, "{body}: {error}");
    }
    let broken = server
        .post("/v1/runs", &key)
        .body("{\"query\": ")
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(broken).await;
    assert_eq!(
        (status, error["code"].as_str().unwrap()),
        (400, "invalid_json")
    );
    let bad_id = server
        .get("/v1/runs/not-a-uuid", &key)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(bad_id).await.0, 400);
    let bad_resume = server
        .get(&format!("/v1/runs/{}/events", uuid::Uuid::now_v7()), &key)
        .header("Last-Event-ID", "three")
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(bad_resume).await.0, 400);
    assert_eq!(server.llm.requests().len(), 0, "no run started");
    server.shutdown().await;
}

#[tokio::test]
async fn a_body_over_the_limit_gets_413() {
    let server = TestServer::start(Vec::new(), "[server]\nmax_body_bytes = 2048\n").await;
    let key = server.key("ann").await;
    let query = "x".repeat(4096);
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": query}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 413);
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("server.max_body_bytes")
    );
    server.shutdown().await;
}

#[tokio::test]
async fn too_many_runs_of_one_user_get_429_with_retry_after() {
    let server = TestServer::start(
        vec![
            Reply::text("slow").with_delay(Duration::from_millis(1500)),
            Reply::text("other user"),
            Reply::text("again"),
        ],
        "[server]\nmax_runs_per_user = 1\n",
    )
    .await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    let first = server
        .post("/v1/runs", &ann)
        .json(&json!({"query": "one"}))
        .send()
        .await
        .unwrap();
    let second = server
        .post("/v1/runs", &ann)
        .json(&json!({"query": "two"}))
        .send()
        .await
        .unwrap();
    assert_eq!(second.status(), 429);
    assert!(
        second.headers()["retry-after"]
            .to_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > 0
    );
    let (_, error) = error_of(second).await;
    assert_eq!(error["code"], "too_many_runs");
    // Another user is not affected.
    let other = server
        .post("/v1/runs", &bob)
        .json(&json!({"query": "three", "stream": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);
    let events = read_sse(first).await;
    assert_eq!(events.last().unwrap().data["status"], "completed");
    // Once the first run ended, it no longer counts (retried: it is counted out just after
    // its last event).
    let again = agentloop_test_support::wait::eventually(
        "a new run of ann",
        Duration::from_secs(5),
        || async {
            let answer = server
                .post("/v1/runs", &ann)
                .json(&json!({"query": "four", "stream": false}))
                .send()
                .await
                .unwrap();
            (answer.status() != 429).then_some(answer)
        },
    )
    .await;
    assert_eq!(again.status(), 200);
    server.shutdown().await;
}

#[tokio::test]
async fn another_users_sessions_runs_and_events_answer_404() {
    let server = TestServer::start(echo_then_answer(), "").await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    let body: Value = server
        .post("/v1/runs", &ann)
        .json(&json!({"query": "Echo hello", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = body["run_id"].as_str().unwrap().to_string();
    let session = body["session_id"].as_str().unwrap().to_string();
    let unknown = uuid::Uuid::now_v7().to_string();

    for (id_kind, id) in [("theirs", &run), ("unknown", &unknown)] {
        for path in [format!("/v1/runs/{id}"), format!("/v1/runs/{id}/events")] {
            let (status, error) = error_of(server.get(&path, &bob).send().await.unwrap()).await;
            assert_eq!(status, 404, "{id_kind} {path}");
            assert_eq!(error["code"], "not_found");
        }
        let cancel = server
            .post(&format!("/v1/runs/{id}/cancel"), &bob)
            .send()
            .await
            .unwrap();
        assert_eq!(cancel.status(), 404, "{id_kind}");
    }
    for (id_kind, id) in [("theirs", &session), ("unknown", &unknown)] {
        let path = format!("/v1/sessions/{id}");
        assert_eq!(
            server.get(&path, &bob).send().await.unwrap().status(),
            404,
            "{id_kind}"
        );
        let delete = server
            .client
            .delete(format!("{}{path}", server.url))
            .bearer_auth(&bob)
            .send()
            .await
            .unwrap();
        assert_eq!(delete.status(), 404, "{id_kind}");
        let continue_it = server
            .post("/v1/runs", &bob)
            .json(&json!({"query": "sneak", "session_id": id}))
            .send()
            .await
            .unwrap();
        assert_eq!(continue_it.status(), 404, "{id_kind}");
    }
    let listed: Value = server
        .get("/v1/sessions", &bob)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"], json!([]));
    // Ann still sees hers, intact.
    let hers: Value = server
        .get(&format!("/v1/sessions/{session}"), &ann)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(hers["session"]["user_id"], "ann");
    assert_eq!(hers["messages"].as_array().unwrap().len(), 5);
    server.shutdown().await;
}
