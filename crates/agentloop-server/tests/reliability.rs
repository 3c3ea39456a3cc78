//! What operators meet: concurrent runs on one session, the health of the store, and requests
//! that are malformed in the path or the query.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::{scripted_llm::Reply, wait::eventually};
use common::{TestServer, error_of, read_sse_until};
use serde_json::{Value, json};

/// A second run on a session that has one in progress is refused with 409 before it exists:
/// no run id, no stored run, nothing counted as a failed run.
#[tokio::test]
async fn a_busy_session_refuses_a_second_run_with_409_and_retry_after() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__sleep", json!({"ms": 3000})),
            Reply::text("done"),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let first = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "sleep"}))
        .send()
        .await
        .unwrap();
    let started = read_sse_until(first, "tool_selected").await;
    let session_id = started[0].data["session_id"].as_str().unwrap().to_string();

    let second = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "me too", "session_id": session_id, "stream": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        second
            .headers()
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("2")
    );
    let (status, error) = error_of(second).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (409, Some("session_busy"))
    );

    let runs: Value = server
        .get(&format!("/v1/sessions/{session_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs["runs"].as_array().unwrap().len(), 1, "{runs}");
    let metrics = server
        .client
        .get(format!("{}/metrics", server.url))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics.contains("status=\"failed\""),
        "a refused run is not a failed run:\n{metrics}"
    );
}

