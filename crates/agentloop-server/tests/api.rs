//! The HTTP API of DESIGN §5 and §6 over real HTTP: SSE event by event, JSON mode, failed runs,
//! reattach, cancel, history, graceful shutdown (refusals and isolation: `refusals.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::{RunStatus, Store};
use agentloop_test_support::{mcp::wait_for_call, scripted_llm::Reply};
use common::*;
use serde_json::{Value, json};

fn echo_then_answer() -> Vec<Reply> {
    vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::text("The echo said hello."),
    ]
}

#[tokio::test]
async fn a_streamed_run_sends_the_design_events_in_order() {
    let server = TestServer::start(echo_then_answer(), "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "Echo hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let headers = response.headers().clone();
    assert_eq!(headers["content-type"], "text/event-stream");
    assert!(
        headers["cache-control"]
            .to_str()
            .unwrap()
            .contains("no-cache")
    );
    assert_eq!(headers["x-accel-buffering"], "no");

    let events = read_sse(response).await;
    assert_eq!(
        kinds(&events),
        [
            "run_started",
            "thinking",
            "llm_call",
            "tool_selected",
            "tool_executed",
            "thinking",
            "llm_call",
            "final_response",
            "done"
        ]
    );
    let call = events.iter().find(|e| e.event == "llm_call").unwrap();
    assert_eq!(call.data["purpose"], "step");
    assert_eq!(call.data["model"], "scripted");
    assert_eq!(call.data["cost_usd"], Value::Null, "no price for the model");
    let done = events.iter().find(|e| e.event == "done").unwrap();
    assert_eq!(done.data["usage"]["cost_complete"], false);
    let run_id = events[0].data["run_id"].clone();
    for (i, event) in events.iter().enumerate() {
        assert_eq!(
            event.data["type"],
            event.event.as_str(),
            "event: is the type"
        );
        assert_eq!(
            event.id,
            (i + 1).to_string(),
            "id: is the seq, from 1 without gaps"
        );
        assert_eq!(event.data["seq"], i + 1);
        assert_eq!(event.data["run_id"], run_id);
    }
    let selected = events.iter().find(|e| e.event == "tool_selected").unwrap();
    assert_eq!(selected.data["tool"], "test.echo");
    assert_eq!(selected.data["arguments"], json!({"text": "hello"}));
    assert_eq!(selected.data["iteration"], 1);
    let executed = events.iter().find(|e| e.event == "tool_executed").unwrap();
    assert_eq!(executed.data["status"], "success");
    assert_eq!(executed.data["result"], "hello");
    assert!(executed.data["duration_ms"].is_u64());
    let done = &events.last().unwrap().data;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["iterations"], 2);
    assert_eq!(done["tools_used"], 1);
    assert!(done["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    assert!(done["message_id"].is_string());
    assert_eq!(done["should_refresh"], false);
    assert!(events[0].data["session_id"].is_string());
    server.shutdown().await;
}

#[tokio::test]
async fn the_json_mode_answers_the_design_object() {
    let mut script = echo_then_answer();
    script.extend(echo_then_answer());
    let server = TestServer::start(script, "").await;
    let key = server.key("ann").await;
    for path in ["/v1/runs", "/copilot-agent"] {
        let response = server
            .post(path, &key)
            .json(&json!({"query": "Echo hello", "stream": false}))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        assert!(
            response.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("application/json")
        );
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["status"], "completed", "{body}");
        assert_eq!(body["answer"], "The echo said hello.");
        assert!(body["run_id"].is_string() && body["session_id"].is_string());
        assert_eq!(body["user_message"]["content"], "Echo hello");
        assert_eq!(body["user_message"]["role"], "user");
        assert_eq!(body["assistant_message"]["content"], "The echo said hello.");
        assert_eq!(body["system_message"]["role"], "system");
        assert_eq!(
            body["system_message"]["metadata"]["execution_trace"][0]["tool"],
            "test.echo"
        );
        let metadata = &body["agent_metadata"];
        assert_eq!(metadata["iterations"], 2);
        assert_eq!(metadata["tools_used"], 1);
        assert_eq!(metadata["execution_trace"][0]["status"], "success");
        assert_eq!(metadata["execution_trace"][0]["result"], "hello");
        assert!(metadata["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_run_whose_llm_fails_is_a_failed_run_with_its_error() {
    let server = TestServer::start(vec![Reply::error(401, "Incorrect API key provided")], "").await;
    let key = server.key("ann").await;
    let answer = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "hi", "stream": false}))
        .send()
        .await
        .unwrap();
    let request_id = answer.headers()["x-request-id"]
        .to_str()
        .unwrap()
        .to_string();
    let body: Value = answer.json().await.unwrap();
    assert_eq!(body["status"], "failed");
    assert_eq!(body["answer"], Value::Null);
    assert_eq!(body["error"]["code"], "llm_unauthorized");
    // The client is told a plain sentence and the request's id; the detail is the operator's.
    assert_eq!(
        body["error"]["message"],
        agentloop::core::protocol::ErrorCode::LlmUnauthorized.user_message()
    );
    assert_eq!(body["error"]["request_id"], request_id.as_str());
    assert_eq!(
        body["user_message"]["content"], "hi",
        "the question is kept"
    );
    let run_id = body["run_id"].as_str().unwrap().parse().unwrap();
    let stored = server.store.run(run_id).await.unwrap().unwrap();
    assert!(
        stored.error_message.unwrap().contains("Incorrect API key"),
        "the store keeps the detail"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_client_that_left_reattaches_with_last_event_id() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__sleep", json!({"ms": 300})),
            Reply::text("Slept well.").with_delay(Duration::from_millis(300)),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "sleep"}))
        .send()
        .await
        .unwrap();
    let first = read_sse_until(response, "tool_selected").await;
    let run_id = first[0].data["run_id"].as_str().unwrap().to_string();
    let last = first.last().unwrap().id.clone();

    // Back while the run goes on: the rest, without a gap or a repeat.
    let resumed = server
        .get(&format!("/v1/runs/{run_id}/events"), &key)
        .header("Last-Event-ID", &last)
        .send()
        .await
        .unwrap();
    let rest = read_sse(resumed).await;
    let seqs: Vec<u64> = first
        .iter()
        .chain(&rest)
        .map(|e| e.data["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(rest.last().unwrap().data["status"], "completed");

    // After the end: from the start, or from any point (`?after=`), the same events.
    let again = read_sse(
        server
            .get(&format!("/v1/runs/{run_id}/events?after=3"), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(again.first().unwrap().data["seq"], 4);
    assert_eq!(again.len(), seqs.len() - 3);

    // Another instance on the same store serves them from the store.
    let store_url = server.store_url.clone();
    let other = TestServer::start_on(
        agentloop_test_support::scripted_llm::ScriptedLlm::start(Vec::new()).await,
        &store_url,
        "",
    )
    .await;
    let stored = read_sse(
        other
            .get(&format!("/v1/runs/{run_id}/events"), &key)
            .header("Last-Event-ID", "2")
            .send()
            .await
            .unwrap(),
    )
    .await;
    let all: Vec<Value> = first.iter().chain(&rest).map(|e| e.data.clone()).collect();
    let stored: Vec<Value> = stored.into_iter().map(|e| e.data).collect();
    assert_eq!(
        stored,
        all[2..].to_vec(),
        "the stored log is what clients received"
    );
    other.shutdown().await;
    server.shutdown().await;
}

#[tokio::test]
async fn cancel_stops_the_run_at_a_safe_point() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__sleep", json!({"ms": 500})),
            Reply::text("never sent"),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "sleep"}))
        .send()
        .await
        .unwrap();
    let mut stream_events = Vec::new();
    let mut stream = Box::pin(eventsource_stream::Eventsource::eventsource(
        response.bytes_stream(),
    ));
    let mut run_id = String::new();
    while let Some(event) = futures::StreamExt::next(&mut stream).await {
        let event = event.unwrap();
        let data: Value = serde_json::from_str(&event.data).unwrap();
        if event.event == "tool_selected" {
            run_id = data["run_id"].as_str().unwrap().to_string();
            let cancel = server
                .post(&format!("/v1/runs/{run_id}/cancel"), &key)
                .send()
                .await
                .unwrap();
            assert_eq!(cancel.status(), 202);
            let answer: Value = cancel.json().await.unwrap();
            assert_eq!(answer["status"], "cancelling");
        }
        stream_events.push((event.event, data));
    }
    let kinds: Vec<&str> = stream_events
        .iter()
        .map(|(kind, _)| kind.as_str())
        .collect();
    assert!(
        kinds.contains(&"tool_executed"),
        "the call in flight was recorded: {kinds:?}"
    );
    let (_, done) = stream_events.last().unwrap();
    assert_eq!(done["status"], "cancelled");
    assert_eq!(
        server.llm.requests().len(),
        1,
        "no LLM call after the cancel"
    );

    let run: Value = server
        .get(&format!("/v1/runs/{run_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "cancelled");
    // Cut off by the cancel (its MCP server told), and recorded so.
    assert_eq!(run["execution_trace"][0]["status"], "error");
    let error = run["execution_trace"][0]["error"]
        .as_str()
        .unwrap_or_default();
    assert!(error.contains("cancelled"), "{error}");
    let again = server
        .post(&format!("/v1/runs/{run_id}/cancel"), &key)
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(again).await.0, 409);
    let session = run["session_id"].as_str().unwrap();
    let details: Value = server
        .get(&format!("/v1/sessions/{session}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let last = details["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        last["content"].as_str().unwrap().contains("cancelled"),
        "{last}"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn history_carries_across_two_requests_with_the_same_session() {
    let server = TestServer::start(
        vec![
            Reply::text("You have 1 account: My Website."),
            Reply::text("It has 2 properties."),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let first: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "Show me my accounts", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session = first["session_id"].clone();
    let second = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "What properties does it have?", "session_id": session}))
        .send()
        .await
        .unwrap();
    let events = read_sse(second).await;
    assert_eq!(events[0].data["session_id"], session);
    let texts: Vec<String> = server.llm.requests()[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(
        texts[1..],
        [
            "Show me my accounts",
            "You have 1 account: My Website.",
            "What properties does it have?"
        ]
    );

    let listed: Value = server
        .get("/v1/sessions", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(listed["sessions"][0]["id"], session);
    assert_eq!(listed["sessions"][0]["message_count"], 4);
    let path = format!("/v1/sessions/{}", session.as_str().unwrap());
    let details: Value = server
        .get(&path, &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(details["runs"].as_array().unwrap().len(), 2);
    let deleted = server
        .client
        .delete(format!("{}{path}", server.url))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status(), 204);
    assert_eq!(server.get(&path, &key).send().await.unwrap().status(), 404);
    server.shutdown().await;
}

#[tokio::test]
async fn max_iterations_is_capped_by_the_server() {
    let mut script: Vec<Reply> = (0..5)
        .map(|i| Reply::tool_call("test__echo", json!({"text": format!("{i}")})))
        .collect();
    script.push(Reply::text("summary"));
    let server = TestServer::start(script, "[agent]\nmax_iterations = 2\n").await;
    let key = server.key("ann").await;
    let body: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "loop", "stream": false, "max_iterations": 50}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(body["agent_metadata"]["iterations"], 2);
    assert_eq!(body["agent_metadata"]["finalize_reason"], "max_iterations");
    assert_eq!(server.llm.requests().len(), 3);
    server.shutdown().await;
}

#[tokio::test]
async fn shutdown_hands_a_run_over_at_its_next_saved_step_and_the_next_start_finishes_it() {
    hand_over_then_finish("").await;
}

/// The same with the connections and their runs on threads of their own (`server.threads`).
#[tokio::test]
async fn on_threads_of_their_own_shutdown_hands_a_run_over_and_the_next_start_finishes_it() {
    hand_over_then_finish("[server]\nthreads = 2\n").await;
}

/// A run with a tool call in flight when the server stops: the call finishes and is saved,
/// the run is left at that step, and the next start (same `extra` config) finishes it.
async fn hand_over_then_finish(extra: &str) {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let llm = agentloop_test_support::scripted_llm::ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", json!({"ms": 600})),
        Reply::text("never sent"),
    ])
    .await;
    let server = TestServer::start_on(llm, &store_url, extra).await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "sleep"}))
        .send()
        .await
        .unwrap();
    let reading = tokio::spawn(read_sse(response));
    // The sleep has begun: the run has a call in flight when the server is told to stop.
    wait_for_call(&server.mcp_log, "sleep").await;
    assert!(server.shutdown().await, "every run reached a saved step");
    let events = reading.await.unwrap();
    let kinds: Vec<&str> = events.iter().map(|event| event.event.as_str()).collect();
    assert_eq!(
        kinds[kinds.len() - 2..],
        ["tool_executed", "thinking"],
        "the call in flight finished; the run stopped at the saved step before its next LLM call"
    );
    let last = events.last().unwrap();
    let run_id = uuid::Uuid::parse_str(last.data["run_id"].as_str().unwrap()).unwrap();
    // What the next start finds: the run in progress, its call saved.
    let store = agentloop::SqlStore::connect(&store_url).await.unwrap();
    let run = store.run(run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running, "left to be adopted");
    let records = store.tool_executions(run_id).await.unwrap();
    assert_eq!(records[0].status.as_str(), "success");
    store.close().await;

    // The next start adopts it at once (the first one said it stopped) and finishes it.
    let llm = agentloop_test_support::scripted_llm::ScriptedLlm::start(vec![Reply::text(
        "Finished after the restart.",
    )])
    .await;
    let server = TestServer::start_on(llm, &store_url, extra).await;
    let run: Value = agentloop_test_support::wait::eventually(
        "the run to be finished by the next start",
        Duration::from_secs(30),
        || async {
            let run: Value = server
                .get(&format!("/v1/runs/{run_id}"), &key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (run["status"] != "running").then_some(run)
        },
    )
    .await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["answer"], "Finished after the restart.");
    let records = server.store.tool_executions(run_id).await.unwrap();
    assert_eq!(records.len(), 1, "the call that finished is not run again");
    server.shutdown().await;
}

