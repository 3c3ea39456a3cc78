//! First run and testing without a model: `agentloop demo` (offline, real tools and store),
//! `demo --serve` answering over HTTP with the key it prints, and cassettes (`run --record`,
//! `--replay`) that replay a session offline, refuse a changed request and hold no secret.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::io::BufRead;

use common::{agentloop, command, stderr, stdout, write_config};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};

fn events(output: &std::process::Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect()
}

#[tokio::test]
async fn the_demo_runs_offline_with_tool_calls_that_succeed() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(dir.path(), &["demo", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let events = events(&output);
    let executed: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["type"] == "tool_executed")
        .map(|e| (e["tool"].as_str().unwrap(), e["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        executed,
        [("demo.get-sum", "success"), ("demo.echo", "success")]
    );
    let results: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_executed")
        .map(|e| e["result"].as_str().unwrap_or_default())
        .collect();
    assert!(results[0].contains("42"), "{results:?}");
    assert!(results[1].contains("2 + 40 = 42"), "{results:?}");
    let answer: String = events
        .iter()
        .filter(|e| e["type"] == "final_response")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert!(answer.starts_with("2 + 40 = 42."), "{answer}");
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["status"], "completed");
    // The real store, where the demo says it is.
    assert!(dir.path().join("agentloop-demo.db").exists());
    let said = stderr(&output);
    assert!(said.contains("the model is scripted"), "{said}");
    assert!(said.contains("./agentloop-demo.db"), "{said}");
    assert!(
        said.contains("OPENAI_API_KEY=sk-... agentloop --config examples/agentloop.toml run"),
        "{said}"
    );
}

#[tokio::test]
async fn demo_serve_answers_a_run_over_http_with_the_printed_key() {
    let dir = tempfile::tempdir().unwrap();
    // The address from AGENTLOOP_LISTEN, as the busy-port error recommends.
    let mut child = command(dir.path())
        .args(["demo", "--serve"])
        .env("AGENTLOOP_LISTEN", "127.0.0.1:0")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    // The banner's lines until the key; the rest is read too, so that the pipe stays open.
    let (banner, received) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let _ = banner.send(line.unwrap());
        }
    });
    let lines = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        while let Ok(line) = received.recv() {
            let last = line.trim_start().starts_with("API key:");
            lines.push(line);
            if last {
                break;
            }
        }
        lines
    })
    .await
    .unwrap();
    let value = |label: &str| {
        lines
            .iter()
            .find_map(|line| line.trim_start().strip_prefix(label))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no {label} in {lines:?}"))
            .to_string()
    };
    let (panel, api, key) = (value("panel:"), value("API:"), value("API key:"));
    assert!(
        panel.starts_with("http://127.0.0.1:") && panel.ends_with('/'),
        "{panel}"
    );
    assert!(
        !panel.ends_with(":8080/"),
        "AGENTLOOP_LISTEN was ignored: {panel}"
    );
    assert_eq!(api, format!("{}v1/runs", panel));

    // The panel's sign-in tells a demo user where the demo's key is, not how to make one in
    // another store.
    let page = reqwest::get(&panel).await.unwrap().text().await.unwrap();
    assert!(
        page.contains(
            "This is agentloop demo --serve: sign in with the key on its &quot;API key:&quot; line"
        ),
        "{page}"
    );
    assert!(!page.contains("agentloop keys create"), "{page}");

    let client = reqwest::Client::new();
    let body = json!({"query": "Add 2 and 40, then echo the result.", "stream": false});
    let refused = client.post(&api).json(&body).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let answered = client
        .post(&api)
        .bearer_auth(&key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(answered.status(), 200);
    let run: Value = answered.json().await.unwrap();
    assert_eq!(run["status"], "completed", "{run}");
    assert!(
        run["answer"].as_str().unwrap().starts_with("2 + 40 = 42."),
        "{run}"
    );
    let trace = &run["agent_metadata"]["execution_trace"];
    let statuses: Vec<&str> = trace
        .as_array()
        .unwrap()
        .iter()
        .map(|record| record["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["success", "success"], "{run}");

    let terminated = std::process::Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(terminated.success());
    let status = tokio::task::spawn_blocking(move || child.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
}

/// `demo --config` is refused (the demo reads none), and the line that ends a demo run is a
/// command that continues its session: `agentloop demo --session ID`, which runs the demo's
/// question again in that session.
#[tokio::test]
async fn demo_refuses_a_config_and_its_session_hint_is_a_command_that_works() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[llm]\nmodel = \"mine\"\n",
    )
    .unwrap();
    for args in [
        &["demo", "--config", "agentloop.toml"][..],
        &["--config", "agentloop.toml", "demo", "--serve"],
    ] {
        let refused = agentloop(dir.path(), args).await;
        assert_eq!(refused.status.code(), Some(2), "{args:?}");
        let said = stderr(&refused);
        assert!(
            said.contains("agentloop demo reads no configuration file"),
            "{said}"
        );
        assert!(
            said.contains("agentloop --config agentloop.toml run"),
            "{said}"
        );
        assert!(!dir.path().join("agentloop-demo.db").exists());
    }

    let first = agentloop(dir.path(), &["demo"]).await;
    assert!(first.status.success(), "{}", stderr(&first));
    let said = stderr(&first);
    let hint = said
        .lines()
        .find_map(|line| line.split_once("(continue it with: "))
        .map(|(_, command)| command.trim_end_matches(')').to_string())
        .unwrap_or_else(|| panic!("no hint in {said}"));
    let words: Vec<&str> = hint.split_whitespace().collect();
    assert_eq!(words[..3], ["agentloop", "demo", "--session"], "{hint}");
    let session = words[3];
    let shown = sessions_show(dir.path(), session).await;
    assert!(
        shown.contains(", 1 run\n"),
        "one run, in the singular: {shown}"
    );

    let second = agentloop(dir.path(), &words[1..]).await;
    assert!(second.status.success(), "{}", stderr(&second));
    assert!(
        stdout(&second).starts_with("2 + 40 = 42."),
        "{}",
        stdout(&second)
    );
    let shown = sessions_show(dir.path(), session).await;
    assert!(shown.contains(", 2 runs\n"), "{shown}");
}

/// `agentloop sessions show ID` on the demo's store.
async fn sessions_show(dir: &std::path::Path, session: &str) -> String {
    let mut show = command(dir);
    show.args(["sessions", "show", session])
        .env("DATABASE_URL", "sqlite://agentloop-demo.db");
    let output = tokio::task::spawn_blocking(move || show.output().unwrap())
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    stdout(&output)
}

/// What must be the same when a session is replayed: the events without their ids and times.
fn replayed_part(events: &[Value]) -> Vec<Value> {
    events
        .iter()
        .map(|event| {
            let mut event = event.clone();
            let object = event.as_object_mut().unwrap();
            for key in [
                "run_id",
                "session_id",
                "message_id",
                "duration_ms",
                "timestamp",
                "created_at",
                "at",
            ] {
                object.remove(key);
            }
            event
        })
        .collect()
}

const API_KEY: &str = "sk-test-do-not-write-me-0123456789";

#[tokio::test]
async fn a_recorded_session_replays_offline_and_a_changed_prompt_fails_the_replay() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 40, "b": 2})).with_usage(30, 5),
        Reply::text("The answer is 42.").with_usage(40, 6),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let cassette = dir.path().join("session.cassette.json");
    let mut record = command(dir.path());
    record.env("OPENAI_API_KEY", API_KEY).args([
        "run",
        "--json",
        "--record",
        "session.cassette.json",
        "What is 40 + 2?",
    ]);
    let recorded = tokio::task::spawn_blocking(move || record.output().unwrap())
        .await
        .unwrap();
    assert!(recorded.status.success(), "{}", stderr(&recorded));
    // The key was sent: a cassette that kept headers would hold it.
    assert_eq!(
        llm.request_header("authorization")[0].as_deref(),
        Some(format!("Bearer {API_KEY}").as_str())
    );
    drop(llm); // no LLM from here on

    let text = std::fs::read_to_string(&cassette).unwrap();
    assert!(
        !text.contains(API_KEY),
        "the cassette holds the key:\n{text}"
    );
    assert!(!text.to_lowercase().contains("authorization"), "{text}");
    let saved: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(saved["exchanges"].as_array().unwrap().len(), 2, "{text}");

    let replayed = agentloop(
        dir.path(),
        &[
            "run",
            "--json",
            "--replay",
            "session.cassette.json",
            "What is 40 + 2?",
        ],
    )
    .await;
    assert!(replayed.status.success(), "{}", stderr(&replayed));
    let (before, after) = (events(&recorded), events(&replayed));
    assert_eq!(replayed_part(&before), replayed_part(&after));
    let answer: String = after
        .iter()
        .filter(|e| e["type"] == "final_response")
        .map(|e| e["delta"].as_str().unwrap())
        .collect();
    assert_eq!(answer, "The answer is 42.");

    let changed = agentloop(
        dir.path(),
        &[
            "run",
            "--replay",
            "session.cassette.json",
            "What is 40 + 3?",
        ],
    )
    .await;
    assert_eq!(changed.status.code(), Some(1), "{}", stderr(&changed));
    let message = stderr(&changed);
    assert!(
        message.contains("the request differs from the recording"),
        "{message}"
    );
    assert!(
        message.contains(
            "at $.messages[1].content: recorded \"What is 40 + 2?\", got \"What is 40 + 3?\""
        ),
        "{message}"
    );
}

#[tokio::test]
async fn record_and_replay_together_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(
        dir.path(),
        &["run", "--record", "a.json", "--replay", "b.json", "hi"],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(stderr(&output).contains("--replay"), "{}", stderr(&output));
}
