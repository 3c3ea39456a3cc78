//! Errors as the API answers them: a status and
//! `{"error": {"code", "message", "details"?, "request_id"}}`. What went wrong inside the server
//! (a store's error, which may name hosts and users) is the operator's: it goes to the log with
//! the request's id, and to the client only with `[server] expose_error_details`.

use axum::{
    Json,
    http::{HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use crate::request_id;

/// The body of every error answer.
#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable (`invalid_body`, `not_found`, ...).
    pub code: String,
    /// For a person: what went wrong and what to do.
    pub message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Object)]
    pub details: Option<Value>,
    /// The request's id (its `X-Request-Id`): what to quote to the operator, whose log has it.
    pub request_id: String,
}

/// An answer that is not a success.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub details: Option<Value>,
    /// Seconds after which trying again makes sense (429, 503).
    pub retry_after: Option<u64>,
    /// What went wrong inside, for the log (and the client only with
    /// `[server] expose_error_details`).
    pub internal: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
            details: None,
            retry_after: None,
            internal: None,
        }
    }

    /// With what went wrong inside, for the log.
    pub fn with_internal(mut self, internal: impl Into<String>) -> Self {
        self.internal = Some(internal.into());
        self
    }

    pub fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or invalid API key: send `Authorization: Bearer KEY` (create a key with \
             `agentloop keys create --user USER`)",
        )
    }

    /// A well-formed key this server's store does not know (or that was revoked). The usual
    /// cause on a first day is two stores: keys live in the database they were created in, and
    /// `agentloop keys create` run with another `--config` (or in another directory, or with
    /// another `DATABASE_URL`) wrote to another one. The answer says so without naming the
    /// database: that is for the operator (the banner of `agentloop serve`), not for any client.
    pub fn unknown_key() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "unknown or revoked API key: this server knows only the keys of its own store. A key \
             made with `agentloop keys create` under another --config, in another directory or \
             with another DATABASE_URL is in another database: create it with the same --config \
             and DATABASE_URL as `agentloop serve` (its banner names its store), or check \
             `agentloop keys list` there",
        )
    }

    /// Also for things that exist but belong to someone else: the answer must not tell them
    /// apart.
    pub fn not_found(what: &str, id: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("{what} {id} not found"),
        )
    }

    /// A method the path does not answer (the router adds the `Allow` header).
    pub fn method_not_allowed(method: &str, path: &str) -> Self {
        Self::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!("{path} does not answer {method}: see the Allow header or /openapi.json"),
        )
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn conflict(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::CONFLICT, code, message)
    }

    /// What was there and is no more, on purpose (a pruned run's events).
    pub fn gone(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::GONE, code, message)
    }

    pub fn unavailable(message: impl Into<String>) -> Self {
        let mut error = Self::new(StatusCode::SERVICE_UNAVAILABLE, "unavailable", message);
        error.retry_after = Some(5);
        error
    }

    /// Something the server did not expect: `internal` goes to the log, the client is told to
    /// quote the request id.
    pub fn internal(internal: impl Into<String>) -> Self {
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal_error",
            "something went wrong in the server; try again, and if it keeps happening, report \
             the request_id",
        )
        .with_internal(internal)
    }
}

impl From<agentloop_core::StoreError> for ApiError {
    fn from(error: agentloop_core::StoreError) -> Self {
        ApiError::unavailable("the store is not available right now; try again in a moment")
            .with_internal(format!("the store failed: {error}"))
    }
}

impl From<agentloop_core::StartError> for ApiError {
    fn from(error: agentloop_core::StartError) -> Self {
        use agentloop_core::StartError;
        match error {
            StartError::SessionNotFound(id) => ApiError::not_found("session", id),
            StartError::SessionBusy { .. } => {
                let mut busy = ApiError::conflict("session_busy", error.to_string());
                busy.retry_after = Some(SESSION_BUSY_RETRY_S);
                busy
            }
            StartError::UnknownWorkflow(message) => {
                ApiError::bad_request("invalid_body", format!("context.workflow: {message}"))
                    .with_details(serde_json::json!({"field": "context.workflow"}))
            }
            StartError::Store(store) => store.into(),
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// Why a paused run could not go on with its answer.
impl From<agentloop_core::ResumeError> for ApiError {
    fn from(error: agentloop_core::ResumeError) -> Self {
        use agentloop_core::ResumeError;
        match error {
            ResumeError::InvalidAnswer(invalid) => {
                ApiError::bad_request("invalid_answer", invalid.to_string())
            }
            ResumeError::NotPaused(id) => ApiError::conflict(
                "run_not_waiting",
                format!("run {id} is not waiting for input (it may have resumed already)"),
            ),
            ResumeError::Store(error) => error.into(),
            other => ApiError::internal(other.to_string()),
        }
    }
}

/// Seconds a client is told to wait before asking again in a session that has a run in
/// progress: runs usually end within seconds.
const SESSION_BUSY_RETRY_S: u64 = 2;

impl ApiError {
    /// The response, for places that need a concrete type.
    pub fn into_response_owned(self) -> Response {
        self.into_response()
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let scope = request_id::current();
        if let Some(internal) = &self.internal {
            tracing::error!(request_id = %scope.id, status = self.status.as_u16(), code = self.code,
                error = %internal, "request failed");
        }
        let message = match self.internal {
            Some(internal) if scope.expose_details => internal,
            _ => self.message,
        };
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message,
                details: self.details,
                request_id: scope.id.to_string(),
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        let headers = response.headers_mut();
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}