#[tokio::test]
async fn health_metrics_and_openapi_answer_without_a_key() {
    let server = TestServer::start(echo_then_answer(), "").await;
    let key = server.key("ann").await;
    server
        .post("/v1/runs", &key)
        .json(&json!({"query": "Echo hello", "stream": false}))
        .send()
        .await
        .unwrap();
    let health: Value = server
        .client
        .get(format!("{}/healthz", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["status"], "ok");
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap();
    assert!(
        metrics.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let text = metrics.text().await.unwrap();
    assert!(
        text.contains("agentloop_runs_total{status=\"completed\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("agentloop_llm_call_duration_seconds_count{outcome=\"ok\"} 2"),
        "{text}"
    );
    assert!(
        text.contains("agentloop_tool_call_duration_seconds_count{status=\"success\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("agentloop_llm_tokens_total{kind=\"prompt\",model=\""),
        "{text}"
    );
    assert!(text.contains("agentloop_runs_active 0"), "{text}");
    let api: Value = server
        .client
        .get(format!("{}/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    for path in [
        "/v1/runs",
        "/copilot-agent",
        "/v1/runs/{id}",
        "/v1/runs/{id}/events",
        "/v1/runs/{id}/cancel",
        "/v1/sessions",
        "/v1/sessions/{id}",
        "/v1/chat",
        "/v1/chat/{id}/stream",
        "/v1/ag-ui",
        "/healthz",
        "/metrics",
    ] {
        assert!(
            api["paths"][path].is_object(),
            "{path} missing from the OpenAPI document"
        );
    }
    assert!(api["components"]["schemas"]["RunBody"]["properties"]["query"].is_object());
    assert!(api["components"]["schemas"]["RunAgentInput"]["properties"]["threadId"].is_object());
    // The input body is the core's answer and `stream`, documented from the one type.
    let input = api["components"]["schemas"]["InputBody"].to_string();
    assert!(
        input.contains("#/components/schemas/InputAnswer"),
        "{input}"
    );
    assert!(input.contains("\"stream\""), "{input}");
    assert!(api["components"]["schemas"]["InputAnswer"]["properties"]["approve"].is_object());
    assert_eq!(
        api["components"]["securitySchemes"]["api_key"]["scheme"],
        "bearer"
    );
    let unknown = server
        .client
        .get(format!("{}/v2/nothing", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(unknown).await.0, 404);
    server.shutdown().await;
}

#[tokio::test]
async fn a_long_silence_is_filled_with_keep_alive_comments() {
    let server = TestServer::start(
        vec![Reply::text("finally").with_delay(Duration::from_millis(900))],
        "[server]\nkeep_alive_s = 0.2\n",
    )
    .await;
    let key = server.key("ann").await;
    let raw = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "take your time"}))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let comments = raw.lines().filter(|line| *line == ": keep-alive").count();
    assert!(comments >= 2, "{raw}");
    assert!(raw.contains("event: done"), "{raw}");
    server.shutdown().await;
}

#[tokio::test]
async fn the_run_context_reaches_the_policy() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__record", json!({"note": "x"})),
            Reply::text("read-only"),
        ],
        "[workflows.math]\ntools = [\"test.add\"]\n",
    )
    .await;
    let key = server.key("ann").await;
    let body: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "change it", "stream": false, "context": {"read_only": true, "entity_id": "p-1"}}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        body["agent_metadata"]["execution_trace"][0]["status"],
        "blocked"
    );
    let offered = server.llm.requests()[0]["tools"].to_string();
    assert!(
        !offered.contains("test__record") && offered.contains("test__echo"),
        "{offered}"
    );

    let unknown = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "q", "context": {"workflow": "maths"}}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(unknown).await;
    assert_eq!(status, 400);
    assert_eq!(error["details"]["field"], "context.workflow");
    assert!(
        error["message"].as_str().unwrap().contains("math"),
        "{error}"
    );
    server.shutdown().await;
}
