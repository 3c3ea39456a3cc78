//! The Anthropic and Responses clients against their scripted servers over HTTP: what the
//! loop-level tests (`crates/agentloop/tests/providers.rs`) do not reach: whole (non-streamed)
//! replies, stop reasons, the requests' wire shape.
#![allow(clippy::unwrap_used)] // test code

mod common;

use agentloop_core::{Llm, LlmError, ModelReply, ModelRequest};
use agentloop_llm::{AnthropicClient, LlmConfig, Provider, ResponsesClient};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::{TEST_BASE_DELAY, ask, read_file_tool};
use serde_json::json;

fn config(llm: &ScriptedLlm, provider: Provider, stream: bool) -> LlmConfig {
    LlmConfig {
        provider,
        stream,
        ..common::config(llm.base_url(), stream)
    }
}

fn anthropic(llm: &ScriptedLlm, stream: bool) -> AnthropicClient {
    AnthropicClient::with_api_key(
        config(llm, Provider::Anthropic, stream),
        Some("sk-ant".into()),
    )
    .unwrap()
    .with_retry_base_delay(TEST_BASE_DELAY)
}

fn responses(llm: &ScriptedLlm, stream: bool) -> ResponsesClient {
    let config = config(llm, Provider::OpenAiResponses, stream);
    ResponsesClient::with_api_key(config, Some("sk-test".into()))
        .unwrap()
        .with_retry_base_delay(TEST_BASE_DELAY)
}

async fn complete(
    client: &dyn Llm,
    request: &ModelRequest,
) -> (String, Result<ModelReply, LlmError>) {
    let mut shown = String::new();
    let mut on_text = |text: &str| shown.push_str(text);
    let result = client.complete(request, &mut on_text).await;
    (shown, result)
}

fn with_tool(text: &str) -> ModelRequest {
    let mut request = ask(text);
    request.tools = vec![read_file_tool()];
    request
}

