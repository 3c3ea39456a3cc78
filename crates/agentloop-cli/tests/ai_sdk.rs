//! The AI SDK's chat transport against a real server: `agentloop serve` (the built binary) with
//! a scripted LLM and the test MCP server, driven by the `ai` package from npm
//! (`tests/ai-sdk/chat.mjs`: `DefaultChatTransport` and `readUIMessageStream`, as `useChat`
//! uses them). The script runs a chained tool run, continues the chat, is refused with a bad
//! key and on another user's chat, approves and denies a call, answers a clarification question,
//! reconnects mid-run, and regenerates answers (`AbstractChat`, as `useChat` does).
//!
//! Needs Node.js 22 or later (the `ai` package wants it); the npm package `ai` is installed
//! into `tests/ai-sdk/` on first use (`npm ci`), as `.ci/run` does. Skipped, saying so, without
//! them (a failure with `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::requires;
use common::frontends::NodeChecks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ai_sdk_chat_transport_works_against_agentloop_serve() {
    if !requires::node_22() {
        return;
    }
    let Some(scripts) = common::frontends::npm_package("ai-sdk", "ai") else {
        return;
    };
    let checked = NodeChecks {
        script: scripts.join("chat.mjs"),
        respond: common::frontends::respond,
        url_env: "AGENTLOOP_URL",
        env: Vec::new(),
        what: "AI SDK checks",
        extra: String::new(),
    }
    .run()
    .await;
    checked.assert_the_conversation_went_on_from_the_session();
    checked.assert_approvals_reached_the_tools();
    checked.assert_a_regenerated_answer_replaced_the_last_exchange();
}
