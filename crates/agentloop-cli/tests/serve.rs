//! `agentloop serve` as a process: it listens, answers with a key made by `agentloop keys
//! create`, and on SIGTERM stops accepting, lets the run in flight reach a safe point, saves
//! it, and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::{RunStatus, SqlStore, Store};
use agentloop_test_support::{
    config::TestConfig,
    mcp::wait_for_call,
    scripted_llm::{Reply, ScriptedLlm},
    sse::parse_sse,
    wait::never,
};
use serde_json::{Value, json};

#[tokio::test]
async fn serve_answers_over_http_and_stops_cleanly_on_sigterm() {
    serve_then_sigterm("").await;
}

/// The same with the connections and their runs on threads of their own.
#[tokio::test]
async fn serve_on_threads_of_their_own_stops_cleanly_on_sigterm() {
    serve_then_sigterm("[server]\nthreads = 2\n").await;
}

/// A server with `extra` config, a run with a call in flight, SIGTERM: exit 0, the call saved,
/// the run left at that step for the next start.
async fn serve_then_sigterm(extra: &str) {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", json!({"ms": 700})),
        Reply::text("never sent"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    common::write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).mcp_log(&log).extra(extra),
    );
    let key = common::create_key(dir.path(), "ann").await;

    let served = common::Served::start(dir.path());
    let address = served.address.clone();
    assert!(served.banner.contains("tools"), "{}", served.banner);
    assert_eq!(
        served.banner.contains("2 serving threads"),
        extra.contains("threads = 2"),
        "{}",
        served.banner
    );

    let client = reqwest::Client::new();
    let health: Value = client
        .get(format!("{address}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let unauthorized = client
        .post(format!("{address}/v1/runs"))
        .json(&json!({"query": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status(), 401);

    let response = client
        .post(format!("{address}/v1/runs"))
        .bearer_auth(&key)
        .json(&json!({"query": "sleep a while"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let reading = tokio::spawn(async move { response.text().await.unwrap() });
    // The sleep has begun: the run has a call in flight when the server is told to stop.
    wait_for_call(&log, "sleep").await;

    let (status, rest) = served.terminate().await;
    assert!(status.success(), "exit status {status:?}");
    assert!(rest.contains("every run was saved"), "{rest}");

    // Handed over: the call in flight finished and was saved; the run stopped before its next
    // LLM call, to go on in the next start.
    let stream = reading.await.unwrap();
    let last = parse_sse(&stream).pop().unwrap().data;
    assert_eq!(last["type"], "thinking", "{last}");
    let store = SqlStore::connect(&format!("sqlite://{}/agentloop.db", dir.path().display()))
        .await
        .unwrap();
    let run_id = uuid::Uuid::parse_str(last["run_id"].as_str().unwrap()).unwrap();
    let run = store.run(run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(
        store.tool_executions(run_id).await.unwrap()[0]
            .status
            .as_str(),
        "success"
    );
}

/// The server runs until it is told to stop, however short its shutdown grace: a server with a
/// grace of half a second, left alone for several times that plus the connections' extra
/// seconds, still answers a run and still stops cleanly on SIGTERM.
#[tokio::test]
async fn serve_keeps_running_past_its_shutdown_grace() {
    let llm = ScriptedLlm::start(vec![Reply::text("still here")]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_config(
        dir.path(),
        &llm.base_url(),
        "[server]\nshutdown_grace_s = 0.5\n",
    );
    let key = common::create_key(dir.path(), "ann").await;
    let mut served = common::Served::start(dir.path());

    // Before the fix the process exited by itself grace + 5 s after it started: watched for
    // longer than that, failing the moment it exits.
    let left_alone = Duration::from_secs(8);
    never("serve exited with no signal", left_alone, || {
        !served.is_running()
    })
    .await;

    let answer: Value = reqwest::Client::new()
        .post(format!("{}/v1/runs", served.address))
        .bearer_auth(&key)
        .json(&json!({"query": "are you there?", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["answer"], "still here");

    let (status, rest) = served.terminate().await;
    assert!(status.success(), "exit status {status:?}: {rest}");
}

#[tokio::test]
async fn a_server_on_an_in_memory_store_is_called_with_the_key_it_made_for_key_for() {
    let llm = ScriptedLlm::start(vec![Reply::text("from memory")]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).store("sqlite::memory:"),
    );
    let mut served = common::Served::start_with(dir.path(), &["--key-for", "ann"]);
    let mut key = String::new();
    std::io::BufRead::read_line(&mut served.stdout, &mut key).unwrap();
    let key = key.trim().to_string();
    assert!(!key.is_empty());

    let client = reqwest::Client::new();
    let ask = |key: String| {
        client
            .post(format!("{}/v1/runs", served.address))
            .bearer_auth(key)
            .json(&json!({"query": "where are you?", "stream": false}))
            .send()
    };
    let answer: Value = ask(key.clone()).await.unwrap().json().await.unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["answer"], "from memory");
    let sessions: Value = client
        .get(format!("{}/v1/sessions", served.address))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sessions["sessions"][0]["user_id"], "ann", "{sessions}");
    assert_eq!(ask(format!("{key}x")).await.unwrap().status(), 401);

    let (status, rest) = served.terminate().await;
    assert!(status.success(), "exit status {status:?}: {rest}");
    assert!(rest.contains("API key created for the user ann"), "{rest}");
}

#[tokio::test]
async fn key_for_with_no_user_name_is_refused_before_serving() {
    let dir = tempfile::tempdir().unwrap();
    common::write_test_config(dir.path(), &TestConfig::new("http://127.0.0.1:9"));
    let refused = common::agentloop(dir.path(), &["serve", "--key-for", " "]).await;
    assert!(!refused.status.success());
    assert!(
        common::stderr(&refused).contains("--key-for needs a user name"),
        "{}",
        common::stderr(&refused)
    );
}
