//! A scripted LLM server: a real HTTP server on 127.0.0.1 that answers from a script of
//! [`Reply`]s in the exact wire format of a provider (JSON or SSE, as the request asks), and
//! records every request body and its headers. [`ScriptedLlm::start`] speaks OpenAI Chat
//! Completions (`POST /v1/chat/completions`), [`ScriptedLlm::start_anthropic`] Anthropic's
//! Messages API (`POST /v1/messages`, `anthropic.rs`), [`ScriptedLlm::start_responses`]
//! OpenAI's Responses API (`POST /v1/responses`, `responses.rs`). One script serves each.
//!
//! ```no_run
//! # async fn demo() {
//! use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
//!
//! let llm = ScriptedLlm::start(vec![
//!     Reply::tool_call("calc", serde_json::json!({"expression": "6*7"})),
//!     Reply::text("42"),
//! ])
//! .await;
//! // point the client at llm.base_url(), run, then inspect llm.requests()
//! # }
//! ```

mod anthropic;
mod render;
mod reply;
mod responses;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

pub use reply::Reply;

use render::Answer;

type Responder = dyn Fn(&Value) -> Reply + Send + Sync;

/// The wire format a scripted server speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    /// OpenAI Chat Completions (`POST /v1/chat/completions`).
    ChatCompletions,
    /// Anthropic's Messages API (`POST /v1/messages`).
    Anthropic,
    /// OpenAI's Responses API (`POST /v1/responses`).
    Responses,
}

/// The server; it stops when dropped.
pub struct ScriptedLlm {
    address: SocketAddr,
    wire: Wire,
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

struct Shared {
    /// Requests and replies under one lock, so the n-th recorded request is the one that got
    /// the n-th reply even when requests race.
    script: Mutex<Script>,
    /// Consulted once the script is empty.
    responder: Option<Box<Responder>>,
    /// Whether requests are kept for `requests()` (not in long-running processes).
    record: bool,
    next_call_id: AtomicU64,
    next_completion_id: AtomicU64,
}

#[derive(Default)]
struct Script {
    replies: VecDeque<Reply>,
    requests: Vec<Value>,
    /// The headers of each recorded request, names in lower case.
    headers: Vec<Vec<(String, String)>>,
}

impl ScriptedLlm {
    /// Serves `script` in order, then answers HTTP 500 to any further request.
    pub async fn start(script: Vec<Reply>) -> ScriptedLlm {
        Self::spawn(script.into(), None, "127.0.0.1:0", true).await
    }

    /// Like [`ScriptedLlm::start`], speaking Anthropic's Messages API.
    pub async fn start_anthropic(script: Vec<Reply>) -> ScriptedLlm {
        Self::start_wire(Wire::Anthropic, script).await
    }

    /// Like [`ScriptedLlm::start`], speaking OpenAI's Responses API.
    pub async fn start_responses(script: Vec<Reply>) -> ScriptedLlm {
        Self::start_wire(Wire::Responses, script).await
    }

    /// Serves `script` in the wire format `wire`.
    pub async fn start_wire(wire: Wire, script: Vec<Reply>) -> ScriptedLlm {
        let mut llm = Self::spawn(script.into(), None, "127.0.0.1:0", true).await;
        llm.wire = wire;
        llm
    }

    /// Answers every request with `responder(&request_body)` (after any pushed replies), for
    /// benchmarks and endless loops.
    pub async fn start_with(
        responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) -> ScriptedLlm {
        Self::spawn(
            VecDeque::new(),
            Some(Box::new(responder)),
            "127.0.0.1:0",
            true,
        )
        .await
    }

    /// Like [`ScriptedLlm::start_with`], listening on `address`, for a long-running process:
    /// requests are not recorded, so memory stays flat.
    pub async fn start_on(
        address: &str,
        responder: impl Fn(&Value) -> Reply + Send + Sync + 'static,
    ) -> ScriptedLlm {
        Self::spawn(VecDeque::new(), Some(Box::new(responder)), address, false).await
    }

