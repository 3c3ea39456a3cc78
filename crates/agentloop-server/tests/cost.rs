//! Cost and budgets over real HTTP: exact figures from the scripted LLM's usage and a price
//! table (the JSON answer, the `llm_call` events, the run row, the trace, Prometheus), an
//! unpriced model, a request's budget that ends the run with reason `budget` and an answer, and
//! the per-user daily limit (429 `budget_exceeded`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{EventKind, Store};
use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;

/// USD per million tokens of the scripted model.
const PRICES: &str = "[prices.scripted]\ninput = 2.0\noutput = 10.0\ncached_input = 0.5\n";

fn close(actual: &Value, expected: f64) {
    let actual = actual.as_f64().unwrap_or(f64::NAN);
    assert!((actual - expected).abs() < 1e-12, "{actual} != {expected}");
}

async fn run(server: &TestServer, key: &str, body: Value) -> Value {
    let response = server
        .post("/v1/runs", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    response.json().await.unwrap()
}

async fn llm_calls(server: &TestServer, run_id: &str) -> Vec<EventKind> {
    let run_id: Uuid = run_id.parse().unwrap();
    server
        .store
        .events(run_id, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|event| event.kind)
        .filter(|kind| matches!(kind, EventKind::LlmCall { .. }))
        .collect()
}

#[tokio::test]
async fn every_call_and_the_run_cost_exactly_what_the_price_table_says() {
    let script = vec![
        Reply::tool_call("test__echo", json!({"text": "hi"}))
            .with_usage(1000, 100)
            .with_cache(400, 0),
        Reply::text("Done.").with_usage(2000, 50),
    ];
    let server = TestServer::start(script, PRICES).await;
    let key = server.key("ann").await;
    let body = run(&server, &key, json!({"query": "echo hi", "stream": false})).await;
    assert_eq!(body["status"], "completed", "{body}");

    // 600 uncached × 2 + 400 cached × 0.5 + 100 out × 10, then 2000 × 2 + 50 × 10, per million.
    let (first, second) = (0.0024, 0.0045);
    let usage = &body["agent_metadata"]["usage"];
    close(&usage["cost_usd"], first + second);
    assert_eq!(usage["cost_complete"], true);
    assert_eq!(usage["prompt_tokens"], 3000);
    close(
        &body["system_message"]["metadata"]["usage"]["cost_usd"],
        first + second,
    );

    let run_id = body["run_id"].as_str().unwrap();
    let calls = llm_calls(&server, run_id).await;
    assert_eq!(calls.len(), 2, "{calls:?}");
    let costs: Vec<f64> = calls
        .iter()
        .map(|call| match call {
            EventKind::LlmCall {
                cost_usd,
                model,
                purpose,
                ..
            } => {
                assert_eq!(model.as_deref(), Some("scripted"));
                assert_eq!(purpose.as_str(), "step");
                cost_usd.unwrap()
            }
            _ => unreachable!(),
        })
        .collect();
    assert!((costs[0] - first).abs() < 1e-12 && (costs[1] - second).abs() < 1e-12);
    if let EventKind::LlmCall {
        prompt_tokens,
        cached_tokens,
        completion_tokens,
        ..
    } = &calls[0]
    {
        assert_eq!(
            (*prompt_tokens, *cached_tokens, *completion_tokens),
            (1000, 400, 100)
        );
    }

    let row = server
        .store
        .run(run_id.parse().unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!((row.usage.cost_usd.unwrap() - (first + second)).abs() < 1e-12);
    assert!(row.usage.cost_complete);

    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await;
    let text = metrics.unwrap().text().await.unwrap();
    assert!(
        text.contains("agentloop_llm_cost_usd_total{model=\"scripted\"} 0.0069"),
        "{text}"
    );
    assert!(
        text.contains("agentloop_llm_tokens_total{kind=\"prompt\",model=\"scripted\"} 3000"),
        "{text}"
    );
}

#[tokio::test]
async fn a_model_without_a_price_leaves_the_cost_incomplete() {
    let server = TestServer::start(vec![Reply::text("Hi.").with_usage(100, 10)], "").await;
    let key = server.key("ann").await;
    let body = run(&server, &key, json!({"query": "hi", "stream": false})).await;
    let usage = &body["agent_metadata"]["usage"];
    assert_eq!(usage["cost_complete"], false, "{usage}");
    assert_eq!(usage["prompt_tokens"], 100);
    let calls = llm_calls(&server, body["run_id"].as_str().unwrap()).await;
    assert!(
        matches!(&calls[..], [EventKind::LlmCall { cost_usd: None, .. }]),
        "{calls:?}"
    );
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await;
    let text = metrics.unwrap().text().await.unwrap();
    assert!(
        text.contains("agentloop_llm_unpriced_calls_total{model=\"scripted\"} 1"),
        "{text}"
    );
}

#[tokio::test]
async fn a_requests_budget_ends_the_tool_calls_with_reason_budget_and_an_answer() {
    // The first step spends 100 100 tokens: no room for another under the request's 50 000
    // (the configured 10 million is lowered, never raised).
    let script = vec![
        Reply::tool_call("test__echo", json!({"text": "one"})).with_usage(100_000, 100),
        Reply::text("What I found so far: one.").with_usage(2000, 20),
    ];
    let extra = format!("{PRICES}\n[agent.budget]\nmax_tokens = 10000000\n");
    let server = TestServer::start(script, &extra).await;
    let key = server.key("ann").await;
    let body = json!({"query": "echo a lot", "stream": false, "budget": {"max_tokens": 50000}});
    let body = run(&server, &key, body).await;
    assert_eq!(body["status"], "completed", "{body}");
    assert_eq!(body["answer"], "What I found so far: one.");
    assert_eq!(body["agent_metadata"]["iterations"], 1);

    let run_id: Uuid = body["run_id"].as_str().unwrap().parse().unwrap();
    let events = server.store.events(run_id, 0).await.unwrap();
    let reasons: Vec<_> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::ForcedFinalize { reason } => Some(reason.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasons, ["budget"]);
    let row = server.store.run(run_id).await.unwrap().unwrap();
    assert_eq!(
        row.finalize_reason.map(|reason| reason.as_str()),
        Some("budget")
    );
}

#[tokio::test]
async fn a_user_over_the_daily_limit_gets_429_until_midnight_utc() {
    let script = vec![
        Reply::text("First.").with_usage(300, 10),
        Reply::text("For Bob.").with_usage(10, 1),
    ];
    let extra = format!("{PRICES}\n[server]\nuser_daily_tokens = 200\n");
    let server = TestServer::start(script, &extra).await;
    let ann = server.key("ann").await;
    let first = run(&server, &ann, json!({"query": "hi", "stream": false})).await;
    assert_eq!(first["status"], "completed");

    let refused = server
        .post("/v1/runs", &ann)
        .json(&json!({"query": "again", "stream": false}))
        .send()
        .await
        .unwrap();
    let retry_after: u64 = refused.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=86_400).contains(&retry_after), "{retry_after}");
    let (status, error) = error_of(refused).await;
    assert_eq!(
        (status, error["code"].as_str().unwrap()),
        (429, "budget_exceeded")
    );
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("user_daily_tokens") && message.contains("midnight UTC"),
        "{message}"
    );
    assert!(
        error["details"]["resets_at"]
            .as_str()
            .unwrap()
            .ends_with("T00:00:00Z")
    );

    // The API document tells clients of the budget and of the cost.
    let api: Value = server
        .client
        .get(format!("{}/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let schemas = &api["components"]["schemas"];
    assert!(
        schemas["RunBodyBudget"]["properties"]["max_cost_usd"].is_object(),
        "{schemas}"
    );
    assert!(
        schemas["Usage"]["properties"]["cost_complete"].is_object(),
        "{schemas}"
    );
    assert!(api.to_string().contains("budget_exceeded"));

    // Another user's day is their own.
    let bob = server.key("bob").await;
    let theirs = run(&server, &bob, json!({"query": "hi", "stream": false})).await;
    assert_eq!(theirs["answer"], "For Bob.");
}
