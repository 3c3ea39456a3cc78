//! `POST /a2a`: A2A's JSON-RPC binding (protocol 1.0, the methods `a2a-sdk` 1.x calls). One
//! request object per body (no batches); an answer is a JSON-RPC response with HTTP 200, or a
//! stream of them over SSE for the streaming methods. The key is checked before the body is
//! read (401 with the API's JSON error otherwise).

use axum::{
    Json,
    body::Bytes,
    extract::State,
    http::{HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use serde_json::{Value, json};

use super::{
    call::{Answer, Call, RpcError, code},
    push_config, send, tasks,
};
use crate::{
    auth::User, error::ApiError, error::ErrorBody, state::AppState, trace_context::TraceParent,
};

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
            format!(
                "no method {other:?} (A2A 1.0's methods: SendMessage, SendStreamingMessage, GetTask, CancelTask, SubscribeToTask, and the push notification configs' Create, Get, List and Delete)"
            ),
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