    /// The API root to configure as `llm.base_url`: `http://127.0.0.1:PORT/v1` for OpenAI's
    /// APIs, `http://127.0.0.1:PORT` for Anthropic's (whose paths begin with `/v1`).
    pub fn base_url(&self) -> String {
        match self.wire {
            Wire::Anthropic => format!("http://{}", self.address),
            Wire::ChatCompletions | Wire::Responses => format!("http://{}/v1", self.address),
        }
    }

    /// The `[llm] provider` a client of this server is configured with.
    pub fn provider(&self) -> &'static str {
        match self.wire {
            Wire::ChatCompletions => "openai",
            Wire::Anthropic => "anthropic",
            Wire::Responses => "openai_responses",
        }
    }

    pub fn wire(&self) -> Wire {
        self.wire
    }

    /// The JSON bodies received, in order (a body that is not JSON is recorded as a string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.script().requests.clone()
    }

    /// The value of header `name` (lower case) in each recorded request, in order.
    pub fn request_header(&self, name: &str) -> Vec<Option<String>> {
        self.shared
            .script()
            .headers
            .iter()
            .map(|headers| {
                headers
                    .iter()
                    .find(|(header, _)| header == name)
                    .map(|(_, value)| value.clone())
            })
            .collect()
    }

    /// The names of the tools offered in a recorded request body (`tools[].function.name` for
    /// Chat Completions, `tools[].name` for the Messages and Responses APIs).
    pub fn offered_tools(request: &Value) -> Vec<String> {
        request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| {
                tool["function"]["name"]
                    .as_str()
                    .or_else(|| tool["name"].as_str())
                    .map(str::to_string)
            })
            .collect()
    }

    /// Appends a reply to the script.
    pub fn push(&self, reply: Reply) {
        self.shared.script().replies.push_back(reply);
    }

    /// Scripted replies not yet served.
    pub fn remaining(&self) -> usize {
        self.shared.script().replies.len()
    }

    // A fixed signature cannot report a failure to bind a loopback port, and a test cannot go
    // on without its server.
    #[allow(clippy::expect_used)]
    async fn spawn(
        replies: VecDeque<Reply>,
        responder: Option<Box<Responder>>,
        address: &str,
        record: bool,
    ) -> ScriptedLlm {
        let listener = listen(address)
            .await
            .expect("the scripted LLM cannot bind its address");
        let address = listener
            .local_addr()
            .expect("the scripted LLM's listener has no address");
        let shared = Arc::new(Shared {
            script: Mutex::new(Script {
                replies,
                requests: Vec::new(),
                headers: Vec::new(),
            }),
            responder,
            record,
            next_call_id: AtomicU64::new(1),
            next_completion_id: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .route("/v1/messages", post(messages))
            .route("/v1/responses", post(responses))
            .fallback(unknown_route)
            // Long conversations in benchmarks exceed axum's 2 MB default.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared))
            // Routes made once and shared by every connection (see agentloop-server's `serve`).
            .with_state(())
            .into_make_service();
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the scripted LLM stopped");
            }
        });
        ScriptedLlm {
            address,
            wire: Wire::ChatCompletions,
            shared,
            task,
        }
    }
}

/// A listener on `address` that queues as many connections as the system allows: a bench opens
/// thousands of LLM connections at once, and a connection refused by a full queue waits a
/// second for its SYN to be sent again, which is the harness's delay, not the runtime's (an LLM
/// provider's front door does not turn away a burst of a few thousand).
async fn listen(address: &str) -> std::io::Result<tokio::net::TcpListener> {
    let address = tokio::net::lookup_host(address)
        .await?
        .next()
        .ok_or_else(|| std::io::Error::other("the address names no host"))?;
    let socket = match address {
        std::net::SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
        std::net::SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    // The kernel caps it at net.core.somaxconn (4096 on current kernels).
    socket.listen(65_535)
}

impl Drop for ScriptedLlm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl std::fmt::Debug for ScriptedLlm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedLlm")
            .field("base_url", &self.base_url())
            .field("remaining", &self.remaining())
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// A panicking test thread must not hide the recorded requests from the others.
    fn script(&self) -> MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records the request and its headers, then picks its reply.
    fn take_reply_with(&self, request: &Value, headers: &HeaderMap) -> Option<Reply> {
        let scripted = {
            let mut script = self.script();
            if self.record {
                script.requests.push(request.clone());
                let headers = headers
                    .iter()
                    .map(|(name, value)| {
                        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
                        (name.as_str().to_owned(), value)
                    })
                    .collect();
                script.headers.push(headers);
            }
            script.replies.pop_front()
        };
        scripted.or_else(|| self.responder.as_ref().map(|responder| responder(request)))
    }

    fn next_id(counter: &AtomicU64) -> u64 {
        counter.fetch_add(1, Ordering::Relaxed)
    }
}

