//! The service routes over real HTTP: health answers that tell states and nothing a stranger
//! should read, and metrics whose every family a fresh server lists.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::wait::eventually;
use common::*;
use serde_json::{Value, json};

/// An MCP server that prints a connection string with its password to stderr and exits, and
/// is not started again.
const LEAKY_SERVER: &str = "[mcp_servers.crm]\ncommand = \"sh\"\nargs = [\"-c\", \
    \"echo FATAL: cannot connect to postgres://crm:hunter2@10.0.0.5/crm >&2; exit 1\"]\n\
    max_restarts = 0\n";

/// `/readyz` and `/healthz` need no key, so they tell each source's state and never what a
/// failed MCP server printed (with a key neither: a key is a user's, not the operator's).
#[tokio::test]
async fn health_answers_show_a_failed_servers_state_and_nothing_it_printed() {
    let server = TestServer::start(vec![], LEAKY_SERVER).await;
    let key = server.key("ann").await;
    let crm = eventually(
        "the crm server is down",
        Duration::from_secs(20),
        || async {
            let body: Value = server
                .client
                .get(format!("{}/readyz", server.url))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let sources = body["tool_sources"].as_array().cloned().unwrap_or_default();
            sources
                .into_iter()
                .find(|source| source["name"] == "crm" && source["state"] == "down")
        },
    )
    .await;
    assert_eq!(crm["transport"], "stdio");
    assert_eq!(crm["tools"], 0);
    for path in ["/readyz", "/healthz"] {
        for with_key in [false, true] {
            let mut request = server.client.get(format!("{}{path}", server.url));
            if with_key {
                request = request.bearer_auth(&key);
            }
            let response = request.send().await.unwrap();
            assert_eq!(
                response.status(),
                200,
                "{path}: a source down is not unready"
            );
            let text = response.text().await.unwrap();
            for secret in [
                "hunter2",
                "10.0.0.5",
                "postgres://",
                "FATAL",
                "cannot connect",
            ] {
                assert!(!text.contains(secret), "{path} shows {secret:?}: {text}");
            }
            let body: Value = serde_json::from_str(&text).unwrap();
            assert_eq!(body["store"], json!({"status": "ok"}), "{text}");
        }
    }
    server.shutdown().await;
}

/// A fresh server lists every metric family with its HELP and TYPE, before any run used it.
#[tokio::test]
async fn a_fresh_server_lists_every_metric_family_with_help_and_type() {
    let server = TestServer::start(vec![], "").await;
    let text = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for (family, kind) in [
        ("agentloop_runs_total", "counter"),
        ("agentloop_runs_active", "gauge"),
        ("agentloop_llm_call_duration_seconds", "histogram"),
        ("agentloop_tool_call_duration_seconds", "histogram"),
        ("agentloop_llm_tokens_total", "counter"),
        ("agentloop_llm_cost_usd_total", "counter"),
        ("agentloop_llm_unpriced_calls_total", "counter"),
        ("agentloop_live_event_bytes", "gauge"),
    ] {
        assert!(
            text.contains(&format!("# HELP {family} ")),
            "{family}: {text}"
        );
        assert!(
            text.contains(&format!("# TYPE {family} {kind}\n")),
            "{family}: {text}"
        );
    }
    server.shutdown().await;
}
