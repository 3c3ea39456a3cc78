//! The OpenAI-compatible API against a real server: `agentloop serve` (the built binary) with a
//! scripted LLM and the test MCP server, driven by the official `openai` Python SDK
//! (`tests/openai/client.py`): Chat Completions with and without a stream, a follow-up that
//! resends the history, a client tool's round trip, a public sub-agent as the model, the
//! Responses API (previous_response_id, a stream, another user's id), models.list, the errors;
//! then a background response whose server is killed with `kill -9` while the model thinks,
//! polled to its end after the restart (the run adopted).
//!
//! Needs Python with the `openai` package (the virtual environment `.ci/run` makes); skipped,
//! saying so, without it (a failure with `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    path::Path,
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use agentloop_test_support::{
    config::TestConfig,
    requires,
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use serde_json::Value;

/// A short lease, so that the killed instance's run is adopted at the restart.
const SERVER: &str = "[server]\nrun_lease_s = 1\nshutdown_grace_s = 5\n\n\
    [agents.researcher]\ndescription = \"Looks things up\"\n\
    system_prompt = \"You are the researcher.\"\npublic = true\n\n\
    [agents.helper]\ndescription = \"Not offered as a model\"\n";

/// The frontends' model, and a background job whose first answer never comes (the server is
/// killed meanwhile): asked again after the restart, it answers.
fn respond(request: &Value) -> Reply {
    static BACKGROUND: AtomicUsize = AtomicUsize::new(0);
    let seen = request["messages"].to_string();
    if seen.contains("background job") {
        return match BACKGROUND.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::text("never delivered").with_delay(Duration::from_secs(120)),
            _ => Reply::text("Background answer after the restart."),
        };
    }
    // A typed answer (`response_format`): prose on the turn that may call tools, the value
    // on the call that carries the format (never on a turn with tools).
    if seen.contains("file a ticket") {
        return match &request["response_format"] {
            format if format.is_null() => Reply::text("Checkout is down; that is urgent."),
            _ if request["tools"]
                .as_array()
                .is_some_and(|tools| !tools.is_empty()) =>
            {
                Reply::text("a format on a turn with tools")
            }
            _ => Reply::text(r#"{"title": "Checkout is down", "priority": 1}"#),
        };
    }
    common::frontends::respond(request)
}

fn python(python: &Path, phase: &str, address: &str, keys: &[(&str, &str)]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/openai/client.py");
    let mut command = Command::new(python);
    command
        .arg(&script)
        .arg(phase)
        .env("AGENTLOOP_URL", address);
    for (name, value) in keys {
        command.env(name, value);
    }
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the OpenAI SDK's checks ({phase}) failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

async fn get(address: &str, key: &str, path: &str) -> Value {
    let response = reqwest::Client::new()
        .get(format!("{address}{path}"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    assert!(
        response.status().is_success(),
        "{path}: {}",
        response.status()
    );
    response.json().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_sdk_works_against_agentloop_serve_and_a_background_response_survives_kill_9() {
    let Some(interpreter) = requires::python_with("openai") else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&dir.path().join("calls.jsonl"))
        .extra(SERVER);
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let bob = common::create_key(dir.path(), "bob").await;
    let keys = [("KEY_ANN", ann.as_str()), ("KEY_BOB", bob.as_str())];

    let mut first = common::Served::start(dir.path());
    let address = first.address.clone();
    let interpreter_main = interpreter.clone();
    let out = tokio::task::spawn_blocking({
        let keys: Vec<(String, String)> = keys
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move || {
            let keys: Vec<(&str, &str)> =
                keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
            python(&interpreter_main, "main", &address, &keys)
        }
    })
    .await
    .unwrap();
    let background: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let response_id = background["background"].as_str().unwrap().to_string();

    // The resent history continued the stored session: each question in it once.
    let sessions = get(&first.address, &ann, "/v1/sessions").await;
    let session = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|session| {
            session["title"]
                .as_str()
                .unwrap()
                .starts_with("chain two echoes")
        })
        .expect("the chat's session")
        .clone();
    let details = get(
        &first.address,
        &ann,
        &format!("/v1/sessions/{}", session["id"].as_str().unwrap()),
    )
    .await;
    let questions: Vec<&str> = details["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .filter_map(|message| message["content"].as_str())
        .collect();
    assert_eq!(
        questions,
        ["chain two echoes", "again: what did I ask?"],
        "{details}"
    );
    // The sub-agent ran with its own prompt.
    assert!(llm.requests().iter().any(|request| {
        let seen = request.to_string();
        seen.contains("You are the researcher.") && seen.contains("research this")
    }));

    // Killed while the model thinks about the background job; the restart adopts the run.
    eventually(
        "the background job to reach the model",
        Duration::from_secs(20),
        || async {
            llm.requests()
                .iter()
                .any(|request| request.to_string().contains("background job"))
                .then_some(())
        },
    )
    .await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let second = common::Served::start(dir.path());
    let address = second.address.clone();
    let keys: Vec<(String, String)> = keys
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    tokio::task::spawn_blocking(move || {
        let mut keys: Vec<(&str, &str)> =
            keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        keys.push(("RESPONSE_ID", response_id.as_str()));
        python(&interpreter, "after", &address, &keys)
    })
    .await
    .unwrap();
    drop(second);
}
