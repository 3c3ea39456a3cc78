//! `agentloop run --session`, `agentloop sessions list|show` and `agentloop migrate` as a user
//! meets them: a real process, a SQLite file next to the config, a scripted LLM over HTTP.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, stderr, stdout};

use std::process::Output;

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};

/// The session id `run` prints on stderr.
fn session_of(output: &Output) -> String {
    let text = stderr(output);
    let line = text
        .lines()
        .find(|line| line.starts_with("session "))
        .unwrap_or_else(|| panic!("{text}"));
    line.split_whitespace().nth(1).unwrap().to_string()
}

#[tokio::test]
async fn a_session_continues_and_can_be_listed_and_shown() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 2, "b": 2})),
        Reply::text("2 + 2 = 4."),
        Reply::text("Twice that is 8."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    common::write_config(dir.path(), &llm.base_url(), "");

    let first = agentloop(dir.path(), &["run", "What is 2 + 2?"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let session = session_of(&first);
    assert!(
        dir.path().join("agentloop.db").exists(),
        "the SQLite store is created on first use"
    );

    let second = agentloop(
        dir.path(),
        &["run", "--session", &session, "And twice that?"],
    )
    .await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert_eq!(stdout(&second), "Twice that is 8.\n");
    assert_eq!(session_of(&second), session);
    let follow_up = &llm.requests()[2];
    let texts: Vec<&str> = follow_up["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert!(
        texts.contains(&"What is 2 + 2?") && texts.contains(&"2 + 2 = 4."),
        "{texts:?}"
    );

    let list = agentloop(dir.path(), &["sessions", "list"]).await;
    assert!(list.status.success(), "{}", stderr(&list));
    let row = stdout(&list)
        .lines()
        .find(|line| line.starts_with(&session))
        .unwrap_or_default()
        .to_string();
    assert!(
        row.contains("local") && row.contains("What is 2 + 2?"),
        "{}",
        stdout(&list)
    );

    let show = agentloop(dir.path(), &["sessions", "show", &session]).await;
    assert!(show.status.success(), "{}", stderr(&show));
    let text = stdout(&show);
    let order = [
        "What is 2 + 2?",
        "✓ test.add",
        "2 + 2 = 4.",
        "And twice that?",
        "Twice that is 8.",
    ];
    let positions: Vec<usize> = order
        .iter()
        .map(|needle| {
            text.find(needle)
                .unwrap_or_else(|| panic!("{needle} in {text}"))
        })
        .collect();
    assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
    assert_eq!(text.matches("── run ").count(), 2, "{text}");
    assert!(text.contains("completed · 2 steps · 1 tool call"), "{text}");
    assert!(text.contains("tokens · cost unknown"), "{text}");

    let json_show = agentloop(dir.path(), &["sessions", "show", &session, "--json"]).await;
    let value: Value = serde_json::from_str(&stdout(&json_show)).unwrap();
    assert_eq!(value["messages"].as_array().unwrap().len(), 7);
    assert_eq!(value["runs"][0]["execution_trace"][0]["tool"], "test.add");
}

#[tokio::test]
async fn showing_an_unknown_session_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(
        dir.path(),
        &["sessions", "show", "0193a1b2-0000-7000-8000-000000000000"],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("no session 0193a1b2-0000-7000-8000-000000000000"),
        "{}",
        stderr(&output)
    );
    let output = agentloop(dir.path(), &["sessions", "show", "not-a-uuid"]).await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("invalid value 'not-a-uuid'"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn migrate_creates_the_schema_once() {
    let dir = tempfile::tempdir().unwrap();
    let first = agentloop(dir.path(), &["migrate"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    assert!(stdout(&first).contains("applied"), "{}", stdout(&first));
    let second = agentloop(dir.path(), &["migrate"]).await;
    assert_eq!(stdout(&second), "the store is up to date\n");
}

#[tokio::test]
async fn an_unusable_database_url_names_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[store]\nurl = \"mysql://localhost/x\"\n",
    )
    .unwrap();
    let output = agentloop(dir.path(), &["sessions", "list"]).await;
    assert_eq!(output.status.code(), Some(2));
    let error = stderr(&output);
    assert!(
        error.contains("store.url") && error.contains("sqlite://"),
        "{error}"
    );
}
