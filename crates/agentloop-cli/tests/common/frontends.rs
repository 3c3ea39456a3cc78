//! What the tests of chat frontends share: the scripted model of their scenarios, and the npm
//! packages of their Node.js clients.

use std::{path::Path, process::Command};

use agentloop_test_support::scripted_llm::Reply;
use serde_json::{Value, json};

/// `npm ci` in `tests/{dir}` (of this crate) when `package` is not installed there yet, as
/// `.ci/run` does; the directory.
pub fn npm_package(dir: &str, package: &str) -> std::path::PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    if dir
        .join("node_modules")
        .join(package)
        .join("package.json")
        .is_file()
    {
        return dir;
    }
    let status = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(&dir)
        .status()
        .unwrap_or_else(|error| panic!("cannot run npm (Node.js is needed): {error}"));
    assert!(status.success(), "npm ci in {} failed", dir.display());
    dir
}

fn content(message: &Value) -> &str {
    message["content"].as_str().unwrap_or_default()
}

/// The model of every scenario of the chat frontends' tests (AG-UI, the AI SDK), chosen by the first word of the newest user message; its step
/// is the number of tool results since.
pub fn respond(request: &Value) -> Reply {
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
