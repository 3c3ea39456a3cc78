//! What the tests of chat frontends share: the scripted model of their scenarios, and the npm
//! packages of their Node.js clients.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
};

use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
};
use serde_json::{Value, json};

/// A frontend's Node.js checks: `node {script}` against a real `agentloop serve` whose model
/// answers with `respond`, whose test MCP server logs its calls, with `ask_user` on and
/// `test.record` needing approval; the server's URL in `url_env`, the keys of users ann and bob
/// in `KEY_ANN` and `KEY_BOB`, and `env` beside them.
pub struct NodeChecks<'a> {
    pub script: PathBuf,
    pub respond: fn(&Value) -> Reply,
    pub url_env: &'a str,
    pub env: Vec<(&'a str, String)>,
    /// What the checks are, for the failure message.
    pub what: &'a str,
    /// More of the configuration (TOML), after the rest.
    pub extra: String,
}

/// What the model was asked and which tool calls ran, once the checks passed.
pub struct Checked {
    pub requests: Vec<Value>,
    /// The test MCP server's log of calls, a JSON object per line.
    pub calls: String,
}

impl NodeChecks<'_> {
    /// Runs the checks (printing what they say) and fails the test when they fail.
    pub async fn run(self) -> Checked {
        let llm = ScriptedLlm::start_with(self.respond).await;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.jsonl");
        let config = TestConfig::new(&llm.base_url())
            .mcp_log(&log)
            .extra(&format!(
                "[agent]\nask_user = true\n\n[tools.\"test.record\"]\nneeds_approval = true\n\n{}",
                self.extra
            ));
        super::write_test_config(dir.path(), &config);
        let ann = super::create_key(dir.path(), "ann").await;
        let bob = super::create_key(dir.path(), "bob").await;
        let served = super::Served::start(dir.path());

        let mut script = Command::new("node");
        script
            .arg(&self.script)
            .env(self.url_env, &served.address)
            .env("KEY_ANN", &ann)
            .env("KEY_BOB", &bob)
            .envs(self.env);
        let output = tokio::task::spawn_blocking(move || script.output().unwrap())
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        let stderr = String::from_utf8_lossy(&output.stderr);
        println!("{stdout}");
        assert!(
            output.status.success(),
            "the {} failed ({}):\n{stdout}\n{stderr}",
            self.what,
            output.status
        );
        drop(served);
        Checked {
            requests: llm.requests(),
            calls: std::fs::read_to_string(&log).unwrap_or_default(),
        }
    }
}

impl Checked {
    /// The approved call of `test.record` ran once, the denied one never.
    pub fn assert_approvals_reached_the_tools(&self) {
        let calls = &self.calls;
        let approved = calls.lines().filter(|line| line.contains("approved-note"));
        assert_eq!(approved.count(), 1, "{calls}");
        assert!(!calls.contains("denied-note"), "{calls}");
    }

    /// The model was asked the regenerated question once each time, and never saw the answer it
    /// replaced.
    pub fn assert_a_regenerated_answer_replaced_the_last_exchange(&self) {
        let drafts: Vec<String> = self
            .requests
            .iter()
            .map(Value::to_string)
            .filter(|seen| seen.contains("draft an answer"))
            .collect();
        assert_eq!(drafts.len(), 2, "{drafts:?}");
        let again = &drafts[1];
        assert_eq!(again.matches("draft an answer").count(), 1, "{again}");
        assert!(!again.contains("Draft "), "{again}");
        assert!(again.contains("You asked: hello there"), "{again}");
    }

    /// The model saw the first exchange when the second question came, from the session (not
    /// the client's forged history).
    pub fn assert_the_conversation_went_on_from_the_session(&self) {
        let second = self
            .requests
            .iter()
            .find(|request| request.to_string().contains("again: what did I ask?"))
            .expect("no request for the second question");
        let seen = second.to_string();
        assert!(seen.contains("chain two echoes"), "{seen}");
        assert!(seen.contains("Chained: one, then two."), "{seen}");
        assert!(!seen.contains("forged question"), "{seen}");
    }
}

/// `tests/{dir}` (of this crate) with its npm packages installed (`npm ci` when `package` is not
/// there yet, as `.ci/run` does), or `None` when they cannot be (the test is skipped, saying
/// why: see `requires`).
pub fn npm_package(dir: &str, package: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join(dir);
    agentloop_test_support::requires::npm_packages(&dir, package).then_some(dir)
}

/// A message's text: its content, or the text of its first text part (a question with
/// attachments).
fn content(message: &Value) -> &str {
    message["content"]
        .as_str()
        .or_else(|| {
            let parts = message["content"].as_array()?;
            let text = parts.iter().find(|part| part["type"] == "text")?;
            text["text"].as_str()
        })
        .unwrap_or_default()
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
    // A typed answer (the request asked for one): prose first, the value on the call that
    // asks for it (`response_format`, after an instruction of its own).
    if request["messages"].to_string().contains("file a ticket") {
        return match &request["response_format"] {
            format if format.is_null() => Reply::text("Checkout is down; that is urgent."),
            _ => Reply::text(r#"{"title": "Checkout is down", "priority": 1}"#),
        };
    }
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
    if question.starts_with("draft") {
        // Each draft differs (the model is asked again), and says how often the model was asked
        // the question in this request: a regenerated answer must not see it twice.
        static DRAFTS: AtomicUsize = AtomicUsize::new(0);
        let draft = DRAFTS.fetch_add(1, Ordering::SeqCst) + 1;
        let asked = messages
            .iter()
            .filter(|message| message["role"] == "user")
            .filter(|message| content(message).to_lowercase() == question)
            .count();
        let times = match asked {
            1 => "once".to_string(),
            n => format!("{n} times"),
        };
        return Reply::text(format!("Draft {draft} (asked {times})"));
    }
    if question.starts_with("look") {
        // What the model was given with the question: the types of its images.
        let images: Vec<String> = messages[last_user]["content"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|part| part["type"] == "image_url")
            .filter_map(|part| part["image_url"]["url"].as_str())
            .map(|url| {
                url.split(';')
                    .next()
                    .unwrap_or_default()
                    .replace("data:", "")
            })
            .collect();
        return Reply::text(format!(
            "I see {} image(s): {}",
            images.len(),
            images.join(", ")
        ));
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
