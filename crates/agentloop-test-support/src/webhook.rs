//! A webhook receiver that records what it is sent and answers as told, for side-effect tests.

use std::sync::{Arc, Mutex, PoisonError};

use axum::{
    Json, Router,
    extract::State,
    http::{HeaderMap, StatusCode},
    routing::post,
};
use serde_json::Value;

type Answer = dyn Fn(&Value) -> (u16, Value) + Send + Sync;
/// A request received: its headers (lowercase names, text values) and JSON body.
pub type Received = (Value, Value);
/// What the endpoint shares: the requests received, and how to answer.
type Shared = (Arc<Mutex<Vec<Received>>>, Arc<Answer>);

/// An HTTP endpoint on 127.0.0.1 that keeps every JSON body POSTed to it.
pub struct RecordingWebhook {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
    task: tokio::task::JoinHandle<()>,
}

impl RecordingWebhook {
    /// Answers each request with `answer(&body)`: a status and a JSON body.
    #[allow(clippy::expect_used)] // test support: no port, no test
    pub async fn start(answer: impl Fn(&Value) -> (u16, Value) + Send + Sync + 'static) -> Self {
        let received = Arc::new(Mutex::new(Vec::new()));
        let state: Shared = (received.clone(), Arc::new(answer));
        let app = Router::new()
            .route("/hook", post(receive))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind a port for the webhook");
        let url = format!(
            "http://{}/hook",
            listener.local_addr().expect("its address")
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self {
            url,
            received,
            task,
        }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The bodies received, in order.
    pub fn received(&self) -> Vec<Value> {
        self.requests().into_iter().map(|(_, body)| body).collect()
    }

    /// The requests received (headers and body), in order.
    pub fn requests(&self) -> Vec<Received> {
        self.received
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for RecordingWebhook {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn receive(
    State((received, answer)): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let (status, reply) = answer(&body);
    let headers: serde_json::Map<String, Value> = headers
        .iter()
        .map(|(name, value)| {
            (
                name.as_str().to_string(),
                Value::String(String::from_utf8_lossy(value.as_bytes()).into_owned()),
            )
        })
        .collect();
    received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push((Value::Object(headers), body));
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(reply),
    )
}
