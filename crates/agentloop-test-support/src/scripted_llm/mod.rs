//! A scripted OpenAI-compatible server: a real HTTP server on 127.0.0.1 that answers
//! `POST /v1/chat/completions` from a script of [`Reply`]s, in the exact wire format of
//! api.openai.com (JSON or SSE, as the request asks), and records every request body.
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

mod render;
mod reply;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

pub use reply::Reply;

use render::Answer;

type Responder = dyn Fn(&Value) -> Reply + Send + Sync;

/// The server; it stops when dropped.
pub struct ScriptedLlm {
    address: SocketAddr,
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
}

impl ScriptedLlm {
    /// Serves `script` in order, then answers HTTP 500 to any further request.
    pub async fn start(script: Vec<Reply>) -> ScriptedLlm {
        Self::spawn(script.into(), None, "127.0.0.1:0", true).await
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

    /// The API root to configure as `llm.base_url`: `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// The JSON bodies received on `/v1/chat/completions`, in order (a body that is not JSON is
    /// recorded as a string).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.script().requests.clone()
    }

    /// The names of the tools offered in a recorded request body (`tools[].function.name`).
    pub fn offered_tools(request: &Value) -> Vec<String> {
        request["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|tool| tool["function"]["name"].as_str().map(str::to_string))
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
        let listener = tokio::net::TcpListener::bind(address)
            .await
            .expect("the scripted LLM cannot bind its address");
        let address = listener
            .local_addr()
            .expect("the scripted LLM's listener has no address");
        let shared = Arc::new(Shared {
            script: Mutex::new(Script {
                replies,
                requests: Vec::new(),
            }),
            responder,
            record,
            next_call_id: AtomicU64::new(1),
            next_completion_id: AtomicU64::new(1),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat_completions))
            .fallback(unknown_route)
            // Long conversations in benchmarks exceed axum's 2 MB default.
            .layer(DefaultBodyLimit::disable())
            .with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            if let Err(error) = axum::serve(listener, app).await {
                tracing::error!(%error, "the scripted LLM stopped");
            }
        });
        ScriptedLlm {
            address,
            shared,
            task,
        }
    }
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

    /// Records the request, then picks its reply.
    fn take_reply(&self, request: &Value) -> Option<Reply> {
        let scripted = {
            let mut script = self.script();
            if self.record {
                script.requests.push(request.clone());
            }
            script.replies.pop_front()
        };
        scripted.or_else(|| self.responder.as_ref().map(|responder| responder(request)))
    }

    fn next_id(counter: &AtomicU64) -> u64 {
        counter.fetch_add(1, Ordering::Relaxed)
    }
}

async fn chat_completions(State(shared): State<Arc<Shared>>, body: Bytes) -> Response {
    let request = serde_json::from_slice::<Value>(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    let Some(reply) = shared.take_reply(&request) else {
        return error_body(
            StatusCode::INTERNAL_SERVER_ERROR,
            "scripted LLM: the script has no reply left for this request",
        );
    };
    if let Some(delay) = reply.delay {
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
