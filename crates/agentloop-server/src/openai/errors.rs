//! Errors in OpenAI's shape: `{"error": {"message", "type", "param", "code"}}`, what the
//! official SDKs read to raise `AuthenticationError`, `NotFoundError`, `RateLimitError`, ...
//! Every route of the OpenAI-compatible API answers its errors through [`openai_errors`], a
//! layer that rewrites agentloop's own error body (`crate::error`): the key's refusal, a body
//! that cannot be read and a run that cannot begin all come out alike. Headers (`Retry-After`,
//! `WWW-Authenticate`, `X-Request-Id`) stay.

use axum::{
    body::Body,
    http::{HeaderValue, StatusCode, header},
    response::Response,
};
use serde_json::{Value, json};

/// The largest error body rewritten (agentloop's are a few hundred bytes).
const MAX_ERROR_BODY: usize = 64 * 1024;

/// The layer's function: an error answer of agentloop's shape in OpenAI's; anything else as
/// it is.
pub async fn openai_errors(response: Response) -> Response {
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || !is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_ERROR_BODY).await else {
        return Response::from_parts(parts, Body::empty());
    };
    let Ok(own) = serde_json::from_slice::<Value>(&bytes) else {
        return Response::from_parts(parts, Body::from(bytes));
    };
    let rewritten = openai_error(status, &own);
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Response::from_parts(parts, Body::from(rewritten.to_string()))
}

/// agentloop's error body `{"error": {"code", "message", "details"?, "request_id"}}` as OpenAI's.
/// The request's id stays beside the four fields OpenAI has.
pub fn openai_error(status: StatusCode, own: &Value) -> Value {
    let error = &own["error"];
    let code = error["code"].as_str().unwrap_or("error");
    let param = error["details"]["field"].as_str();
    json!({
        "error": {
            "message": error["message"].as_str().unwrap_or("the request failed"),
            "type": error_type(status, code),
            "param": param,
            "code": code,
            "request_id": error["request_id"],
        }
    })
}

/// OpenAI's `type` for an answer of `status` (and agentloop's `code`).
pub fn error_type(status: StatusCode, code: &str) -> &'static str {
    match status.as_u16() {
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        409 => "conflict_error",
        429 if code == "budget_exceeded" => "insufficient_quota",
        429 => "rate_limit_error",
        400..=499 => "invalid_request_error",
        _ => "server_error",
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn agentloops_error_becomes_openais_with_the_field_as_param() {
        let own = json!({"error": {"code": "invalid_body", "message": "messages: must not be empty",
            "details": {"field": "messages"}, "request_id": "r1"}});
        let error = openai_error(StatusCode::BAD_REQUEST, &own);
        assert_eq!(
            error,
            json!({"error": {"message": "messages: must not be empty", "type": "invalid_request_error",
                "param": "messages", "code": "invalid_body", "request_id": "r1"}})
        );
        let denied =
            json!({"error": {"code": "unauthorized", "message": "no", "request_id": "r2"}});
        let error = openai_error(StatusCode::UNAUTHORIZED, &denied);
        assert_eq!(error["error"]["type"], "authentication_error");
        assert_eq!(error["error"]["param"], Value::Null);
        assert_eq!(
            error_type(StatusCode::TOO_MANY_REQUESTS, "budget_exceeded"),
            "insufficient_quota"
        );
        assert_eq!(
            error_type(StatusCode::TOO_MANY_REQUESTS, "too_many_runs"),
            "rate_limit_error"
        );
        assert_eq!(
            error_type(StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            "server_error"
        );
    }
}
