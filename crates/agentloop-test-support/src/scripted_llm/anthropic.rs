//! A [`Reply`] as Anthropic's Messages API sends it: a `message` object, or its stream of
//! named events (`message_start`, `ping`, `content_block_start/delta/stop`, `message_delta`,
//! `message_stop`). Several tool blocks stream interleaved, as a client must cope with; errors
//! carry Anthropic's body (`{"type": "error", "error": {"type", "message"}}`, 529
//! `overloaded_error`).

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::render::{EVENT_STREAM, broken_body, split_in_two, split_words};
use super::reply::{Reply, ScriptedError, Usage};

/// One answer of the scripted Anthropic server.
pub(super) struct MessageAnswer<'a> {
    pub reply: &'a Reply,
    pub message_id: String,
    /// One `toolu_…` id per scripted call, in order.
    pub call_ids: Vec<String>,
    pub model: String,
    pub stream: bool,
}

impl MessageAnswer<'_> {
    pub fn into_response(self) -> Response {
        let mut response = match (&self.reply.error, self.reply.cut, self.stream) {
            (Some(error), _, _) => error_response(error),
            (None, Some(_), stream) => {
                let whole = if stream {
                    self.events().concat()
                } else {
                    self.message().to_string()
                };
                let whole = Bytes::from(whole);
                let half = whole.slice(..whole.len() / 2);
                let content_type = if stream {
                    EVENT_STREAM
                } else {
                    "application/json"
                };
                (
                    StatusCode::OK,
                    [(CONTENT_TYPE, content_type)],
                    broken_body(half),
                )
                    .into_response()
            }
            (None, None, true) => {
                let events: Vec<Result<String, Infallible>> =
                    self.events().into_iter().map(Ok).collect();
                let body = Body::from_stream(futures::stream::iter(events));
                (StatusCode::OK, [(CONTENT_TYPE, EVENT_STREAM)], body).into_response()
            }
            (None, None, false) => (StatusCode::OK, axum::Json(self.message())).into_response(),
        };
        super::add_headers(&mut response, &self.reply.headers);
        response
    }

    fn stop_reason(&self) -> &str {
        match &self.reply.stop_reason {
            Some(reason) => reason,
            None if self.reply.calls.is_empty() => "end_turn",
            None => "tool_use",
        }
    }

    fn message(&self) -> Value {
        let mut content = Vec::new();
        if let Some(text) = &self.reply.text {
            content.push(json!({"type": "text", "text": text}));
        }
        for (call, id) in self.reply.calls.iter().zip(&self.call_ids) {
            content.push(json!({
                "type": "tool_use", "id": id, "name": call.name, "input": input(&call.arguments),
            }));
        }
        json!({
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": content,
            "stop_reason": self.stop_reason(),
            "stop_sequence": null,
            "usage": usage_json(self.reply.usage),
        })
    }

    /// The SSE events, each whole (`event:` and `data:` lines and the blank line).
    fn events(&self) -> Vec<String> {
        let reply = self.reply;
        let mut start_usage = usage_json(reply.usage);
        start_usage["output_tokens"] = json!(1);
        let mut events = vec![
            named(json!({"type": "message_start", "message": {
                "id": self.message_id, "type": "message", "role": "assistant",
                "model": self.model, "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": start_usage,
            }})),
            named(json!({"type": "ping"})),
        ];
        let mut index = 0;
        if let Some(text) = &reply.text {
            events.push(named(json!({"type": "content_block_start", "index": index,
                "content_block": {"type": "text", "text": ""}})));
            for piece in split_words(text) {
                events.push(named(json!({"type": "content_block_delta", "index": index,
                    "delta": {"type": "text_delta", "text": piece}})));
            }
            events.push(named(json!({"type": "content_block_stop", "index": index})));
            index += 1;
        }
        // Every tool block starts, then the halves of their inputs interleave: block 1's
        // first half, block 2's first half, ..., block 1's second half, ...
        let tools: Vec<(usize, &str, &str)> = reply
            .calls
            .iter()
            .enumerate()
            .map(|(n, call)| {
                let (head, tail) = split_in_two(&call.arguments);
                (index + n, head, tail)
            })
            .collect();
        for ((block, _, _), (call, id)) in tools.iter().zip(reply.calls.iter().zip(&self.call_ids))
        {
            events.push(named(json!({"type": "content_block_start", "index": block,
                "content_block": {"type": "tool_use", "id": id, "name": call.name, "input": {}}})));
        }
        for half in [0, 1] {
            for (block, head, tail) in &tools {
                let piece = if half == 0 { head } else { tail };
                events.push(named(json!({"type": "content_block_delta", "index": block,
                    "delta": {"type": "input_json_delta", "partial_json": piece}})));
            }
        }
        for (block, _, _) in &tools {
            events.push(named(json!({"type": "content_block_stop", "index": block})));
        }
        events.push(named(json!({"type": "message_delta",
            "delta": {"stop_reason": self.stop_reason(), "stop_sequence": null},
            "usage": {"output_tokens": reply.usage.completion_tokens}})));
        if !reply.truncated {
            events.push(named(json!({"type": "message_stop"})));
        }
        events
    }
}

/// An event with its name, as Anthropic sends them.
fn named(data: Value) -> String {
    let name = data["type"].as_str().unwrap_or_default().to_owned();
    format!("event: {name}\ndata: {data}\n\n")
}

/// `input` is an object on the wire; scripted arguments that are no JSON object stay text.
fn input(arguments: &str) -> Value {
    serde_json::from_str::<Value>(arguments)
        .ok()
        .filter(Value::is_object)
        .unwrap_or_else(|| json!({"raw": arguments}))
}

/// Anthropic's `input_tokens` excludes the cached prefix.
fn usage_json(usage: Usage) -> Value {
    let cached = usage.cache_read_tokens + usage.cache_creation_tokens;
    json!({
        "input_tokens": usage.prompt_tokens.saturating_sub(cached),
        "cache_creation_input_tokens": usage.cache_creation_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
        "output_tokens": usage.completion_tokens,
    })
}

pub(super) fn error_response(error: &ScriptedError) -> Response {
    let kind = match error.status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    };
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"type": "error", "error": {"type": kind, "message": error.message}});
    (status, axum::Json(body)).into_response()
}
