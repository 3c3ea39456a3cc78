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

use std::process::Command;

use agentloop_test_support::{config::TestConfig, scripted_llm::ScriptedLlm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ag_ui_client_works_against_agentloop_serve() {
    let scripts = common::frontends::npm_package("ag-ui", "@ag-ui/client");
    let llm = ScriptedLlm::start_with(common::frontends::respond).await;
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
        .arg(scripts.join("agent.mjs"))
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
