//! What goes wrong on the way to the model, and what the client does about it.

mod common;

use std::time::{Duration, Instant};

use agentloop_core::LlmError;
use agentloop_llm::{LlmConfig, OpenAiClient};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::{
    RawServer, ask, broken_event_stream, client, client_for, complete, config, event_stream,
    finish_chunk, text_chunk,
};
use serde_json::json;

/// A reply that broke off is reported as cut, never as a server that cannot be reached.
fn assert_cut(error: &LlmError) {
    assert!(matches!(error, LlmError::CutReply { .. }), "{error:?}");
    assert_eq!(error.code(), "llm_truncated_stream");
    let message = error.to_string();
    assert!(message.contains("reply was cut"), "{message}");
    assert!(!message.contains("cannot reach"), "{message}");
    // A cut is worth another attempt: the client makes it only while no text was shown.
    assert!(error.is_retryable());
}

fn client_with_retries(llm: &ScriptedLlm, max_retries: u32) -> OpenAiClient {
    client_for(LlmConfig {
        max_retries,
        ..config(llm.base_url(), true)
    })
}

#[tokio::test]
async fn a_rate_limit_with_retry_after_is_waited_out_then_retried() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(429, "Rate limit reached").with_header("Retry-After", "1"),
        Reply::text("ok"),
    ])
    .await;
    let started = Instant::now();
    let reply = complete(&client(&llm, true), &ask("x")).await.1.unwrap();
    assert_eq!(reply.content.as_deref(), Some("ok"));
    assert_eq!(llm.requests().len(), 2);
    // The test backoff is 5 ms, so only Retry-After explains a wait this long.
    assert!(
        started.elapsed() >= Duration::from_millis(950),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(500, "boom"),
        Reply::error(502, "bad gateway"),
        Reply::text("ok"),
    ])
    .await;
    let reply = complete(&client(&llm, false), &ask("x")).await.1.unwrap();
    assert_eq!(reply.content.as_deref(), Some("ok"));
    assert_eq!(llm.requests().len(), 3);
}

#[tokio::test]
async fn rate_limits_beyond_max_retries_end_with_rate_limited() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(429, "slow down"),
        Reply::error(429, "slow down"),
        Reply::error(429, "slow down, really"),
        Reply::text("never served"),
    ])
    .await;
    let error = complete(&client_with_retries(&llm, 2), &ask("x"))
        .await
        .1
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::RateLimited {
            retries: 2,
            message: "slow down, really".into()
        }
    );
    assert_eq!(llm.requests().len(), 3);
    assert_eq!(llm.remaining(), 1);
}

#[tokio::test]
async fn server_errors_beyond_max_retries_end_with_server() {
    let llm = ScriptedLlm::start(vec![Reply::error(503, "overloaded"); 4]).await;
    let error = complete(&client(&llm, true), &ask("x"))
        .await
        .1
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Server {
            status: 503,
            retries: 3,
            message: "overloaded".into()
        }
    );
    assert_eq!(llm.requests().len(), 4);
}

#[tokio::test]
async fn an_exhausted_script_fails_loudly() {
    let llm = ScriptedLlm::start(Vec::new()).await;
    let error = complete(&client_with_retries(&llm, 0), &ask("x"))
        .await
        .1
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::Server { status: 500, message, .. } if message.contains("no reply left")),
        "{error:?}"
    );
}

#[tokio::test]
async fn unauthorized_is_not_retried_and_quotes_the_provider() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(401, "Incorrect API key provided: sk-te***"),
        Reply::text("never served"),
    ])
    .await;
    let error = complete(&client(&llm, true), &ask("x"))
        .await
        .1
        .unwrap_err();
    assert_eq!(
        error,
        LlmError::Unauthorized {
            url: format!("{}/chat/completions", llm.base_url()),
            status: 401,
            message: "Incorrect API key provided: sk-te***".into(),
            key_env: "OPENAI_API_KEY".into(),
        }
    );
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_rejected_request_is_not_retried() {
    for status in [400, 404, 422] {
        let llm = ScriptedLlm::start(vec![
            Reply::error(status, "Invalid schema for function 'x'"),
            Reply::text("never served"),
        ])
        .await;
        let error = complete(&client(&llm, false), &ask("x"))
            .await
            .1
            .unwrap_err();
        assert_eq!(
            error,
            LlmError::Rejected {
                status,
                message: "Invalid schema for function 'x'".into()
            }
        );
        assert_eq!(llm.requests().len(), 1, "HTTP {status} was retried");
    }
}

