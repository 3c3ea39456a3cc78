//! `agentloop serve` as a process: it listens, answers with a key made by `agentloop keys
//! create`, and on SIGTERM stops accepting, lets the run in flight reach a safe point, saves
//! it, and exits 0.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    io::{BufRead, BufReader},
    process::{Command, Stdio},
    time::Duration,
};

use agentloop::{RunStatus, SqlStore, Store};
use agentloop_test_support::{
    mcp::test_mcp_server_config_toml,
    scripted_llm::{Reply, ScriptedLlm},
};
use serde_json::{Value, json};

#[tokio::test]
async fn serve_answers_over_http_and_stops_cleanly_on_sigterm() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", json!({"ms": 700})),
        Reply::text("never sent"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"scripted\"\n\n{}",
            llm.base_url(),
            test_mcp_server_config_toml("test", None)
        ),
    )
    .unwrap();
    let created = common::command(dir.path())
        .args(["keys", "create", "--user", "ann"])
        .output()
        .unwrap();
    let key = String::from_utf8(created.stdout)
        .unwrap()
        .trim()
        .to_string();

    let mut server = common::command(dir.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(server.stderr.take().unwrap());
    let mut banner = String::new();
    stderr.read_line(&mut banner).unwrap();
    let address = banner
        .split_whitespace()
        .find(|word| word.starts_with("http://"))
        .unwrap_or_else(|| panic!("no address in {banner:?}"))
        .to_string();
    assert!(
        banner.contains("1 tools") || banner.contains("tools"),
        "{banner}"
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
    while llm.requests().is_empty() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(150)).await;

    let terminated = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let status = tokio::task::spawn_blocking(move || server.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "exit status {status:?}");
    let mut rest = String::new();
    std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
    assert!(rest.contains("every run was saved"), "{rest}");

    let stream = reading.await.unwrap();
    let done = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .next_back()
        .unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["status"], "cancelled");

    // What a restarted server finds: the run, saved as cancelled, with its tool call.
    let store = SqlStore::connect(&format!("sqlite://{}/agentloop.db", dir.path().display()))
        .await
        .unwrap();
    let run_id = uuid::Uuid::parse_str(done["run_id"].as_str().unwrap()).unwrap();
    let run = store.run(run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Cancelled);
    assert_eq!(
        store.tool_executions(run_id).await.unwrap()[0]
            .status
            .as_str(),
        "success"
    );
}
