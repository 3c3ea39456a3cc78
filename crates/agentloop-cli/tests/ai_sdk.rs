//! The AI SDK's chat transport against a real server: `agentloop serve` (the built binary) with
//! a scripted LLM and the test MCP server, driven by the `ai` package from npm
//! (`tests/ai-sdk/chat.mjs`: `DefaultChatTransport` and `readUIMessageStream`, as `useChat`
//! uses them). The script runs a chained tool run, continues the chat, is refused with a bad
//! key and on another user's chat, approves and denies a call, answers a clarification question,
//! and reconnects mid-run.
//!
//! Needs Node.js; the npm package `ai` is installed into `tests/ai-sdk/` on first use
//! (`npm ci`), as `.ci/run` does.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::process::Command;

use agentloop_test_support::{config::TestConfig, scripted_llm::ScriptedLlm};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_chat_transport_works_against_agentloop_serve() {
    let scripts = common::frontends::npm_package("ai-sdk", "ai");
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
        .arg(scripts.join("chat.mjs"))
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
        "the AI SDK checks failed ({}):\n{stdout}\n{stderr}",
        output.status
    );

    // The model saw the first exchange when the second message came, from the session (not
    // the client's forged history).
    let requests = llm.requests();
    let second = requests
        .iter()
        .find(|request| request.to_string().contains("again: what did I ask?"))
        .expect("no request for the second message");
    let seen = second.to_string();
    assert!(seen.contains("chain two echoes"), "{seen}");
    assert!(seen.contains("Chained: one, then two."), "{seen}");
    assert!(!seen.contains("forged question"), "{seen}");

    // The approved call ran, the denied one did not.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let approved = calls.lines().filter(|line| line.contains("approved-note"));
    assert_eq!(approved.count(), 1, "{calls}");
    assert!(!calls.contains("denied-note"), "{calls}");
    drop(served);
}
