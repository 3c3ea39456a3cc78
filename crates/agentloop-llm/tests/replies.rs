//! Replies read over real HTTP from the scripted server, streamed and not.

use std::sync::Arc;

mod common;

use agentloop_core::protocol::{ChatMessage, ToolCall, Usage};
use agentloop_core::{ModelRequest, ToolChoice};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::{ask, client, complete, read_file_tool};
use serde_json::{Value, json};

const ANSWER: &str = "The answer is forty two, as computed.";

#[tokio::test]
async fn a_text_reply_without_streaming_is_passed_on_whole() {
    let llm = ScriptedLlm::start(vec![Reply::text(ANSWER)]).await;
    let (pieces, reply) = complete(&client(&llm, false), &ask("6 x 7?")).await;
    let reply = reply.unwrap();
    assert_eq!(pieces, [ANSWER]);
    assert_eq!(reply.content.as_deref(), Some(ANSWER));
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(llm.requests()[0]["stream"], false);
}

#[tokio::test]
async fn a_streamed_text_reply_arrives_in_pieces_that_make_the_text() {
    let llm = ScriptedLlm::start(vec![Reply::text(ANSWER)]).await;
    let (pieces, reply) = complete(&client(&llm, true), &ask("6 x 7?")).await;
    let reply = reply.unwrap();
    assert!(pieces.len() > 1, "one piece only: {pieces:?}");
    assert_eq!(pieces.concat(), ANSWER);
    assert_eq!(reply.content.as_deref(), Some(ANSWER));
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(llm.requests()[0]["stream"], true);
}

fn parallel_calls() -> Reply {
    Reply::tool_calls(vec![
        ("fs__read_file", json!({"path": "src/main.rs"})),
        (
            "web__search",
            json!({"query": "rust \"async\" traits", "limit": 3, "tags": ["a", "é"]}),
        ),
    ])
}

fn assert_parallel_calls(calls: &[ToolCall]) {
    assert_eq!(calls.len(), 2, "{calls:?}");
    assert_eq!(calls[0].name, "fs__read_file");
    assert_eq!(calls[1].name, "web__search");
    assert!(!calls[0].id.is_empty());
    assert_ne!(calls[0].id, calls[1].id);
    let arguments: Vec<Option<Value>> = calls
        .iter()
        .map(|call| serde_json::from_str(&call.arguments).ok())
        .collect();
    assert_eq!(arguments[0], Some(json!({"path": "src/main.rs"})));
    assert_eq!(
        arguments[1],
        Some(json!({"query": "rust \"async\" traits", "limit": 3, "tags": ["a", "é"]}))
    );
}

#[tokio::test]
async fn parallel_tool_calls_are_assembled_from_streamed_deltas() {
    let llm = ScriptedLlm::start(vec![parallel_calls().with_text("Let me look.")]).await;
    let (pieces, reply) = complete(&client(&llm, true), &ask("look")).await;
    let reply = reply.unwrap();
    assert_parallel_calls(&reply.tool_calls);
    assert_eq!(pieces.concat(), "Let me look.");
    assert_eq!(reply.content.as_deref(), Some("Let me look."));
    assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn parallel_tool_calls_are_read_without_streaming() {
    let llm = ScriptedLlm::start(vec![parallel_calls()]).await;
    let (pieces, reply) = complete(&client(&llm, false), &ask("look")).await;
    let reply = reply.unwrap();
    assert_parallel_calls(&reply.tool_calls);
    assert!(pieces.is_empty());
    assert_eq!(reply.content, None);
}

#[tokio::test]
async fn arguments_that_are_not_json_are_kept_verbatim() {
    for stream in [true, false] {
        let llm =
            ScriptedLlm::start(vec![Reply::raw_tool_call("fs__read_file", "{\"path\": ")]).await;
        let reply = complete(&client(&llm, stream), &ask("x")).await.1.unwrap();
        assert_eq!(
            reply.tool_calls[0].arguments, "{\"path\": ",
            "stream={stream}"
        );
    }
}

#[tokio::test]
async fn usage_is_read_in_both_modes() {
    for stream in [true, false] {
        let llm = ScriptedLlm::start(vec![Reply::text("ok").with_usage(321, 54)]).await;
        let reply = complete(&client(&llm, stream), &ask("x")).await.1.unwrap();
        let expected = Usage {
            prompt_tokens: 321,
            completion_tokens: 54,
            ..Usage::default()
        };
        assert_eq!(reply.usage, Some(expected), "stream={stream}");
    }
}

#[tokio::test]
async fn the_model_that_answered_and_the_reply_id_are_read_in_both_modes() {
    for stream in [true, false] {
        let llm = ScriptedLlm::start(vec![Reply::text("ok")]).await;
        let mut request = ask("x");
        request.model = Some("gpt-4o-mini-2024-07-18".into());
        let reply = complete(&client(&llm, stream), &request).await.1.unwrap();
        // The scripted server answers as the model asked for, as OpenAI does.
        assert_eq!(
            reply.model.as_deref(),
            Some("gpt-4o-mini-2024-07-18"),
            "stream={stream}"
        );
        let id = reply.id.as_deref().unwrap_or_default();
        assert!(
            id.starts_with("chatcmpl-scripted-"),
            "stream={stream}: {id}"
        );
    }
}

#[tokio::test]
async fn an_empty_reply_has_neither_text_nor_calls() {
    for stream in [true, false] {
        let llm = ScriptedLlm::start(vec![Reply::empty()]).await;
        let (pieces, reply) = complete(&client(&llm, stream), &ask("x")).await;
        let reply = reply.unwrap();
        assert!(pieces.is_empty());
        assert_eq!(reply.text(), None);
        assert!(reply.tool_calls.is_empty());
        assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    }
}

#[tokio::test]
async fn the_request_carries_tools_tool_choice_and_stream_options() {
    let llm = ScriptedLlm::start(vec![Reply::text("ok")]).await;
    let call = ToolCall {
        id: "call_7".into(),
        name: "fs__read_file".into(),
        arguments: r#"{"path":"a"}"#.into(),
    };
    let request = ModelRequest {
        messages: vec![
            Arc::new(ChatMessage::user("read a")),
            Arc::new(ChatMessage::assistant_tool_calls(None, vec![call])),
            Arc::new(ChatMessage::tool_result("call_7", "contents of a")),
        ],
        tools: vec![read_file_tool()],
        tool_choice: ToolChoice::None,
        ..ask("")
    };
    complete(&client(&llm, true), &request).await.1.unwrap();
    let body = &llm.requests()[0];
    assert_eq!(body["model"], "scripted");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["tool_choice"], "none");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {
            "name": "fs__read_file",
            "description": "Read a file",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
        }}])
    );
    assert_eq!(
        body["messages"],
        json!([
            {"role": "user", "content": "read a"},
            {"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_7", "type": "function",
                "function": {"name": "fs__read_file", "arguments": "{\"path\":\"a\"}"},
            }]},
            {"role": "tool", "content": "contents of a", "tool_call_id": "call_7"},
        ])
    );
}

#[tokio::test]
async fn without_tools_the_request_has_no_tools_or_tool_choice() {
    let llm = ScriptedLlm::start(vec![Reply::text("ok")]).await;
    let request = ModelRequest {
        model: Some("other-model".into()),
        ..ask("hi")
    };
    complete(&client(&llm, false), &request).await.1.unwrap();
    let body = llm.requests()[0].clone();
    let keys: Vec<&str> = body
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    assert_eq!(keys.len(), 3, "{body}");
    assert_eq!(body["model"], "other-model");
    assert_eq!(body["stream"], false);
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "hi"})
    );
}
