//! Shared set-up: a client pointed at a scripted server, and a raw TCP server for the failures
//! an HTTP framework cannot produce (connections closed mid-answer).
// Each test binary uses a part of this; a failed set-up must fail the test loudly.
#![allow(dead_code, clippy::unwrap_used)]

use std::{sync::Arc, time::Duration};

use agentloop_core::{
    CallPurpose, Llm, LlmError, ModelReply, ModelRequest, ToolChoice, ToolSpec,
    protocol::ChatMessage,
};
use agentloop_llm::{LlmConfig, OpenAiClient};
use agentloop_test_support::scripted_llm::ScriptedLlm;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// Small enough that retry tests stay fast, large enough to be a real wait.
pub const TEST_BASE_DELAY: Duration = Duration::from_millis(5);

pub fn config(base_url: String, stream: bool) -> LlmConfig {
    LlmConfig {
        base_url: Some(base_url),
        model: "scripted".into(),
        stream,
        timeout_s: 10.0,
        ..LlmConfig::default()
    }
}

pub fn client_for(config: LlmConfig) -> OpenAiClient {
    OpenAiClient::with_api_key(config, Some("sk-test".into()))
        .unwrap()
        .with_retry_base_delay(TEST_BASE_DELAY)
}

pub fn client(llm: &ScriptedLlm, stream: bool) -> OpenAiClient {
    client_for(config(llm.base_url(), stream))
}

pub fn ask(text: &str) -> ModelRequest {
    ModelRequest {
        model: None,
        messages: vec![
            Arc::new(ChatMessage::system("You are terse.")),
            Arc::new(ChatMessage::user(text)),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::Auto,
        purpose: CallPurpose::Step,
        output: None,
    }
}

pub fn read_file_tool() -> std::sync::Arc<ToolSpec> {
    std::sync::Arc::new(ToolSpec {
        name: "fs__read_file".into(),
        description: "Read a file".into(),
        parameters: Arc::new(json!({"type": "object", "properties": {"path": {"type": "string"}}})),
    })
}

/// Runs one call and returns the text pieces passed to `on_text` with the result.
pub async fn complete(
    client: &dyn Llm,
    request: &ModelRequest,
) -> (Vec<String>, Result<ModelReply, LlmError>) {
    let mut pieces = Vec::new();
    let mut on_text = |text: &str| pieces.push(text.to_owned());
    let result = client.complete(request, &mut on_text).await;
    (pieces, result)
}

/// What a raw connection receives: bytes to write, then the connection is closed.
pub struct RawServer {
    pub base_url: String,
    task: JoinHandle<()>,
}

impl RawServer {
    /// Answers the n-th connection with `answers[n]` (after reading the request), then closes it.
    pub async fn start(answers: Vec<String>) -> RawServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base_url = format!("http://{}/v1", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            for answer in answers {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                read_request(&mut socket).await;
                let _ = socket.write_all(answer.as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        RawServer { base_url, task }
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Reads headers and a `Content-Length` body, so closing afterwards cannot reset a request the
/// client is still writing.
async fn read_request(socket: &mut TcpStream) {
    let mut received = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let Ok(read) = socket.read(&mut buffer).await else {
            return;
        };
        if read == 0 {
            return;
        }
        received.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&received);
        if let Some(end) = text.find("\r\n\r\n") {
            let length = text[..end]
                .lines()
                .find_map(|line| {
                    let (name, value) = line.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())?
                })
                .unwrap_or(0);
            if received.len() >= end + 4 + length {
                return;
            }
        }
    }
}

/// An SSE answer in chunked encoding that stops after `events`, with no terminating chunk:
/// to the client the connection breaks mid-body.
pub fn broken_event_stream(events: &[serde_json::Value]) -> String {
    let mut answer = String::from(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n",
    );
    for event in events {
        let data = format!("data: {event}\n\n");
        answer.push_str(&format!("{:x}\r\n{data}\r\n", data.len()));
    }
    answer
}

/// A complete SSE answer with the given `data:` payloads.
pub fn event_stream(payloads: &[String]) -> String {
    let body: String = payloads
        .iter()
        .map(|payload| format!("data: {payload}\n\n"))
        .collect();
    format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

pub fn text_chunk(text: &str) -> serde_json::Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {"content": text}, "finish_reason": null}]})
}

pub fn finish_chunk() -> serde_json::Value {
    json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
}
