//! Clarification and sub-agents over HTTP: an ambiguous request pauses with a question that
//! `POST /v1/runs/{id}/input {"answer"}` resumes; tools that need a clear request appear only
//! after the answer; a sub-agent's events stream nested in the caller's SSE stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::*;
use serde_json::{Value, json};

const UNCLEAR: &str = r#"{"goal": "Report what Alex said about Q4", "sub_tasks": [
    {"id": "1", "description": "Find Alex's notes on Q4"}],
    "needs_clarification": true, "clarification_question": "Which Alex do you mean?"}"#;

fn contents(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            (
                message["role"].as_str().unwrap().to_string(),
                message["content"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn an_ambiguous_request_pauses_with_a_question_and_resumes_with_the_answer() {
    let server = TestServer::start(
        vec![
            Reply::text(UNCLEAR),
            Reply::tool_call("test__echo", json!({"text": "Alex Kim: Q4 was strong"})),
            Reply::text("Alex Kim says Q4 was strong."),
        ],
        "[agent.planning]\nenabled = true\n\n[tools.\"test.echo\"]\nrequires_clarity = true\n",
    )
    .await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "What does Alex say about Q4?"}))
        .send()
        .await
        .unwrap();
    let paused = read_sse(response).await;
    assert_eq!(
        kinds(&paused),
        [
            "run_started",
            "llm_call",
            "plan_updated",
            "input_required",
            "done"
        ]
    );
    assert_eq!(paused[1].data["purpose"], "plan");
    let required = &paused[3].data;
    assert_eq!(required["kind"], "clarification");
    assert_eq!(required["question"], "Which Alex do you mean?");
    let done = &paused[4].data;
    assert_eq!(done["status"], "awaiting_input");
    let run_id = done["run_id"].as_str().unwrap().to_string();
    let session_id = paused[0].data["session_id"].as_str().unwrap().to_string();
    // The planner was offered no tools; nothing ran yet.
    assert_eq!(server.llm.requests().len(), 1);
    assert!(ScriptedLlm::offered_tools(&server.llm.requests()[0]).is_empty());

    let run: Value = server
        .get(&format!("/v1/runs/{run_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(run["status"], "awaiting_input");

    // An approval, or an empty answer, does not fit: 400, and the run still waits.
    let path = format!("/v1/runs/{run_id}/input");
    for body in [json!({"approve": ["x"]}), json!({"answer": "  "})] {
        let response = server.post(&path, &key).json(&body).send().await.unwrap();
        let (status, error) = error_of(response).await;
        assert_eq!(
            (status, error["code"].as_str().unwrap()),
            (400, "invalid_answer")
        );
        assert!(
            error["message"].as_str().unwrap().contains("Which Alex"),
            "{error}"
        );
    }

    let response = server
        .post(&path, &key)
        .json(&json!({"answer": "Alex Kim from sales", "stream": false}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let result: Value = response.json().await.unwrap();
    assert_eq!(result["status"], "completed", "{result:#}");
    assert_eq!(result["answer"], "Alex Kim says Q4 was strong.");
    assert_eq!(
        result["user_message"]["content"],
        "What does Alex say about Q4?"
    );
    assert_eq!(
        result["agent_metadata"]["plan"]["goal"],
        "Report what Alex said about Q4"
    );
    let clarification = &result["system_message"]["metadata"]["clarifications"][0];
    assert_eq!(clarification["question"], "Which Alex do you mean?");
    assert_eq!(clarification["answer"], "Alex Kim from sales");

    // The model read the question and the answer, after the plan, and was offered the tool
    // that needs a clear request.
    let step = &server.llm.requests()[1];
    let messages = contents(step);
    assert!(messages[1].1.starts_with("<Plan>"), "{messages:?}");
    let n = messages.len();
    assert_eq!(
        messages[n - 3..],
        [
            (
                "user".to_string(),
                "What does Alex say about Q4?".to_string()
            ),
            (
                "assistant".to_string(),
                "Which Alex do you mean?".to_string()
            ),
            ("user".to_string(), "Alex Kim from sales".to_string()),
        ]
    );
    assert!(ScriptedLlm::offered_tools(step).contains(&"test__echo".to_string()));

    // The session keeps the exchange, in order.
    let session: Value = server
        .get(&format!("/v1/sessions/{session_id}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let dialogue: Vec<&str> = session["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["kind"] == "dialogue")
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        dialogue,
        [
            "What does Alex say about Q4?",
            "Which Alex do you mean?",
            "Alex Kim from sales",
            "Alex Kim says Q4 was strong."
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn gated_tools_appear_only_after_the_user_answered_ask_user() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("ask_user", json!({"question": "Which quarter?"})),
            Reply::tool_call("test__echo", json!({"text": "Q4 notes"})),
            Reply::text("Here are the Q4 notes."),
        ],
        "[agent]\nask_user = true\n\n[tools.\"test.echo\"]\nrequires_clarity = true\n",
    )
    .await;
    let key = server.key("ann").await;
    let paused = read_sse(
        server
            .post("/v1/runs", &key)
            .json(&json!({"query": "Show me the notes"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let required = paused.iter().find(|e| e.event == "input_required").unwrap();
    assert_eq!(required.data["question"], "Which quarter?");
    let before = ScriptedLlm::offered_tools(&server.llm.requests()[0]);
    assert!(before.contains(&"ask_user".to_string()));
    assert!(!before.contains(&"test__echo".to_string()), "{before:?}");

    let run_id = paused.last().unwrap().data["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let resumed = read_sse(
        server
            .post(&format!("/v1/runs/{run_id}/input"), &key)
            .json(&json!({"answer": "Q4"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let asked = resumed
        .iter()
        .find(|e| e.event == "tool_executed" && e.data["tool"] == "ask_user")
        .unwrap();
    assert_eq!(asked.data["status"], "success");
    assert_eq!(asked.data["result"], "Q4");
    assert_eq!(resumed.last().unwrap().data["status"], "completed");
    let after = &server.llm.requests()[1];
    assert!(ScriptedLlm::offered_tools(after).contains(&"test__echo".to_string()));
    let answer = after["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert_eq!(answer["content"], json!({"answer": "Q4"}).to_string());
    server.shutdown().await;
}

#[tokio::test]
async fn a_sub_agents_events_stream_nested_and_replay_from_the_store() {
    let server = TestServer::start(
        vec![
            Reply::tool_call("agent__helper", json!({"task": "Echo hello"})),
            Reply::tool_call("test__echo", json!({"text": "hello"})),
            Reply::text("It said hello."),
            Reply::text("The helper reports: hello."),
        ],
        "[agents.helper]\nsystem_prompt = \"You help.\"\ntools = [\"test.echo\"]\n",
    )
    .await;
    let key = server.key("ann").await;
    let live = read_sse(
        server
            .post("/v1/runs", &key)
            .json(&json!({"query": "Ask the helper"}))
            .send()
            .await
            .unwrap(),
    )
    .await;
    let done = live.last().unwrap();
    assert_eq!(done.event, "done");
    assert_eq!(done.data["status"], "completed");
    let run_id = done.data["run_id"].as_str().unwrap().to_string();
    let nested: Vec<&Sse> = live
        .iter()
        .filter(|e| e.data["parent_run_id"] == run_id.as_str())
        .collect();
    // The sub-agent's own `done` did not end the stream.
    assert!(nested.iter().any(|e| e.event == "done"));
    assert!(
        nested
            .iter()
            .any(|e| e.event == "tool_executed" && e.data["tool"] == "test.echo")
    );
    let ids: Vec<u64> = live.iter().map(|e| e.id.parse().unwrap()).collect();
    assert_eq!(ids, (1..=live.len() as u64).collect::<Vec<_>>());

    let replay = read_sse(
        server
            .get(&format!("/v1/runs/{run_id}/events"), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(replay.len(), live.len());
    assert_eq!(
        replay
            .iter()
            .filter(|e| e.data["parent_run_id"] == run_id.as_str())
            .count(),
        nested.len()
    );
    server.shutdown().await;
}
