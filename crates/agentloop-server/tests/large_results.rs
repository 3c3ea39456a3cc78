//! Large tool results over the real stack (scripted LLM over HTTP, the test MCP server, a
//! SQLite file): stored once, bounded in `GET /v1/sessions/{id}`, whole from
//! `GET /v1/runs/{id}/tools/{call_id}`; sessions listed in pages.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;

use agentloop::{FnTool, Store, ToolOutput};
use agentloop_test_support::{
    postgres::TestSchema,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::{TestServer, error_of};
use serde_json::{Value, json};

const FIVE_MB: usize = 5_000_000;
/// What the session's answer shows of a tool output.
const SHOWN: usize = 16 * 1024;

/// What the test MCP server's `big` tool answers for `chars` characters.
fn big_text(chars: usize) -> String {
    "0123456789".chars().cycle().take(chars).collect()
}

/// A JSON document of about `bytes` bytes (compact).
fn big_json(bytes: usize) -> Value {
    let rows: Vec<Value> = (0..bytes / 50)
        .map(|i| json!({"id": i, "name": format!("row {i:08}"), "ok": i % 2 == 0}))
        .collect();
    json!({ "rows": rows })
}

/// A server on the store at `store_url` whose agent has the test MCP server's tools and
/// `json_blob`, a tool answering a ~5 MB structured result (its text is the same JSON, as MCP
/// servers send it).
async fn start(script: Vec<Reply>, store_url: &str) -> TestServer {
    let llm = ScriptedLlm::start(script).await;
    let tool = FnTool::new(
        "json_blob",
        "Returns a large JSON document",
        json!({"type": "object", "properties": {}}),
        |_args, _ctx| async move { Ok(ToolOutput::json(big_json(FIVE_MB))) },
    );
    TestServer::start_on_with(llm, store_url, "", |agent| agent.tool(tool)).await
}

/// A run of `query` (in `session`, or a new one) as JSON, completed.
async fn run(server: &TestServer, key: &str, query: &str, session: Option<&str>) -> Value {
    let mut body = json!({"query": query, "stream": false});
    if let Some(session) = session {
        body["session_id"] = json!(session);
    }
    let response = server
        .post("/v1/runs", key)
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: Value = response.json().await.unwrap();
    assert_eq!(body["status"], "completed", "{}", body["error"]);
    body
}

fn file_size(path: &Path) -> i64 {
    i64::try_from(std::fs::metadata(path).unwrap().len()).unwrap()
}

/// A store that already holds a small run of `user` (so that the growth measured next is the
/// big run's alone), and its key.
async fn store_with_a_small_run(db: &Path) -> String {
    let url = format!("sqlite://{}", db.display());
    let small = vec![
        Reply::tool_call("test__big", json!({"chars": 10})),
        Reply::text("done"),
    ];
    let server = start(small, &url).await;
    let key = server.key("ann").await;
    run(&server, &key, "a small one", None).await;
    server.shutdown().await;
    key
}

/// The session's answer, checked to be small, as JSON.
async fn bounded_session(server: &TestServer, key: &str, session_id: &str) -> Value {
    let response = server
        .get(&format!("/v1/sessions/{session_id}"), key)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let bytes = response.bytes().await.unwrap();
    eprintln!("GET /v1/sessions/{{id}}: {} bytes", bytes.len());
    assert!(bytes.len() < 100_000, "{} bytes", bytes.len());
    serde_json::from_slice(&bytes).unwrap()
}

/// The script of [`check_a_large_text_run`].
fn large_text_script() -> Vec<Reply> {
    vec![
        Reply::tool_call("test__big", json!({"chars": FIVE_MB})),
        Reply::text("five million characters"),
        Reply::text("still there"),
    ]
}

/// A run whose tool (the test MCP server's `big`) answers 5 MB of text: the session's answer
/// shows 16 KiB of it, marked, the new route answers it whole (to its user only), and a later
/// run of the session still sees the result in its history.
async fn check_a_large_text_run(server: &TestServer, key: &str) {
    let body = run(server, key, "fetch it", None).await;
    let run_id = body["run_id"].as_str().unwrap().to_string();
    let session_id = body["session_id"].as_str().unwrap().to_string();
    let call_id = body["agent_metadata"]["execution_trace"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_string();
    let whole = big_text(FIVE_MB);

    // The session's answer: the tool message and the record cut and marked, the trace without
    // results.
    let details = bounded_session(server, key, &session_id).await;
    let route = format!("/v1/runs/{run_id}/tools/{call_id}");
    let tool_message = details["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "tool_result")
        .unwrap();
    assert_eq!(tool_message["truncated"], true);
    assert_eq!(tool_message["content_bytes"], FIVE_MB);
    assert_eq!(tool_message["full_output"], route.as_str());
    assert_eq!(tool_message["content"], &whole[..SHOWN]);
    let record = &details["runs"][0]["execution_trace"][0];
    assert_eq!(record["truncated"], true);
    assert_eq!(record["result_bytes"], FIVE_MB);
    assert_eq!(record["full_output"], route.as_str());
    assert_eq!(record["result"], &whole[..SHOWN]);
    let trace = details["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["kind"] == "trace")
        .unwrap();
    let traced = &trace["metadata"]["execution_trace"][0];
    assert_eq!(traced["call_id"], call_id.as_str());
    assert_eq!(traced["result_bytes"], FIVE_MB);
    assert!(traced.get("result").is_none(), "{traced}");
    // A small message is shown as it is, unmarked.
    let question = &details["messages"][0];
    assert_eq!(question["content"], "fetch it");
    assert!(question.get("truncated").is_none(), "{question}");

    // The whole record from the new route.
    let response = server.get(&route, key).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let fetched: Value = response.json().await.unwrap();
    assert_eq!(fetched["call_id"], call_id.as_str());
    assert_eq!(fetched["tool"], "test.big");
    assert_eq!(fetched["status"], "success");
    assert!(
        fetched["result"].as_str().unwrap() == whole,
        "the whole result"
    );
    assert!(fetched.get("truncated").is_none());

    // Another user's run, an unknown call, a malformed id.
    let other = server.key("bob").await;
    let (status, error) = error_of(server.get(&route, &other).send().await.unwrap()).await;
    assert_eq!((status, error["code"].as_str()), (404, Some("not_found")));
    let unknown = format!("/v1/runs/{run_id}/tools/call_nope");
    let (status, _) = error_of(server.get(&unknown, key).send().await.unwrap()).await;
    assert_eq!(status, 404);
    let malformed = format!("/v1/runs/not-a-run/tools/{call_id}");
    let (status, error) = error_of(server.get(&malformed, key).send().await.unwrap()).await;
    assert_eq!((status, error["code"].as_str()), (400, Some("invalid_id")));

    // History: the next run of the session shows the model the earlier result (a preview).
    run(server, key, "and now?", Some(&session_id)).await;
    let requests = server.llm.requests();
    let last = requests.last().unwrap();
    let earlier = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id.as_str())
        .unwrap_or_else(|| panic!("no earlier tool result in {last}"));
    assert!(
        earlier["content"].as_str().unwrap().contains("0123456789"),
        "{earlier}"
    );
}

/// A 5 MB text result grows the SQLite file by about its size, once (it was three times: the
/// tool message, the record and the trace).
#[tokio::test]
async fn a_large_result_is_stored_once_shown_bounded_and_fetched_whole() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentloop.db");
    let key = store_with_a_small_run(&db).await;
    let before = file_size(&db);
    let server = start(large_text_script(), &format!("sqlite://{}", db.display())).await;
    check_a_large_text_run(&server, &key).await;
    server.shutdown().await;
    let growth = file_size(&db) - before;
    eprintln!("a {FIVE_MB}-byte result grew the SQLite file by {growth} bytes");
    assert!(growth < (FIVE_MB as i64) * 3 / 2, "{growth} bytes");
}

/// The same on PostgreSQL (the store suite measures its growth).
#[tokio::test]
async fn on_postgres_a_large_result_is_shown_bounded_and_fetched_whole() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let schema = TestSchema::create().await;
    let server = start(large_text_script(), schema.url()).await;
    let key = server.key("ann").await;
    check_a_large_text_run(&server, &key).await;
    server.shutdown().await;
    schema.drop_schema().await;
}

/// A structured result whose text is its JSON (`ToolOutput::json`, an MCP server's
/// `structuredContent`): stored once too, and read back exactly.
#[tokio::test]
async fn a_large_structured_result_is_stored_once_and_read_back_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("agentloop.db");
    let key = store_with_a_small_run(&db).await;
    let before = file_size(&db);
    let value = big_json(FIVE_MB);
    let text = value.to_string();

    let script = vec![
        Reply::tool_call("json_blob", json!({})),
        Reply::text("a big document"),
    ];
    let server = start(script, &format!("sqlite://{}", db.display())).await;
    let body = run(&server, &key, "fetch the document", None).await;
    let run_id = body["run_id"].as_str().unwrap();
    let session_id = body["session_id"].as_str().unwrap();
    let call_id = body["agent_metadata"]["execution_trace"][0]["call_id"]
        .as_str()
        .unwrap();

    let details = bounded_session(&server, &key, session_id).await;
    let record = &details["runs"][0]["execution_trace"][0];
    assert_eq!(record["truncated"], true);
    assert_eq!(record["result_bytes"], text.len());
    assert_eq!(record["structured_result_bytes"], text.len());
    assert!(record.get("structured_result").is_none(), "left out");

    let fetched: Value = server
        .get(&format!("/v1/runs/{run_id}/tools/{call_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(fetched["structured_result"] == value, "the whole value");
    assert!(
        fetched["result"].as_str().unwrap() == text,
        "the whole text"
    );

    // The store answers exactly what the run recorded.
    let run_id = run_id.parse().unwrap();
    let records = server.store.tool_executions(run_id).await.unwrap();
    assert_eq!(records.len(), 1);
    assert!(records[0].structured_result.as_ref() == Some(&value));
    assert!(records[0].result.as_deref() == Some(text.as_str()));

    server.shutdown().await;
    let growth = file_size(&db) - before;
    let size = i64::try_from(text.len()).unwrap();
    eprintln!("a {size}-byte structured result grew the SQLite file by {growth} bytes");
    assert!(growth < size * 3 / 2, "{growth} bytes for {size}");
}

/// `GET /v1/sessions` in pages: `limit` respected, every session once across pages, in order of
/// last activity, `next_cursor` only while more follow; bad limits and cursors are 400.
#[tokio::test]
async fn sessions_are_listed_in_pages() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("agentloop.db").display());
    let script = (0..8).map(|i| Reply::text(format!("answer {i}"))).collect();
    let server = start(script, &store_url).await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    let mut created = Vec::new();
    for i in 0..7 {
        let body = run(&server, &ann, &format!("question {i}"), None).await;
        created.push(body["session_id"].as_str().unwrap().to_string());
    }
    run(&server, &bob, "bob's", None).await;

    let list = |key: &str, query: &str| {
        let request = server.get(&format!("/v1/sessions{query}"), key);
        async move { request.send().await.unwrap() }
    };
    let mut seen = Vec::new();
    let mut query = "?limit=3".to_string();
    let mut pages = 0;
    loop {
        let page: Value = list(&ann, &query).await.json().await.unwrap();
        let sessions = page["sessions"].as_array().unwrap();
        assert!(sessions.len() <= 3, "{page}");
        seen.extend(
            sessions
                .iter()
                .map(|s| s["id"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match page["next_cursor"].as_str() {
            Some(cursor) => query = format!("?limit=3&cursor={cursor}"),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    // Most recently active first: the reverse of creation.
    created.reverse();
    assert_eq!(seen, created);

    // The default page holds them all, without a cursor; bob sees his only.
    let page: Value = list(&ann, "").await.json().await.unwrap();
    assert_eq!(page["sessions"].as_array().unwrap().len(), 7);
    assert!(page.get("next_cursor").is_none(), "{page}");
    let page: Value = list(&bob, "?limit=200").await.json().await.unwrap();
    assert_eq!(page["sessions"].as_array().unwrap().len(), 1);

    for bad in ["?limit=0", "?limit=201", "?limit=ten", "?limit=-1"] {
        let (status, error) = error_of(list(&ann, bad).await).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (400, Some("invalid_limit")),
            "{bad}"
        );
    }
    for bad in ["?cursor=nope", "?cursor=", "?limit=3&cursor=0123"] {
        let (status, error) = error_of(list(&ann, bad).await).await;
        assert_eq!(
            (status, error["code"].as_str()),
            (400, Some("invalid_cursor")),
            "{bad}"
        );
    }

    // The OpenAPI document tells all of it.
    let api: Value = server
        .client
        .get(format!("{}/openapi.json", server.url))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert!(api["paths"]["/v1/runs/{id}/tools/{call_id}"]["get"].is_object());
    let params: Vec<&str> = api["paths"]["/v1/sessions"]["get"]["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(params, ["limit", "cursor"]);
    let schemas = &api["components"]["schemas"];
    assert!(schemas["SessionList"]["properties"]["next_cursor"].is_object());
    let shown = schemas["ShownMessage"].to_string();
    for field in ["truncated", "content_bytes", "full_output"] {
        assert!(shown.contains(field), "{field} in {shown}");
    }
    let shown = schemas["ShownRecord"].to_string();
    for field in ["truncated", "result_bytes", "structured_result_bytes"] {
        assert!(shown.contains(field), "{field} in {shown}");
    }
    server.shutdown().await;
}