#[tokio::test]
async fn a_retry_after_beyond_the_deadline_fails_at_once_with_the_rate_limit() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(429, "quota exceeded").with_header("Retry-After", "30"),
        Reply::text("never served"),
    ])
    .await;
    let client = client_for(LlmConfig {
        timeout_s: 2.0,
        ..config(llm.base_url(), true)
    });
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert_eq!(
        error,
        LlmError::RateLimited {
            retries: 0,
            message: "quota exceeded".into()
        }
    );
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_truncated_stream_is_an_error_not_a_partial_answer() {
    let llm = ScriptedLlm::start(vec![Reply::text("half of an answer").truncated()]).await;
    let (pieces, result) = complete(&client(&llm, true), &ask("x")).await;
    assert_eq!(result, Err(LlmError::TruncatedStream));
    assert_eq!(pieces.concat(), "half of an answer");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_truncated_tool_call_stream_is_an_error() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("fs__read_file", json!({"path": "a"})).truncated(),
        Reply::tool_call("fs__read_file", json!({"path": "a"})),
    ])
    .await;
    let result = complete(&client(&llm, true), &ask("x")).await.1;
    assert_eq!(result, Err(LlmError::TruncatedStream));
    assert_eq!(llm.requests().len(), 1);
}

/// A host that cannot be resolved (as without network or DNS) is told as such, naming the
/// host, not as a server that is not running at `base_url`.
#[tokio::test]
async fn a_host_that_cannot_be_resolved_is_told_as_no_network_or_dns() {
    // `.invalid` never resolves (RFC 6761), with or without a network.
    let base_url = "http://llm.agentloop.invalid/v1".to_owned();
    let client =
        client_for(config(base_url.clone(), true)).with_retry_base_delay(Duration::from_secs(10));
    let started = Instant::now();
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert!(
        matches!(&error, LlmError::NoNetwork { url, host, .. }
            if url.starts_with(&base_url) && host == "llm.agentloop.invalid"),
        "{error:?}"
    );
    assert_eq!(error.code(), "llm_unreachable");
    let message = error.to_string();
    assert!(message.contains("llm.agentloop.invalid"), "{message}");
    assert!(message.contains("network"), "{message}");
    assert!(message.contains("DNS"), "{message}");
    assert!(!message.contains("running"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_refused_connection_is_unreachable_at_once() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
    drop(listener);
    // A retry would wait at least 5 s with this backoff.
    let client =
        client_for(config(base_url.clone(), true)).with_retry_base_delay(Duration::from_secs(10));
    let started = Instant::now();
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert!(
        matches!(&error, LlmError::Unreachable { url, .. } if url.starts_with(&base_url)),
        "{error:?}"
    );
    assert_eq!(error.code(), "llm_unreachable");
    assert!(
        error.to_string().contains("cannot reach the LLM"),
        "{error}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("too late").with_delay(Duration::from_secs(5)),
    ])
    .await;
    let client = client_for(LlmConfig {
        timeout_s: 0.5,
        ..config(llm.base_url(), true)
    });
    let started = Instant::now();
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert_eq!(error, LlmError::Timeout { seconds: 0.5 });
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn no_key_for_api_openai_com_fails_before_sending() {
    let client = OpenAiClient::with_api_key(LlmConfig::default(), None).unwrap();
    // Sent, the request would fail as unreachable (offline) or unauthorized (online).
    let error = complete(&client, &ask("x")).await.1.unwrap_err();
    assert_eq!(
        error,
        LlmError::MissingApiKey {
            url: "https://api.openai.com/v1/chat/completions".into(),
            key_env: "OPENAI_API_KEY".into(),
            base_url_env: "OPENAI_BASE_URL".into(),
        }
    );
}

#[tokio::test]
async fn a_connection_closed_before_the_answer_is_retried() {
    let server = RawServer::start(vec![
        String::new(),
        event_stream(&[
            text_chunk("fine").to_string(),
            finish_chunk().to_string(),
            "[DONE]".into(),
        ]),
    ])
    .await;
    let client = client_for(config(server.base_url.clone(), true));
    let (pieces, reply) = complete(&client, &ask("x")).await;
    assert_eq!(reply.unwrap().content.as_deref(), Some("fine"));
    assert_eq!(pieces, ["fine"]);
}

#[tokio::test]
async fn a_stream_broken_after_text_is_not_retried() {
    let server = RawServer::start(vec![
        broken_event_stream(&[text_chunk("Once upon")]),
        event_stream(&[
            text_chunk("Once upon a time").to_string(),
            finish_chunk().to_string(),
        ]),
    ])
    .await;
    let client = client_for(config(server.base_url.clone(), true));
    let (pieces, result) = complete(&client, &ask("x")).await;
    assert_cut(&result.unwrap_err());
    assert_eq!(pieces, ["Once upon"], "text was shown twice");
}

#[tokio::test]
async fn a_stream_broken_before_any_text_is_retried() {
    let role_only =
        json!({"choices": [{"index": 0, "delta": {"role": "assistant"}, "finish_reason": null}]});
    let server = RawServer::start(vec![
        broken_event_stream(&[role_only]),
        event_stream(&[text_chunk("whole").to_string(), finish_chunk().to_string()]),
    ])
    .await;
    let client = client_for(config(server.base_url.clone(), true));
    let (pieces, reply) = complete(&client, &ask("x")).await;
    assert_eq!(reply.unwrap().content.as_deref(), Some("whole"));
    assert_eq!(pieces, ["whole"]);
}

#[tokio::test]
async fn an_error_inside_the_stream_is_surfaced_with_its_message() {
    let error_event = json!({"error": {"message": "Upstream model crashed", "code": 502}});
    let server = RawServer::start(vec![event_stream(&[
        text_chunk("Hi").to_string(),
        error_event.to_string(),
    ])])
    .await;
    let client = client_for(config(server.base_url.clone(), true));
    let (pieces, result) = complete(&client, &ask("x")).await;
    assert_eq!(
        result,
        Err(LlmError::Server {
            status: 502,
            retries: 0,
            message: "Upstream model crashed".into()
        })
    );
    assert_eq!(pieces, ["Hi"]);
}

#[tokio::test]
async fn a_stream_cut_inside_a_tool_call_delta_is_a_cut_reply_not_unreachable() {
    let cut = Reply::tool_call("fs__read_file", json!({"path": "a"})).cut_mid_tool_call();
    let llm = ScriptedLlm::start(vec![cut.clone(), cut]).await;
    let (pieces, result) = complete(&client_with_retries(&llm, 1), &ask("x")).await;
    let error = result.unwrap_err();
    assert_cut(&error);
    assert!(
        error.to_string().contains("still cut after 1 retries"),
        "{error}"
    );
    assert!(pieces.is_empty());
    // Nothing was shown and half a tool call never runs: the cut was worth one retry.
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_cut_inside_a_tool_call_delta_is_retried_while_nothing_was_shown() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("fs__read_file", json!({"path": "a"})).cut_mid_tool_call(),
        Reply::tool_call("fs__read_file", json!({"path": "a"})),
    ])
    .await;
    let reply = complete(&client(&llm, true), &ask("x")).await.1.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    assert_eq!(reply.tool_calls[0].arguments, r#"{"path":"a"}"#);
    assert_eq!(llm.requests().len(), 2);
}

#[tokio::test]
async fn a_tool_call_cut_after_its_text_was_shown_is_not_retried() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("fs__read_file", json!({"path": "a"}))
            .with_text("Let me look")
            .cut_mid_tool_call(),
        Reply::text("never served"),
    ])
    .await;
    let (pieces, result) = complete(&client(&llm, true), &ask("x")).await;
    assert_cut(&result.unwrap_err());
    assert_eq!(pieces.concat(), "Let me look");
    assert_eq!(llm.requests().len(), 1);
}