/// Two requests racing for one idle session: exactly one runs, the other is refused with 409.
#[tokio::test]
async fn two_runs_racing_for_one_session_start_exactly_one() {
    let server = TestServer::start(
        vec![
            Reply::text("first"),
            Reply::text("a").with_delay(Duration::from_millis(500)),
            Reply::text("b").with_delay(Duration::from_millis(500)),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let opened: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "open", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let session_id = opened["session_id"].as_str().unwrap().to_string();

    let ask = |query: &'static str| {
        server
            .post("/v1/runs", &key)
            .json(&json!({"query": query, "session_id": session_id, "stream": false}))
            .send()
    };
    let (a, b) = tokio::join!(ask("a"), ask("b"));
    let mut statuses = vec![a.unwrap().status().as_u16(), b.unwrap().status().as_u16()];
    statuses.sort_unstable();
    assert_eq!(statuses, vec![200, 409]);
}

/// `?after=` is percent-decoded like any query value, and an id that is not UTF-8 gets the
/// JSON error format, not plain text.
#[tokio::test]
async fn malformed_paths_and_encoded_queries_get_json_answers() {
    let server = TestServer::start(vec![Reply::text("hello")], "").await;
    let key = server.key("ann").await;
    let run: Value = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "hi", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run_id = run["run_id"].as_str().unwrap();

    let all = common::read_sse(
        server
            .get(&format!("/v1/runs/{run_id}/events"), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    let encoded = common::read_sse(
        server
            .get(&format!("/v1/runs/{run_id}/events?after=%32"), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(encoded.len(), all.len() - 2, "after=%32 is after=2");
    assert_eq!(encoded[0].id, "3");

    for path in ["/v1/runs/%FF%FE", "/v1/sessions/%C3%28"] {
        let response = server.get(path, &key).send().await.unwrap();
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("application/json"),
            "{path}"
        );
        let (status, error) = error_of(response).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (400, Some("invalid_id")),
            "{path}"
        );
    }
}

/// Readiness lists each tool source with its state; liveness checks nothing.
#[tokio::test]
async fn readiness_reports_the_store_and_each_tool_source() {
    let server = TestServer::start(vec![], "").await;
    for path in ["/readyz", "/healthz"] {
        let response = server
            .client
            .get(format!("{}{path}", server.url))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200, "{path}");
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["store"]["status"], "ok", "{body}");
        let sources = body["tool_sources"].as_array().unwrap();
        let names: Vec<&str> = sources
            .iter()
            .filter_map(|source| source["name"].as_str())
            .collect();
        // agentloop's own `mcp.read_resource` (the test server offers resources), and the test
        // MCP server.
        assert_eq!(names, ["mcp", "test"], "{body}");
        for source in sources {
            assert_eq!(source["state"], "up", "{body}");
        }
        assert_eq!(sources[0]["transport"], "other");
        assert_eq!(sources[0]["tools"], 1);
        assert!(sources[1]["tools"].as_u64().unwrap() > 0, "{body}");
    }
    let live = server
        .client
        .get(format!("{}/livez", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(live.status(), 200);
}

/// `server.threads = 2`: connections and their runs are served by two threads of their own.
/// Runs at once, each with a real MCP call, all complete and are saved; shutdown is clean.
#[tokio::test]
async fn runs_served_by_threads_of_their_own_complete_and_the_server_stops_cleanly() {
    const RUNS: usize = 12;
    // Each run: a tool call, then an answer; in whatever order the runs ask, every run meets a
    // text before the script ends (at most RUNS tool calls are handed out first).
    let mut script: Vec<Reply> = (0..RUNS)
        .map(|i| Reply::tool_call("test__echo", json!({"text": format!("call {i}")})))
        .collect();
    script.extend((0..2 * RUNS).map(|i| Reply::text(format!("answer {i}"))));
    let server = TestServer::start(script, "[server]\nthreads = 2\nmax_runs_per_user = 32\n").await;
    let key = server.key("ann").await;
    let runs = (0..RUNS).map(|i| {
        // A client each, so that the runs come over connections of their own.
        let request = reqwest::Client::new()
            .post(format!("{}/v1/runs", server.url))
            .bearer_auth(&key)
            .json(&json!({"query": format!("question {i}"), "stream": false}));
        async move { request.send().await.unwrap().json::<Value>().await.unwrap() }
    });
    let answers = futures::future::join_all(runs).await;
    for answer in &answers {
        assert_eq!(answer["status"], "completed", "{answer}");
        assert!(
            answer["answer"].as_str().unwrap().starts_with("answer "),
            "{answer}"
        );
    }
    let tool_calls: u64 = answers
        .iter()
        .map(|answer| answer["agent_metadata"]["tools_used"].as_u64().unwrap())
        .sum();
    assert!(tool_calls >= 1, "the MCP server was called: {answers:?}");
    let run_id = answers[0]["run_id"].as_str().unwrap();
    let stored: Value = server
        .get(&format!("/v1/runs/{run_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(stored["status"], "completed", "{stored}");
    assert_eq!(
        stored["tools_used"],
        answers[0]["agent_metadata"]["tools_used"]
    );
    assert!(server.shutdown().await, "every run was saved in time");
}

/// A client that waits for a run's whole answer (`stream: false`) and goes away before it does
/// not stop the run: it ends, saved, on its own.
#[tokio::test]
async fn a_run_answered_whole_goes_on_when_its_client_goes_away() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("test__sleep", json!({"ms": 600})),
            Reply::text("done after all"),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let gone = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "sleep", "stream": false}))
        .timeout(Duration::from_millis(200))
        .send()
        .await;
    let answered = gone.map(|response| response.status());
    assert!(
        answered.as_ref().is_err_and(reqwest::Error::is_timeout),
        "{answered:?}"
    );

    let session: Value = eventually(
        "the run to complete without its client",
        Duration::from_secs(5),
        || async {
            let listed: Value = server
                .get("/v1/sessions", &key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            let id = listed["sessions"][0]["id"].as_str()?.to_string();
            let session: Value = server
                .get(&format!("/v1/sessions/{id}"), &key)
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            (session["runs"][0]["status"] == "completed").then_some(session)
        },
    )
    .await;
    assert_eq!(session["runs"][0]["status"], "completed", "{session}");
    let last = session["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["content"], "done after all", "{session}");
    assert!(server.shutdown().await);
}
