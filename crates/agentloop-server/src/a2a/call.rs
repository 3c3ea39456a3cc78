//! What every A2A method shares: its call (`Call`), its answer (`Answer`), JSON-RPC's errors
//! (`RpcError`, A2A's codes) and the reading of its params.

use agentloop_core::protocol::{Event, EventKind};
use axum::http::StatusCode;
use serde_json::{Value, json};

use crate::{error::ApiError, request_id::RequestScope, state::AppState};

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

    pub fn body(&self, id: &Value) -> Value {
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

/// What a method is given.
pub struct Call<'a> {
    pub state: &'a AppState,
    pub user: &'a str,
    pub traceparent: Option<String>,
    pub params: Value,
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
