//! Retention as an operator meets it: `agentloop prune` on a store that real runs filled, and
//! the background pruner of `agentloop serve` with `[store.retention]`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::{Duration, Instant};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::{agentloop, stderr, stdout};
use serde_json::{Value, json};

fn session_of(output: &std::process::Output) -> String {
    let text = stderr(output);
    let line = text
        .lines()
        .find(|line| line.starts_with("session "))
        .unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

fn json_of(output: &std::process::Output) -> Value {
    assert!(output.status.success(), "{}", stderr(output));
    serde_json::from_str(&stdout(output)).unwrap_or_else(|_| panic!("{}", stdout(output)))
}

#[tokio::test]
async fn prune_deletes_old_runs_trails_and_keeps_the_session_whole() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 2, "b": 2})),
        Reply::text("2 + 2 = 4."),
        Reply::text("Twice that is 8."),
        Reply::text("And 16 after that."),
        Reply::text("At 16."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    common::write_config(dir.path(), &llm.base_url(), "");

    // Nothing says what to prune: an error that says where to say it.
    let refused = agentloop(dir.path(), &["prune"]).await;
    assert!(!refused.status.success());
    assert!(
        stderr(&refused).contains("[store.retention]"),
        "{}",
        stderr(&refused)
    );

    let first = agentloop(dir.path(), &["run", "What is 2 + 2?"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let session = session_of(&first);
    for question in ["And twice that?", "And twice again?"] {
        let next = agentloop(dir.path(), &["run", "--session", &session, question]).await;
        assert!(next.status.success(), "{}", stderr(&next));
    }
    let before = json_of(&agentloop(dir.path(), &["sessions", "show", &session, "--json"]).await);
    assert_eq!(before["runs"].as_array().unwrap().len(), 3);

    let dry = json_of(
        &agentloop(
            dir.path(),
            &["prune", "--keep-per-session", "1", "--dry-run", "--json"],
        )
        .await,
    );
    assert_eq!(dry["prunable"], 2);
    assert_eq!(dry["runs"], 0);

    let pruned =
        json_of(&agentloop(dir.path(), &["prune", "--keep-per-session", "1", "--json"]).await);
    assert_eq!(pruned["runs"], 2, "{pruned}");
    assert!(pruned["events"].as_u64().unwrap() >= 2 * 3, "{pruned}");
    assert!(pruned["checkpoint_rows"].as_u64().unwrap() >= 2, "{pruned}");

    // The session reads as it did: every message, every run's tool calls and outcome.
    let after = json_of(&agentloop(dir.path(), &["sessions", "show", &session, "--json"]).await);
    assert_eq!(after["messages"], before["messages"]);
    for (run_before, run_after) in before["runs"]
        .as_array()
        .unwrap()
        .iter()
        .zip(after["runs"].as_array().unwrap())
    {
        assert_eq!(run_before["execution_trace"], run_after["execution_trace"]);
        assert_eq!(run_before["run"]["status"], run_after["run"]["status"]);
        assert_eq!(run_before["run"]["usage"], run_after["run"]["usage"]);
    }
    let pruned_at: Vec<bool> = after["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["run"].get("pruned_at").is_some_and(|at| !at.is_null()))
        .collect();
    assert_eq!(pruned_at, [true, true, false], "{after}");

    // Pruned once: nothing more.
    let again =
        json_of(&agentloop(dir.path(), &["prune", "--keep-per-session", "1", "--json"]).await);
    assert_eq!(again["runs"], 0);

    // The session goes on with the history it had.
    let next = agentloop(dir.path(), &["run", "--session", &session, "Where are we?"]).await;
    assert!(next.status.success(), "{}", stderr(&next));
    let texts = llm.requests()[4]["messages"].to_string();
    assert!(
        texts.contains("What is 2 + 2?") && texts.contains("Twice that is 8."),
        "{texts}"
    );
}

#[tokio::test]
async fn a_server_prunes_in_the_background_and_says_when_events_are_gone() {
    let llm = ScriptedLlm::start(vec![Reply::text("first"), Reply::text("second")]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_config(
        dir.path(),
        &llm.base_url(),
        "[store.retention]\nkeep_per_session = 1\ninterval_s = 1\n",
    );
    let key = common::create_key(dir.path(), "ann").await;
    let served = common::Served::start(dir.path());
    let address = served.address.clone();
    let client = reqwest::Client::new();

    let ask = |question: &'static str, session: Option<String>| {
        let client = client.clone();
        let address = address.clone();
        let key = key.clone();
        async move {
            let mut body = json!({"query": question, "stream": false});
            if let Some(session) = session {
                body["session_id"] = json!(session);
            }
            let run: Value = client
                .post(format!("{address}/v1/runs"))
                .bearer_auth(&key)
                .json(&body)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(run["status"], "completed", "{run}");
            run
        }
    };
    let first = ask("one", None).await;
    let session = first["session_id"].as_str().unwrap().to_string();
    let second = ask("two", Some(session)).await;
    let first_id = first["run_id"].as_str().unwrap();
    let second_id = second["run_id"].as_str().unwrap();

    // The pruner passes every second: the older run loses its events.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let run: Value = client
            .get(format!("{address}/v1/runs/{first_id}"))
            .bearer_auth(&key)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if run.get("pruned_at").is_some_and(|at| !at.is_null()) {
            assert_eq!(run["status"], "completed");
            break;
        }
        assert!(Instant::now() < deadline, "never pruned: {run}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let gone = client
        .get(format!("{address}/v1/runs/{first_id}/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(gone.status(), 410);
    let body: Value = gone.json().await.unwrap();
    assert_eq!(body["error"]["code"], "events_pruned", "{body}");

    // The latest run of the session keeps its events.
    let kept = client
        .get(format!("{address}/v1/runs/{second_id}/events"))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(kept.status(), 200);
    let text = kept.text().await.unwrap();
    assert!(text.contains("event: done"), "{text}");
    let (status, _) = served.terminate().await;
    assert!(status.success());
}