#[tokio::test]
async fn a_body_shorter_than_its_content_length_is_a_cut_reply_not_unreachable() {
    for stream in [false, true] {
        let short =
            Reply::tool_call("fs__read_file", json!({"path": "a"})).shorter_than_content_length();
        let llm = ScriptedLlm::start(vec![short.clone(), short]).await;
        let client = client_for(LlmConfig {
            max_retries: 1,
            ..config(llm.base_url(), stream)
        });
        let error = complete(&client, &ask("x")).await.1.unwrap_err();
        assert_cut(&error);
        assert_eq!(llm.requests().len(), 2, "stream: {stream}");
    }
}

/// An HTTP answer with `status` and an HTML page (a web server's own 404, not an API).
fn html_answer(status: &str, page: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: \
         close\r\n\r\n{page}",
        page.len()
    )
}

const NOT_FOUND_PAGE: &str = "<!DOCTYPE html><html><head><title>404 Not Found</title></head>\
    <body><h1>Not Found</h1><p>The requested URL was not found on this server.</p>\
    <hr><address>Apache/2.4.62 Server at 127.0.0.1</address></body></html>";

#[tokio::test]
async fn a_web_server_behind_base_url_is_named_with_its_setting_and_the_missing_v1() {
    let server = RawServer::start(vec![html_answer("404 Not Found", NOT_FOUND_PAGE)]).await;
    // The API root without /v1: the usual mistake.
    let root = server.base_url.trim_end_matches("/v1").to_string();
    let client = client_for(config(root.clone(), true))
        .with_base_url_origin("the OPENAI_BASE_URL environment variable");
    let (_, result) = complete(&client, &ask("x")).await;
    let error = result.unwrap_err();
    assert_eq!(error.code(), "llm_rejected");
    let message = error.to_string();
    assert!(
        message.contains(&format!(
            "{root}/chat/completions answered HTTP 404 with an HTML page"
        )),
        "{message}"
    );
    assert!(message.contains("\"404 Not Found\""), "{message}");
    assert!(
        message.contains("the OPENAI_BASE_URL environment variable"),
        "{message}"
    );
    assert!(message.contains(&format!("try {root}/v1")), "{message}");
    assert!(!message.contains('<'), "a page of HTML: {message}");
    assert!(!message.contains("Apache/2.4.62"), "not trimmed: {message}");
}

