//! A webhook receiver that records what it is sent and answers as told, for side-effect tests.

use std::sync::{Arc, Mutex, PoisonError};

use axum::{Json, Router, extract::State, http::StatusCode, routing::post};
use serde_json::Value;

type Answer = dyn Fn(&Value) -> (u16, Value) + Send + Sync;
/// What the endpoint shares: the bodies received, and how to answer.
type Shared = (Arc<Mutex<Vec<Value>>>, Arc<Answer>);

/// An HTTP endpoint on 127.0.0.1 that keeps every JSON body POSTed to it.
pub struct RecordingWebhook {
    url: String,
    received: Arc<Mutex<Vec<Value>>>,
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
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let (status, reply) = answer(&body);
    received
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(body);
    (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(reply),
    )
}