async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let request = json_body(&body);
    let Some(reply) = shared.take_reply_with(&request, &headers) else {
        return error_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted LLM: the script has no reply left for this request",
        );
    };
    // A zero delay is no delay: tokio's timer would still wait for its next tick (up to 1 ms).
    if let Some(delay) = reply.delay.filter(|delay| !delay.is_zero()) {
        tokio::time::sleep(delay).await;
    }
    let answer = Answer {
        reply: &reply,
        completion_id: format!(
            "chatcmpl-scripted-{}",
            Shared::next_id(&shared.next_completion_id)
        ),
        call_ids: reply
            .calls
            .iter()
            .map(|_| format!("call_{}", Shared::next_id(&shared.next_call_id)))
            .collect(),
        model: request
            .get("model")
            .and_then(Value::as_str)
            .unwrap_or("scripted-model")
            .to_owned(),
        created: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|elapsed| elapsed.as_secs())
            .unwrap_or_default(),
        stream: request.get("stream").and_then(Value::as_bool) == Some(true),
        include_usage: request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true),
    };
    answer.into_response()
}

async fn messages(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = json_body(&body);
    let Some(reply) = shared.take_reply_with(&request, &headers) else {
        let exhausted = reply::ScriptedError {
            status: 500,
            message: "scripted LLM: the script has no reply left for this request".into(),
        };
        return anthropic::error_response(&exhausted);
    };
    let answer = anthropic::MessageAnswer {
        reply: &reply,
        message_id: format!(
            "msg_scripted_{}",
            Shared::next_id(&shared.next_completion_id)
        ),
        call_ids: reply
            .calls
            .iter()
            .map(|_| format!("toolu_{}", Shared::next_id(&shared.next_call_id)))
            .collect(),
        model: model_of(&request),
        stream: request.get("stream").and_then(Value::as_bool) == Some(true),
    };
    answer.into_response()
}

async fn responses(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let request = json_body(&body);
    let Some(reply) = shared.take_reply_with(&request, &headers) else {
        return error_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted LLM: the script has no reply left for this request",
        );
    };
    let answer = responses::ResponseAnswer {
        reply: &reply,
        response_id: format!(
            "resp_scripted_{}",
            Shared::next_id(&shared.next_completion_id)
        ),
        call_ids: reply
            .calls
            .iter()
            .map(|_| format!("call_{}", Shared::next_id(&shared.next_call_id)))
            .collect(),
        model: model_of(&request),
        stream: request.get("stream").and_then(Value::as_bool) == Some(true),
    };
    answer.into_response()
}

fn json_body(body: &Bytes) -> Value {
    serde_json::from_slice::<Value>(body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(body).into_owned()))
}

fn model_of(request: &Value) -> String {
    request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("scripted-model")
        .to_owned()
}

/// The reply's scripted headers (a `retry-after` on an error), added to `response`.
fn add_headers(response: &mut Response, headers: &[(String, String)]) {
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            response.headers_mut().append(name, value);
        }
    }
}

async fn unknown_route(uri: Uri) -> Response {
    error_body(
        StatusCode::NOT_FOUND,
        &format!("scripted LLM: no route for {uri}; use POST /v1/chat/completions"),
    )
}

fn error_body(status: StatusCode, message: &str) -> Response {
    let body = json!({"error": {"message": message, "type": "scripted_llm_error", "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}