#[tokio::test]
async fn a_web_page_answered_with_200_is_not_read_as_a_completion() {
    let server = RawServer::start(vec![html_answer("200 OK", NOT_FOUND_PAGE)]).await;
    let client = client_for(config(server.base_url.clone(), false));
    let (_, result) = complete(&client, &ask("x")).await;
    let error = result.unwrap_err();
    assert_eq!(error.code(), "llm_protocol_error");
    let message = error.to_string();
    assert!(
        message.contains("answered HTTP 200 with an HTML page"),
        "{message}"
    );
    // Unknown origin: both settings are named.
    assert!(message.contains("OPENAI_BASE_URL"), "{message}");
    assert!(
        message.contains("API root of an OpenAI-compatible server"),
        "{message}"
    );
    assert!(!message.contains('<'), "{message}");
}

/// Every provider tells a web page apart from its API, naming its own path and variable.
#[tokio::test]
async fn anthropic_and_responses_name_their_own_path_and_base_url_variable() {
    use agentloop_llm::{Provider, client_for, client_for_with_origin};

    // Anthropic's root ends before /v1: the client adds /v1/messages.
    let server = RawServer::start(vec![html_answer("404 Not Found", NOT_FOUND_PAGE)]).await;
    let anthropic = LlmConfig {
        provider: Provider::Anthropic,
        max_retries: 0,
        ..config(server.base_url.clone(), true)
    };
    let client =
        client_for_with_origin(&anthropic, "the ANTHROPIC_BASE_URL environment variable").unwrap();
    let (_, result) = complete(client.as_ref(), &ask("x")).await;
    let message = result.unwrap_err().to_string();
    let root = server.base_url.trim_end_matches("/v1");
    assert!(
        message.contains(&format!(
            "{}/v1/messages answered HTTP 404 with an HTML page (\"404 Not Found\"), not an \
             Anthropic Messages API reply",
            server.base_url
        )),
        "{message}"
    );
    assert!(
        message.contains("the ANTHROPIC_BASE_URL environment variable"),
        "{message}"
    );
    assert!(message.contains(&format!("try {root})")), "{message}");
    assert!(!message.contains('<'), "{message}");

    // A 200 page where the Responses API was expected, with no origin told: the provider's
    // own variable is named.
    let server = RawServer::start(vec![html_answer("200 OK", NOT_FOUND_PAGE)]).await;
    let responses = LlmConfig {
        provider: Provider::OpenAiResponses,
        ..config(server.base_url.clone(), false)
    };
    let client = client_for(&responses).unwrap();
    let (_, result) = complete(client.as_ref(), &ask("x")).await;
    let error = result.unwrap_err();
    assert_eq!(error.code(), "llm_protocol_error");
    let message = error.to_string();
    assert!(
        message.contains("/responses answered HTTP 200 with an HTML page"),
        "{message}"
    );
    assert!(message.contains("plus /responses"), "{message}");
    assert!(message.contains("OPENAI_BASE_URL"), "{message}");
    assert!(!message.contains('<'), "{message}");
}
