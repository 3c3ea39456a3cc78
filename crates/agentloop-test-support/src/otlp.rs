//! A real OTLP/HTTP trace receiver for tests: `POST /v1/traces` with a protobuf
//! `ExportTraceServiceRequest`, decoded with the maintained `opentelemetry-proto` types. It
//! keeps every span it receives, with its ids in hex and its attributes as JSON values.

use std::{
    collections::BTreeMap,
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use axum::{
    Router,
    body::Bytes,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
    routing::post,
};
use opentelemetry_proto::tonic::{
    collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse},
    common::v1::{AnyValue, any_value},
};
use prost::Message;
use serde_json::{Value, json};
use tokio::{net::TcpListener, task::JoinHandle};

/// One span as it arrived.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub name: String,
    /// Hex, as in a `traceparent`.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP's `SpanKind`: 1 internal, 2 server, 3 client.
    pub kind: i32,
    pub attributes: BTreeMap<String, Value>,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status_code: i32,
    /// The `service.name` of its resource.
    pub service_name: Option<String>,
}

impl ReceivedSpan {
    pub fn attribute(&self, key: &str) -> Option<&Value> {
        self.attributes.get(key)
    }

    /// The attribute as text (`None` when absent or not text).
    pub fn text(&self, key: &str) -> Option<&str> {
        self.attribute(key).and_then(Value::as_str)
    }

    pub fn integer(&self, key: &str) -> Option<i64> {
        self.attribute(key).and_then(Value::as_i64)
    }
}

type Received = Arc<Mutex<Vec<ReceivedSpan>>>;

/// The receiver, listening on 127.0.0.1 until dropped.
pub struct OtlpReceiver {
    base_url: String,
    spans: Received,
    task: JoinHandle<()>,
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OtlpReceiver {
    pub async fn start() -> std::io::Result<OtlpReceiver> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let base_url = format!("http://{}", listener.local_addr()?);
        let spans = Received::default();
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .with_state(spans.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(OtlpReceiver {
            base_url,
            spans,
            task,
        })
    }

    /// The base URL, as `OTEL_EXPORTER_OTLP_ENDPOINT` or `[telemetry] otlp_endpoint` take it.
    pub fn endpoint(&self) -> &str {
        &self.base_url
    }

    /// Every span received so far, in the order they arrived.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits (at most `limit`) until `count` spans named like `name` (a prefix) arrived, and
    /// gives every span received.
    pub async fn wait_for(&self, name: &str, count: usize, limit: Duration) -> Vec<ReceivedSpan> {
        let what = format!("{count} spans named {name}...");
        crate::wait::until(&what, limit, || {
            self.spans()
                .iter()
                .filter(|span| span.name.starts_with(name))
                .count()
                >= count
        })
        .await;
        self.spans()
    }
}

async fn receive(State(spans): State<Received>, body: Bytes) -> impl IntoResponse {
    let request = match ExportTraceServiceRequest::decode(body) {
        Ok(request) => request,
        Err(error) => return (StatusCode::BAD_REQUEST, error.to_string()).into_response(),
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let service_name = resource_spans.resource.as_ref().and_then(|resource| {
            resource
                .attributes
                .iter()
                .find(|attribute| attribute.key == "service.name")
                .and_then(|attribute| {
                    json_of(attribute.value.as_ref())
                        .as_str()
                        .map(str::to_string)
                })
        });
        for scope_spans in resource_spans.scope_spans {
            for span in scope_spans.spans {
                received.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    kind: span.kind,
                    attributes: span
                        .attributes
                        .iter()
                        .map(|attribute| (attribute.key.clone(), json_of(attribute.value.as_ref())))
                        .collect(),
                    status_code: span.status.map_or(0, |status| status.code),
                    service_name: service_name.clone(),
                });
            }
        }
    }
    spans
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .extend(received);
    let answer = ExportTraceServiceResponse::default().encode_to_vec();
    ([(header::CONTENT_TYPE, "application/x-protobuf")], answer).into_response()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn json_of(value: Option<&AnyValue>) -> Value {
    let Some(value) = value.and_then(|value| value.value.as_ref()) else {
        return Value::Null;
    };
    match value {
        any_value::Value::StringValue(text) => json!(text),
        any_value::Value::BoolValue(flag) => json!(flag),
        any_value::Value::IntValue(number) => json!(number),
        any_value::Value::DoubleValue(number) => json!(number),
        any_value::Value::ArrayValue(array) => Value::Array(
            array
                .values
                .iter()
                .map(|value| json_of(Some(value)))
                .collect(),
        ),
        any_value::Value::KvlistValue(list) => Value::Object(
            list.values
                .iter()
                .map(|pair| (pair.key.clone(), json_of(pair.value.as_ref())))
                .collect(),
        ),
        any_value::Value::BytesValue(bytes) => json!(hex(bytes)),
        #[allow(unreachable_patterns)]
        _ => Value::Null,
    }
}
