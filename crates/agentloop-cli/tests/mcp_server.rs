//! Agents as MCP servers against the official MCP Python SDK (`tests/mcp-server/client.py`):
//! over streamable HTTP against a real `agentloop serve` (`POST /mcp`: the agents listed, one
//! called with progress, a session continued by its id, an approval and a question answered
//! through elicitation forms, an approval by a follow-up call, a cancelled call's run cancelled,
//! a public sub-agent, a bad key refused with 401) and
//! over stdio against `agentloop mcp-serve` (a typed agent's `structuredContent`, an approval),
//! each with the client's newest protocol and with the initialize handshake; then agentloop's
//! own MCP client using another agentloop's `POST /mcp` as a server of its configuration.
//!
//! The scripted model calls the test MCP server's tools. Needs a Python with `mcp`
//! (`requires::mcp_python`); skipped, saying so, without one (a failure with
//! `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{path::Path, process::Command, time::Duration};

use agentloop_test_support::{
    config::TestConfig,
    requires,
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use serde_json::{Value, json};

/// `ask_user` and an approval of `test.record`, as in the chat frontends' tests, and a public
/// sub-agent.
const AGENTS: &str = "[agent]\nask_user = true\n\n[tools.\"test.record\"]\nneeds_approval = true\n\n\
    [agents.researcher]\ndescription = \"Looks things up\"\n\
    system_prompt = \"You are the researcher.\"\npublic = true\n";

const TYPED: &str = "output_schema = { type = \"object\", properties = { n = { type = \"integer\" } }, required = [\"n\"] }\n";

/// The frontends' model; a typed answer's value on the call that asks for it; and `delegate`,
/// which asks the agent of another agentloop (the MCP server `remote`).
fn respond(request: &Value) -> Reply {
    if !request["response_format"].is_null() {
        return Reply::text(r#"{"n": 5}"#);
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rposition(|message| message["role"] == "user")
        .unwrap_or(0);
    if messages[last_user]["content"]
        .as_str()
        .is_some_and(|question| question.starts_with("book"))
    {
        return match messages[last_user..].iter().find(|m| m["role"] == "tool") {
            None => Reply::tool_call("py__book", json!({"day": "Friday"})),
            Some(result) => Reply::text(format!(
                "Done: {}",
                result["content"].as_str().unwrap_or_default()
            )),
        };
    }
    if messages[last_user]["content"]
        .as_str()
        .is_some_and(|question| question.starts_with("delegate"))
    {
        let results: Vec<&str> = messages[last_user..]
            .iter()
            .filter(|message| message["role"] == "tool")
            .filter_map(|message| message["content"].as_str())
            .collect();
        return match results.as_slice() {
            [] => Reply::tool_call("remote__agentloop", json!({"question": "chain two echoes"})),
            [result, ..] => Reply::text(format!("The other agent said: {result}")),
        };
    }
    common::frontends::respond(request)
}

/// Runs `client.py PHASE` with `env`; its printed lines, and the JSON object of its last one.
fn python(interpreter: &Path, phase: &str, env: &[(&str, String)]) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-server/client.py");
    let output = Command::new(interpreter)
        .arg(&script)
        .arg(phase)
        .envs(env.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the MCP SDK's checks ({phase}, {env:?}) failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    serde_json::from_str(stdout.lines().last().unwrap_or_default()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_python_sdk_calls_the_agents_over_post_mcp() {
    let Some(interpreter) = requires::mcp_python() else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let config = TestConfig::new(&llm.base_url()).mcp_log(&log).extra(AGENTS);
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let served = common::Served::start(dir.path());

    let mut protocols = Vec::new();
    for mode in ["auto", "legacy"] {
        let env = vec![
            ("AGENTLOOP_URL", served.address.clone()),
            ("KEY_ANN", ann.clone()),
            ("MCP_MODE", mode.to_string()),
        ];
        let found = {
            let interpreter = interpreter.clone();
            tokio::task::spawn_blocking(move || python(&interpreter, "http", &env))
                .await
                .unwrap()
        };
        protocols.push(found["protocol"].as_str().unwrap_or_default().to_string());
    }
    // The newest protocol (no server requests: `input_required`) and a handshake's
    // (`elicitation/create` in the call).
    assert_eq!(protocols[0], "2026-07-28", "{protocols:?}");
    assert_ne!(protocols[1], "2026-07-28", "{protocols:?}");

    // Each approved call ran once: two per mode (a form, a follow-up).
    let calls = std::fs::read_to_string(&log).unwrap();
    let approved = calls.lines().filter(|line| line.contains("approved-note"));
    assert_eq!(approved.count(), 4, "{calls}");
    // The session went on from the store: the model saw the first exchange.
    let again = llm
        .requests()
        .into_iter()
        .find(|request| request.to_string().contains("again: what did I ask?"))
        .unwrap();
    assert!(
        again.to_string().contains("Chained: one, then two."),
        "{again}"
    );
    // The sub-agent ran with its own prompt.
    assert!(llm.requests().iter().any(|request| {
        let seen = request.to_string();
        seen.contains("You are the researcher.") && seen.contains("research this")
    }));

    // The cancelled calls' runs were cancelled (after the sleep they waited for): one per mode.
    let client = reqwest::Client::new();
    let sessions: Value = client
        .get(format!("{}/v1/sessions", served.address))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let slow: Vec<String> = sessions["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|session| {
            session["title"]
                .as_str()
                .unwrap_or_default()
                .starts_with("slow run")
        })
        .map(|session| session["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(slow.len(), 2, "{sessions}");
    for id in slow {
        let url = format!("{}/v1/sessions/{id}", served.address);
        eventually(
            "the cancelled call's run to end",
            Duration::from_secs(30),
            || async {
                let details: Value = client
                    .get(&url)
                    .bearer_auth(&ann)
                    .send()
                    .await
                    .ok()?
                    .json()
                    .await
                    .ok()?;
                let status = details["runs"][0]["status"].as_str()?.to_string();
                (status != "running").then_some(())
            },
        )
        .await;
        let details: Value = client
            .get(&url)
            .bearer_auth(&ann)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(details["runs"][0]["status"], "cancelled", "{details}");
    }

    // Without a key: the API's 401, before MCP.
    let response = reqwest::Client::new()
        .post(format!("{}/mcp", served.address))
        .header("Accept", "application/json, text/event-stream")
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 401);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized", "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_python_sdk_calls_a_typed_agent_over_mcp_serve() {
    let Some(interpreter) = requires::mcp_python() else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let agents = AGENTS.replacen("[agent]\n", &format!("[agent]\n{TYPED}"), 1);
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&log)
        .extra(&agents);
    common::write_test_config(dir.path(), &config);

    for mode in ["auto", "legacy"] {
        let env = vec![
            ("AGENTLOOP_BIN", env!("CARGO_BIN_EXE_agentloop").to_string()),
            ("AGENTLOOP_DIR", dir.path().display().to_string()),
            ("MCP_MODE", mode.to_string()),
        ];
        let interpreter = interpreter.clone();
        let found = tokio::task::spawn_blocking(move || python(&interpreter, "stdio", &env))
            .await
            .unwrap();
        // The runs are the user's of `--user`, in the configured store.
        let session = found["session"].as_str().unwrap();
        let shown = common::agentloop(dir.path(), &["sessions", "show", session]).await;
        assert!(shown.status.success(), "{}", common::stderr(&shown));
        assert!(common::stdout(&shown).contains("approve the note"));
    }
    let calls = std::fs::read_to_string(&log).unwrap();
    let approved = calls.lines().filter(|line| line.contains("approved-note"));
    assert_eq!(approved.count(), 2, "{calls}");
    let listed = common::agentloop(dir.path(), &["sessions", "list", "--user", "desk"]).await;
    assert!(common::stdout(&listed).contains("chain two echoes"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentloop_uses_another_agentloops_agents_as_an_mcp_server() {
    let llm = ScriptedLlm::start_with(respond).await;
    let served_dir = tempfile::tempdir().unwrap();
    common::write_test_config(served_dir.path(), &TestConfig::new(&llm.base_url()));
    let key = common::create_key(served_dir.path(), "ann").await;
    let served = common::Served::start(served_dir.path());

    let dir = tempfile::tempdir().unwrap();
    let remote = format!(
        "[mcp_servers.remote]\nurl = \"{}/mcp\"\nheaders = {{ Authorization = \"Bearer {key}\" }}\n\n\
         [tools.\"remote.agentloop\"]\ntimeout_s = 60\n",
        served.address
    );
    common::write_test_config(dir.path(), &TestConfig::new(&llm.base_url()).extra(&remote));
    let listed = common::agentloop(dir.path(), &["tools", "--json"]).await;
    assert!(listed.status.success(), "{}", common::stderr(&listed));
    let listing: Value = serde_json::from_str(&common::stdout(&listed)).unwrap();
    let remote = listing["servers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|server| server["server"] == "remote")
        .unwrap_or_else(|| panic!("no server remote in {listing}"));
    assert_eq!(remote["state"], "up", "{remote}");
    let tool = &remote["tools"][0];
    assert_eq!(tool["name"], "remote.agentloop", "{remote}");
    assert_eq!(tool["input_schema"]["required"], json!(["question"]));

    let run = common::agentloop(dir.path(), &["run", "delegate the echoes"]).await;
    assert!(run.status.success(), "{}", common::stderr(&run));
    assert_eq!(
        common::stdout(&run).trim(),
        "The other agent said: Chained: one, then two."
    );
}

/// A question a tool of the agent asks (the Python SDK's server, `book`, elicitation) reaches
/// the MCP client calling the agent over `POST /mcp`, as a form in its call; the answer goes
/// back to the tool and the run goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tools_question_is_relayed_to_the_mcp_client_and_answered() {
    let Some(interpreter) = requires::mcp_python() else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    let server = format!(
        "[mcp_servers.py]\ncommand = {:?}\nargs = [{script:?}]\nstartup_timeout_s = 60\n",
        interpreter.display().to_string()
    );
    common::write_test_config(dir.path(), &TestConfig::new(&llm.base_url()).extra(&server));
    let ann = common::create_key(dir.path(), "ann").await;
    let served = common::Served::start(dir.path());
    let env = vec![
        ("AGENTLOOP_URL", served.address.clone()),
        ("KEY_ANN", ann.clone()),
    ];
    let found = tokio::task::spawn_blocking(move || python(&interpreter, "relay", &env))
        .await
        .unwrap();
    assert_eq!(found["forms"], json!(["Who is the table on Friday for?"]));
}
