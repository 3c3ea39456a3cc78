//! The AG-UI protocol against a real server: `agentloop serve` (the built binary) with a
//! scripted LLM and the test MCP server, driven by `@ag-ui/client` from npm
//! (`tests/ag-ui/agent.mjs`: `HttpAgent.runAgent()`, which checks the event sequence itself).
//! The script runs a chained tool run, continues the thread, is refused with a bad key and on
//! another user's thread, approves and denies a call through interrupts, answers a question,
//! runs a frontend tool, and re-attaches to a run in progress with the same runId.
//!
//! Needs Node.js; `@ag-ui/client` is installed into `tests/ag-ui/` on first use (`npm ci`), as
//! `.ci/run` does. Skipped, saying so, without them (a failure with `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::requires;
use common::frontends::NodeChecks;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ag_ui_client_works_against_agentloop_serve() {
    if !requires::node() {
        return;
    }
    let Some(scripts) = common::frontends::npm_package("ag-ui", "@ag-ui/client") else {
        return;
    };
    let checked = NodeChecks {
        script: scripts.join("agent.mjs"),
        respond: common::frontends::respond,
        url_env: "AGENTLOOP_URL",
        env: Vec::new(),
        what: "AG-UI checks",
        extra: String::new(),
    }
    .run()
    .await;
    checked.assert_the_conversation_went_on_from_the_session();
    checked.assert_approvals_reached_the_tools();
    let requests = &checked.requests;
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
}
