//! The AG-UI protocol against a real server: `agentloop serve` (the built binary) with a
//! scripted LLM and the test MCP server, driven by `@ag-ui/client` from npm
//! (`tests/ag-ui/agent.mjs`: `HttpAgent.runAgent()`, which checks the event sequence itself).
//! The script runs a chained tool run, continues the thread, is refused with a bad key and on
//! another user's thread, approves and denies a call through interrupts, answers a question,
//! runs a frontend tool, and re-attaches to a run in progress with the same runId.
//!
//! Needs Node.js; `@ag-ui/client` is installed into `tests/ag-ui/` on first use (`npm ci`), as
//! `.ci/run` does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
};
use serde_json::{Value, json};

fn content(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// The model of every scenario, chosen by the first word of the newest user message; its step
/// is the number of tool results since.
fn respond(request: &Value) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rposition(|message| message["role"] == "user")
        .unwrap_or(0);
    let question = content(&messages[last_user]).to_lowercase();
    let results: Vec<&str> = messages[last_user..]
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(content)
        .collect();
    let step = results.len();
    let echo = |text: &str| Reply::tool_call("test__echo", json!({"text": text}));
    if question.starts_with("chain") {
        return match step {
            0 => echo("one").with_text("Looking it up."),
            1 => echo("two"),
            _ => Reply::text("Chained: one, then two."),
        };
    }
    if question.starts_with("again") {
        let earlier = messages[..last_user]
            .iter()
            .filter(|message| message["role"] == "user")
            .map(content)
            .collect::<Vec<_>>()
            .join(" | ");
        return Reply::text(format!("Earlier you asked: {earlier}"));
    }
    if question.starts_with("approve") || question.starts_with("deny") {
        let note = if question.starts_with("approve") {
            "approved-note"
        } else {
            "denied-note"
        };
        return match step {
            0 => Reply::tool_call("test__record", json!({"note": note})),
            _ => Reply::text(format!("The tool said: {}", results[0])),
        };
    }
    if question.starts_with("clarify") {
        return match step {
            0 => Reply::tool_call(
                "ask_user",
                json!({"question": "Which project do you mean?"}),
            ),
            _ => Reply::text(format!("You told me: {}", results[0])),
        };
    }
    if question.starts_with("frontend") {
        return match step {
            0 => Reply::tool_call("pick_color", json!({"hint": "warm"})),
            _ => Reply::text(format!("The page picked: {}", results[0])),
        };
    }
    if question.starts_with("slow") {
        return match step {
            0 => echo("first step"),
            1 => Reply::tool_call("test__sleep", json!({"ms": 3000})),
            _ => Reply::text("Finished the slow run."),
        };
    }
    Reply::text(format!("You asked: {question}"))
}

fn script_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/ag-ui")
}

/// `npm ci` in tests/ag-ui when `@ag-ui/client` is not installed yet.
fn install_client() {
    let dir = script_dir();
    if dir
        .join("node_modules/@ag-ui/client/package.json")
        .is_file()
    {
        return;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .unwrap_or_else(|error| panic!("cannot run npm (Node.js is needed): {error}"));
    assert!(status.success(), "npm ci in {} failed", dir.display());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ag_ui_client_works_against_agentloop_serve() {
    install_client();
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&log)
        .extra("[agent]\nask_user = true\n\n[tools.\"test.record\"]\nneeds_approval = true\n");
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let bob = common::create_key(dir.path(), "bob").await;
    let served = common::Served::start(dir.path());

    let mut script = Command::new("node");
    script
        .arg(script_dir().join("agent.mjs"))
        .env("AGENTLOOP_URL", &served.address)
        .env("KEY_ANN", &ann)
        .env("KEY_BOB", &bob);
    let output = tokio::task::spawn_blocking(move || script.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the AG-UI checks failed ({}):\n{stdout}\n{stderr}",
        output.status
    );

    // The model saw the first exchange when the second request came, from the session (not
    // the client's forged history).
    let requests = llm.requests();
    let second = requests
        .iter()
        .find(|request| request.to_string().contains("again: what did I ask?"))
        .expect("no request for the second request");
    let seen = second.to_string();
    assert!(seen.contains("chain two echoes"), "{seen}");
    assert!(seen.contains("Chained: one, then two."), "{seen}");
    assert!(!seen.contains("forged question"), "{seen}");

    // The approved call ran, the denied one did not.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let approved = calls.lines().filter(|line| line.contains("approved-note"));
    assert_eq!(approved.count(), 1, "{calls}");
    assert!(!calls.contains("denied-note"), "{calls}");
    // The frontend tool was offered to the model with the client's schema, and its result
    // reached the model as the call's output.
    let offered = requests
        .iter()
        .find(|request| request.to_string().contains("frontend: pick a color"))
        .expect("no request for the frontend tool");
    let tools = offered["tools"].to_string();
    assert!(tools.contains("pick_color"), "{tools}");
    assert!(tools.contains("Lets the user pick a color"), "{tools}");
    assert!(
        !requests
            .iter()
            .any(|request| request.to_string().contains("chain two echoes")
                && request["tools"].to_string().contains("pick_color")),
        "frontend tools belong to the run that declared them"
    );
    drop(served);
}
