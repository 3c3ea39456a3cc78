//! `POST /v1/ag-ui` over real HTTP: bodies that are not a `RunAgentInput`, a request without a
//! key, another user's thread, an answer that does not fit a waiting run, odd frontend tools,
//! the same request replayed from the event log, a busy thread (the protocol itself, with
//! `@ag-ui/client`, is in `agentloop-cli/tests/ag_ui.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

fn input(thread: &str, messages: Value) -> Value {
    json!({
        "threadId": thread, "runId": uuid::Uuid::now_v7().to_string(), "messages": messages,
        "tools": [], "context": [], "state": {}, "forwardedProps": {},
    })
}

/// The AG-UI events of an SSE body.
fn events_of(body: &str) -> Vec<Value> {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str(data).unwrap())
        .collect()
}

/// The text the assistant's messages got.
fn text_in(body: &str) -> String {
    events_of(body)
        .iter()
        .filter(|event| event["type"] == "TEXT_MESSAGE_CONTENT")
        .map(|event| event["delta"].as_str().unwrap().to_string())
        .collect()
}

fn user(text: &str) -> Value {
    json!({"id": "u1", "role": "user", "content": text})
}

#[tokio::test]
async fn bad_bodies_are_refused_with_json_errors_naming_the_problem() {
    let server = TestServer::start(vec![Reply::text("unused")], "").await;
    let key = server.key("ann").await;
    let cases = [
        (json!("not an object"), "RunAgentInput"),
        (json!({"runId": "r", "messages": []}), "threadId"),
        (
            input(" ", json!([user("hi")])),
            "threadId: must not be empty",
        ),
        (input("t", json!([])), "the last message must be the user's"),
        (
            input(
                "t",
                json!([{"id": "a", "role": "assistant", "content": "hi"}]),
            ),
            "the last message must be the user's",
        ),
        (input("t", json!([user("   ")])), "with text"),
    ];
    for (body, expected) in cases {
        let response = server
            .post("/v1/ag-ui", &key)
            .json(&body)
            .send()
            .await
            .unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(status, 400, "{body}");
        assert_eq!(error["code"], "invalid_body", "{body}");
        let message = error["message"].as_str().unwrap();
        assert!(message.contains(expected), "{message}");
    }
    let without_key = server
        .client
        .post(format!("{}/v1/ag-ui", server.url))
        .json(&input("t", json!([user("hi")])))
        .send()
        .await
        .unwrap();
    assert_eq!(error_of(without_key).await.0, 401);
    assert!(
        server.llm.requests().is_empty(),
        "nothing reached the model"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn another_users_thread_is_not_found_and_an_answer_must_fit() {
    let server = TestServer::start(
        vec![Reply::tool_call("test__record", json!({"note": "n"}))],
        "[tools.\"test.record\"]\nneeds_approval = true\n",
    )
    .await;
    let ann = server.key("ann").await;
    let bob = server.key("bob").await;
    // A UUID names the session itself, for every user (a text id names a thread of the user's
    // own: `conversation_ids.rs`).
    let thread = uuid::Uuid::now_v7().to_string();
    let asked = server
        .post("/v1/ag-ui", &ann)
        .json(&input(&thread, json!([user("record it")])))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(asked.contains("\"type\":\"interrupt\""), "{asked}");

    let response = server
        .post("/v1/ag-ui", &bob)
        .json(&input(&thread, json!([user("let me in")])))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 404);
    assert_eq!(error["code"], "not_found");

    // Neither an interrupt's answer nor anything else: the run stays paused.
    let response = server
        .post("/v1/ag-ui", &ann)
        .json(&input(&thread, json!([user("something else")])))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 400);
    assert_eq!(error["code"], "invalid_answer");
    let mut unknown = input(&thread, json!([]));
    unknown["resume"] = json!([{"interruptId": "nope", "status": "resolved"}]);
    unknown["forwardedProps"] = json!({"agentloop": {"approve": ["nope"]}});
    let response = server
        .post("/v1/ag-ui", &ann)
        .json(&unknown)
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(status, 400);
    assert!(
        error["message"].as_str().unwrap().contains("nope"),
        "{error}"
    );
    assert_eq!(server.llm.requests().len(), 1);
    server.shutdown().await;
}

#[tokio::test]
async fn odd_frontend_tools_are_left_out_or_made_harmless_and_the_run_goes_on() {
    let server = TestServer::start(vec![Reply::text("fine")], "").await;
    let key = server.key("ann").await;
    let mut body = input("odd-tools", json!([user("hi")]));
    body["tools"] = json!([
        {"name": "", "description": "no name"},
        {"name": "ask_user", "description": "a built-in's name"},
        {"name": "test.echo", "description": "a server tool's name"},
        {"name": "pick", "description": "first", "parameters": "not a schema"},
        {"name": "pick", "description": "second"},
        {"name": "broken", "description": "b", "parameters": {"type": 12}},
    ]);
    let events = server
        .post("/v1/ag-ui", &key)
        .json(&body)
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(events.contains("\"type\":\"RUN_FINISHED\""), "{events}");
    let tools = &server.llm.requests()[0]["tools"];
    let offered: Vec<(&str, &str)> = tools
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            (
                tool["function"]["name"].as_str().unwrap(),
                tool["function"]["description"].as_str().unwrap(),
            )
        })
        .collect();
    assert!(offered.contains(&("pick", "first")), "{offered:?}");
    assert!(offered.contains(&("broken", "b")), "{offered:?}");
    assert_eq!(
        offered.iter().filter(|(name, _)| *name == "pick").count(),
        1
    );
    for left_out in [
        "no name",
        "a built-in's name",
        "a server tool's name",
        "second",
    ] {
        assert!(
            !offered
                .iter()
                .any(|(_, description)| *description == left_out),
            "{left_out}: {offered:?}"
        );
    }
    let pick = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "pick")
        .unwrap();
    assert_eq!(pick["function"]["parameters"]["type"], "object");
    server.shutdown().await;
}

#[tokio::test]
async fn the_same_run_id_again_replays_its_run_and_a_busy_thread_is_409() {
    let server = TestServer::start(
        vec![
            Reply::text("first answer"),
            Reply::tool_call("test__sleep", json!({"ms": 1500})),
            Reply::text("slept"),
        ],
        "",
    )
    .await;
    let key = server.key("ann").await;
    let post = |body: Value| server.post("/v1/ag-ui", &key).json(&body).send();
    let first = input("replayed", json!([user("hello")]));
    let answered = post(first.clone()).await.unwrap().text().await.unwrap();
    assert_eq!(text_in(&answered), "first answer", "{answered}");
    // The same request after the run ended: the run again, from the event log, not a new run.
    let again = post(first).await.unwrap().text().await.unwrap();
    assert_eq!(again, answered);
    assert_eq!(server.llm.requests().len(), 1);

    // While a run of the thread works, a new run of it is refused.
    let slow = post(input("replayed", json!([user("sleep")])));
    let slow = tokio::spawn(async move { slow.await.unwrap().text().await.unwrap() });
    agentloop_test_support::wait::until(
        "the slow run's LLM call",
        std::time::Duration::from_secs(10),
        || server.llm.requests().len() >= 2,
    )
    .await;
    let busy = post(input("replayed", json!([user("me too")])))
        .await
        .unwrap();
    let (status, error) = error_of(busy).await;
    assert_eq!(status, 409);
    assert_eq!(error["code"], "session_busy");
    assert_eq!(text_in(&slow.await.unwrap()), "slept");
    server.shutdown().await;
}
