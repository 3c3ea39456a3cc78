//! The web panel in a real browser: `agentloop serve` (the built binary) with a scripted LLM and
//! the test MCP server, driven by Playwright (`tests/panel/panel.mjs`) in the machine's
//! Chromium. The script signs in, runs, reloads mid-run, approves and denies, answers a
//! clarification, stops a run, attaches an image (sent with the question, shown again from the
//! store when the session is opened), checks that a second user sees nothing of the first, that model
//! output with `<script>` or `<img onerror>` stays inert and that nothing is logged as an error;
//! it keeps screenshots of the main states in `target/panel-screenshots/`.
//!
//! Needs Chromium (`apt-get install -y chromium` on Debian; `AGENTLOOP_CHROMIUM` names another
//! binary) and Node.js; the npm package `playwright-core` is installed into `tests/panel/` on
//! first use (`npm ci`), as `.ci/run` does. Skipped, saying so, without them (a failure with
//! `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::{Path, PathBuf};

use agentloop_test_support::{requires, scripted_llm::Reply};
use common::frontends::NodeChecks;
use serde_json::{Value, json};

/// The model of every scenario, chosen by the first words of the session's question.
fn respond(request: &Value) -> Reply {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let first_user = messages
        .iter()
        .find(|message| message["role"] == "user")
        .cloned()
        .unwrap_or_default();
    // Its text: the content, or the text part of a question with attachments.
    let question = first_user["content"]
        .as_str()
        .or_else(|| first_user["content"][0]["text"].as_str())
        .unwrap_or_default()
        .to_lowercase();
    let results: Vec<&str> = messages
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default())
        .collect();
    let step = results.len();
    let sleep = |ms: u64| Reply::tool_call("test__sleep", json!({"ms": ms}));
    let echo = |text: &str| Reply::tool_call("test__echo", json!({"text": text}));
    let record = |note: &str| Reply::tool_call("test__record", json!({"note": note}));
    // A typed answer: prose, then the value on the call that asks for it.
    if question.starts_with("file a ticket") {
        return match &request["response_format"] {
            format if format.is_null() => Reply::text("Checkout is down; that is urgent."),
            _ => Reply::text(r#"{"title": "Checkout is down", "priority": 1}"#),
        };
    }
    if question.starts_with("slow") {
        return match step {
            0 => echo("first step").with_text("Let me look that up."),
            1 => sleep(1500),
            _ => Reply::text("All **done**: echoed, then slept.\n\n- one\n- two"),
        };
    }
    if question.starts_with("reload") {
        return match step {
            0 => echo("before the reload"),
            1 => sleep(2500),
            _ => Reply::text("Finished after the reload."),
        };
    }
    if question.starts_with("approve") || question.starts_with("deny") {
        let note = if question.starts_with("approve") {
            "approved-note"
        } else {
            "denied-note"
        };
        return match step {
            0 => record(note),
            _ => Reply::text(format!("The tool said: {}", results[0])),
        };
    }
    if question.starts_with("clarify") {
        return match step {
            0 => Reply::tool_call(
                "ask_user",
                json!({"question": "Which project do you mean?"}),
            ),
            _ => Reply::text(format!("Working on it. You told me: {}", results[0])),
        };
    }
    if question.starts_with("book") {
        return match step {
            0 => Reply::tool_call("py__book", json!({"day": "Friday"})),
            _ => Reply::text(format!("The tool said: {}", results[0])),
        };
    }
    if question.starts_with("stop") {
        return sleep(2000);
    }
    if question.starts_with("steer") {
        // The answer quotes the last user message the model was sent: a steered one, if any.
        let last_user = messages
            .iter()
            .rev()
            .find(|message| message["role"] == "user")
            .and_then(|message| message["content"].as_str())
            .unwrap_or_default()
            .to_string();
        return match step {
            0 => sleep(2000),
            _ => Reply::text(format!("Steered by: {last_user}")),
        };
    }
    if question.starts_with("look") {
        let images: Vec<&str> = first_user["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|part| part["image_url"]["url"].as_str())
            .map(|url| {
                let kind = url.split(';').next().unwrap_or_default();
                kind.strip_prefix("data:").unwrap_or(kind)
            })
            .collect();
        return Reply::text(format!(
            "I see {} image(s): {}",
            images.len(),
            images.join(", ")
        ));
    }
    if question.starts_with("markup") {
        return Reply::text(
            "Inert: <script>window.__pwned = 1; console.error('pwned')</script> and \
             <img src=\"x\" onerror=\"window.__pwned = 2\"> and [a link](javascript:window.__pwned=3) \
             with `code` and **bold**.",
        );
    }
    Reply::text(format!("You asked: {question}"))
}

fn panel_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/panel")
}

/// Where the screenshots go: `target/panel-screenshots/`.
fn screenshots() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("panel-screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_panel_works_in_a_real_browser() {
    if !requires::node() {
        return;
    }
    let Some(chromium) = requires::chromium() else {
        return;
    };
    if common::frontends::npm_package("panel", "playwright-core").is_none() {
        return;
    }
    // The Python SDK's server asks the form's question (elicitation).
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    let checked = NodeChecks {
        script: panel_dir().join("panel.mjs"),
        respond,
        url_env: "PANEL_URL",
        env: vec![
            ("CHROMIUM", chromium.display().to_string()),
            ("SCREENSHOTS", screenshots().display().to_string()),
        ],
        what: "browser tests",
        extra: format!(
            "[mcp_servers.py]\ncommand = {python:?}\nargs = [{script:?}]\nstartup_timeout_s = 60\n"
        ),
    }
    .run()
    .await;
    // What the browser did reached the tools.
    checked.assert_approvals_reached_the_tools();
}