#[tokio::test]
async fn anthropic_replies_read_the_same_streamed_or_whole() {
    for stream in [true, false] {
        let llm = ScriptedLlm::start_anthropic(vec![
            Reply::tool_calls(vec![
                ("fs__read_file", json!({"path": "a"})),
                ("fs__read_file", json!({"path": "b"})),
            ])
            .with_text("Reading both.")
            .with_usage(100, 7)
            .with_cache(60, 30),
        ])
        .await;
        let (shown, reply) = complete(&anthropic(&llm, stream), &with_tool("read a and b")).await;
        let reply = reply.unwrap();
        assert_eq!(shown, "Reading both.", "stream={stream}");
        let id = reply.id.as_deref().unwrap_or_default();
        assert!(id.starts_with("msg_scripted_"), "stream={stream}: {id}");
        assert_eq!(reply.content.as_deref(), Some("Reading both."));
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        let calls: Vec<(&str, &str)> = reply
            .tool_calls
            .iter()
            .map(|call| (call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("fs__read_file", r#"{"path":"a"}"#),
                ("fs__read_file", r#"{"path":"b"}"#)
            ],
            "stream={stream}"
        );
        let usage = reply.usage.unwrap();
        assert_eq!(
            (usage.prompt_tokens, usage.completion_tokens),
            (100, 7),
            "stream={stream}"
        );
        assert_eq!(
            (usage.cache_read_tokens, usage.cache_creation_tokens),
            (60, 30)
        );
        let request = &llm.requests()[0];
        assert_eq!(request["stream"], stream);
        assert_eq!(request["system"][0]["text"], "You are terse.");
        assert_eq!(
            request["messages"],
            json!([{"role": "user", "content": [{"type": "text", "text": "read a and b"}]}])
        );
        assert_eq!(
            llm.request_header("x-api-key")[0].as_deref(),
            Some("sk-ant")
        );
    }
}

#[tokio::test]
async fn anthropic_max_tokens_says_to_raise_the_setting() {
    let llm =
        ScriptedLlm::start_anthropic(vec![Reply::text("cut sho").with_stop_reason("max_tokens")])
            .await;
    let client = AnthropicClient::with_api_key(
        LlmConfig {
            max_tokens: Some(50),
            ..config(&llm, Provider::Anthropic, false)
        },
        None,
    )
    .unwrap();
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert_eq!(error, LlmError::MaxTokens { limit: 50 });
    assert!(
        error.to_string().contains("raise llm.max_tokens"),
        "{error}"
    );
    assert_eq!(llm.requests()[0]["max_tokens"], 50);
}

#[tokio::test]
async fn anthropic_refusal_is_the_answer_and_pause_turn_is_continued() {
    let llm = ScriptedLlm::start_anthropic(vec![
        Reply::tool_call("fs__read_file", json!({"path": "x"})).with_stop_reason("refusal"),
        Reply::text("Half of it, ").with_stop_reason("pause_turn"),
        Reply::text("then the rest."),
    ])
    .await;
    let client = anthropic(&llm, true);
    let refused = complete(&client, &with_tool("x")).await.1.unwrap();
    assert!(
        refused.tool_calls.is_empty(),
        "no call of a refused turn runs"
    );
    assert_eq!(refused.finish_reason.as_deref(), Some("refusal"));
    assert!(refused.content.unwrap().contains("declined"));

    let (shown, reply) = complete(&client, &ask("long")).await;
    let reply = reply.unwrap();
    assert_eq!(reply.content.as_deref(), Some("Half of it, then the rest."));
    assert_eq!(shown, "Half of it, then the rest.");
    assert_eq!(reply.usage.unwrap().completion_tokens, 10);
    let continued = &llm.requests()[2]["messages"];
    assert_eq!(
        continued[1],
        json!({"role": "assistant", "content": [{"type": "text", "text": "Half of it, "}]})
    );
}

#[tokio::test]
async fn anthropic_bad_requests_are_not_retried() {
    let llm = ScriptedLlm::start_anthropic(vec![
        Reply::error(400, "max_tokens: must be at most 8192"),
        Reply::text("never"),
    ])
    .await;
    let error = complete(&anthropic(&llm, true), &ask("x"))
        .await
        .1
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Rejected {
            status: 400,
            message: "max_tokens: must be at most 8192".into()
        }
    );
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn responses_replies_read_the_same_streamed_or_whole() {
    for stream in [true, false] {
        let llm = ScriptedLlm::start_responses(vec![
            Reply::tool_calls(vec![
                ("fs__read_file", json!({"path": "a"})),
                ("fs__read_file", json!({"path": "b"})),
            ])
            .with_text("Reading both.")
            .with_usage(100, 7)
            .with_cache(60, 0)
            .with_reasoning("enc", 3),
        ])
        .await;
        let (shown, reply) = complete(&responses(&llm, stream), &with_tool("read a and b")).await;
        let reply = reply.unwrap();
        assert_eq!(shown, "Reading both.", "stream={stream}");
        let id = reply.id.as_deref().unwrap_or_default();
        assert!(id.starts_with("resp_scripted_"), "stream={stream}: {id}");
        assert_eq!(reply.tool_calls.len(), 2);
        assert_eq!(reply.tool_calls[1].arguments, r#"{"path":"b"}"#);
        let usage = reply.usage.unwrap();
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cache_read_tokens,
                usage.reasoning_tokens
            ),
            (100, 60, 3),
            "stream={stream}"
        );
        let request = &llm.requests()[0];
        assert_eq!(request["store"], false);
        assert_eq!(request["tool_choice"], "auto");
        assert_eq!(request["tools"][0]["name"], "fs__read_file");
        assert_eq!(
            request["input"],
            json!([
                {"type": "message", "role": "system", "content": "You are terse."},
                {"type": "message", "role": "user", "content": "read a and b"},
            ])
        );
    }
}

#[tokio::test]
async fn responses_incomplete_at_max_output_tokens_says_to_raise_the_setting() {
    let llm =
        ScriptedLlm::start_responses(vec![Reply::text("cut").with_stop_reason("max_tokens")]).await;
    let client = ResponsesClient::with_api_key(
        LlmConfig {
            max_tokens: Some(64),
            ..config(&llm, Provider::OpenAiResponses, true)
        },
        None,
    )
    .unwrap();
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert_eq!(error, LlmError::MaxTokens { limit: 64 });
    assert_eq!(llm.requests()[0]["max_output_tokens"], 64);
}
