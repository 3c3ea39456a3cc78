//! `POST /a2a`: A2A's JSON-RPC binding (protocol 1.0, the methods `a2a-sdk` 1.x calls). One
//! request object per body (no batches); an answer is a JSON-RPC response with HTTP 200, or a
//! stream of them over SSE for the streaming methods. The key is checked before the body is
//! read (401 with the API's JSON error otherwise).

use agentloop_core::protocol::{Event, EventKind};
use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::{push_config, send, tasks};
use crate::{
    auth::User, error::ApiError, error::ErrorBody, request_id::RequestScope, state::AppState,
    trace_context::TraceParent,
};

/// A2A's error codes (JSON-RPC's own, and the protocol's `-320xx`).
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const TASK_NOT_CANCELABLE: i64 = -32002;
    pub const PUSH_NOT_SUPPORTED: i64 = -32003;
    pub const UNSUPPORTED_OPERATION: i64 = -32004;
}

/// A JSON-RPC error: its code, message, and agentloop's error code in `data`.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    pub fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(code::INVALID_PARAMS, message)
    }

    pub fn task_not_found(id: &str) -> RpcError {
        RpcError::new(code::TASK_NOT_FOUND, format!("task {id} not found"))
    }

    fn body(&self, id: &Value) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        json!({"jsonrpc": "2.0", "id": id, "error": error})
    }
}

/// The API's errors in JSON-RPC's terms: a 404 is an unknown task, a 400 bad params, a 409 an
/// operation the task's state does not allow; what went wrong inside is logged, not told.
impl From<ApiError> for RpcError {
    fn from(error: ApiError) -> RpcError {
        if let Some(internal) = &error.internal {
            tracing::warn!(code = error.code, %internal, "an A2A request failed");
        }
        let code = match error.status {
            StatusCode::NOT_FOUND => code::TASK_NOT_FOUND,
            StatusCode::BAD_REQUEST | StatusCode::PAYLOAD_TOO_LARGE => code::INVALID_PARAMS,
            StatusCode::CONFLICT | StatusCode::TOO_MANY_REQUESTS => code::UNSUPPORTED_OPERATION,
            _ => code::INTERNAL,
        };
        RpcError {
            code,
            message: error.message,
            data: Some(json!({"code": error.code, "details": error.details})),
        }
    }
}

/// What a method answers: one result, or a stream of results.
pub enum Answer {
    One(Value),
    Stream(futures::stream::BoxStream<'static, Result<Value, RpcError>>),
}

/// A2A over JSON-RPC 2.0.
///
/// The methods of A2A 1.0 (`SendMessage`, `SendStreamingMessage`, `GetTask`, `CancelTask`,
/// `SubscribeToTask`, ...; see docs/a2a.md): a task is a run, its `contextId` the session.
/// Errors are JSON-RPC error objects with HTTP 200; the streaming methods answer with SSE,
/// a JSON-RPC response per event.
#[utoipa::path(
    post,
    path = "/a2a",
    tag = "a2a",
    request_body(content = Object, description = "A JSON-RPC 2.0 request: `{jsonrpc: \"2.0\", id, method, params}`"),
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: a run's spans continue this trace")),
    responses(
        (status = 200, description = "A JSON-RPC response, or a stream of them (`SendStreamingMessage`, `SubscribeToTask`)",
            content((Object = "application/json"), (Object = "text/event-stream"))),
        (status = 401, body = ErrorBody), (status = 413, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn json_rpc(
    State(state): State<AppState>,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    body: Bytes,
) -> Response {
    if !state.config.a2a.enabled {
        return ApiError::not_found("route", "/a2a").into_response_owned();
    }
    let request: Value = match serde_json::from_slice(&body) {
        Ok(request) => request,
        Err(error) => {
            let error = RpcError::new(code::PARSE_ERROR, format!("not JSON: {error}"));
            return Json(error.body(&Value::Null)).into_response();
        }
    };
    let id = request.get("id").cloned().unwrap_or(Value::Null);
    let method = match (&request["jsonrpc"], request["method"].as_str()) {
        (Value::String(version), Some(method)) if version == "2.0" => method,
        _ => {
            let error = RpcError::new(
                code::INVALID_REQUEST,
                "a JSON-RPC 2.0 request object: {jsonrpc: \"2.0\", id, method, params}",
            );
            return Json(error.body(&id)).into_response();
        }
    };
    let params = match request.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(params @ Value::Object(_)) => params.clone(),
        Some(_) => {
            let error = RpcError::invalid_params("params must be an object");
            return Json(error.body(&id)).into_response();
        }
    };
    let call = Call {
        state: &state,
        user: &user,
        traceparent,
        params,
    };
    let answer = match method {
        "SendMessage" => send::send_message(call, false).await,
        "SendStreamingMessage" => send::send_message(call, true).await,
        "GetTask" => tasks::get_task(call).await,
        "CancelTask" => tasks::cancel_task(call).await,
        "SubscribeToTask" => tasks::subscribe(call).await,
        "CreateTaskPushNotificationConfig" => push_config::create(call).await,
        "GetTaskPushNotificationConfig" => push_config::get(call).await,
        "ListTaskPushNotificationConfigs" => push_config::list(call).await,
        "DeleteTaskPushNotificationConfig" => push_config::delete(call).await,
        "ListTasks" | "GetExtendedAgentCard" => Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            format!("{method} is not supported by this server"),
        )),
        other => Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("no method {other:?} (A2A 1.0's methods: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, and the push notification configs' Create, Get, List and Delete)"),
        )),
    };
    match answer {
        Ok(Answer::One(result)) => {
            Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
        }
        Ok(Answer::Stream(results)) => stream(&state, id, results),
        Err(error) => Json(error.body(&id)).into_response(),
    }
}

/// What a method is given.
pub struct Call<'a> {
    pub state: &'a AppState,
    pub user: &'a str,
    pub traceparent: Option<String>,
    pub params: Value,
}

/// Each result as a JSON-RPC response in an SSE `data:` line.
fn stream(
    state: &AppState,
    id: Value,
    results: impl Stream<Item = Result<Value, RpcError>> + Send + 'static,
) -> Response {
    let frames = results.map(move |result| {
        let body = match result {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(error) => error.body(&id),
        };
        Ok::<_, std::convert::Infallible>(
            sse::Event::default()
                .json_data(body)
                .unwrap_or_else(|_| sse::Event::default().data("{}")),
        )
    });
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(state.config.keep_alive()))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// What a client is told of an error event: the code's plain sentence (or the detail with
/// `[server] expose_error_details`), with the request's id.
pub fn shown_error(scope: &RequestScope, event: &Event) -> String {
    match &event.kind {
        EventKind::Error { code, message } => {
            crate::disclosure::run_error(scope, event.run_id, *code, message).message
        }
        _ => String::new(),
    }
}

/// A string field of `params` (`field`), required.
pub fn required_str<'v>(params: &'v Value, field: &str) -> Result<&'v str, RpcError> {
    params[field]
        .as_str()
        .filter(|value| !value.is_empty())
        .ok_or_else(|| RpcError::invalid_params(format!("{field}: required")))
}
