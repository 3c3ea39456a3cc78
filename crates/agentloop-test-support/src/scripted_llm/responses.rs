//! A [`Reply`] as OpenAI's Responses API sends it: a `response` object, or its semantic events
//! (`response.created`, `response.output_item.added/done`, `response.output_text.delta`,
//! `response.function_call_arguments.delta/done`, `response.completed`, ...). A reply
//! `with_reasoning` begins with a `reasoning` item carrying `encrypted_content`.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::StatusCode;
use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use super::render::{EVENT_STREAM, broken_body, error_response, split_in_two, split_words};
use super::reply::{Reply, Usage};

/// One answer of the scripted Responses server.
pub(super) struct ResponseAnswer<'a> {
    pub reply: &'a Reply,
    pub response_id: String,
    /// One `call_…` id per scripted call, in order.
    pub call_ids: Vec<String>,
    pub model: String,
    pub stream: bool,
}

impl ResponseAnswer<'_> {
    pub fn into_response(self) -> Response {
        let mut response = match (&self.reply.error, self.reply.cut, self.stream) {
            (Some(error), _, _) => error_response(error),
            (None, Some(_), stream) => {
                let whole = if stream {
                    self.events().concat()
                } else {
                    self.response("completed").to_string()
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
            (None, None, false) => {
                (StatusCode::OK, axum::Json(self.response(self.status()))).into_response()
            }
        };
        super::add_headers(&mut response, &self.reply.headers);
        response
    }

    fn status(&self) -> &'static str {
        if self.reply.stop_reason.as_deref() == Some("max_tokens") {
            "incomplete"
        } else {
            "completed"
        }
    }

    /// The finished output items, in order: reasoning, message, function calls.
    fn items(&self) -> Vec<Value> {
        let reply = self.reply;
        let mut items = Vec::new();
        if let Some(encrypted) = &reply.reasoning {
            items.push(json!({
                "type": "reasoning", "id": format!("rs_{}", self.response_id),
                "summary": [], "encrypted_content": encrypted,
            }));
        }
        if let Some(text) = &reply.text {
            items.push(json!({
                "type": "message", "id": format!("msg_{}", self.response_id),
                "status": "completed", "role": "assistant",
                "content": [{"type": "output_text", "text": text, "annotations": []}],
            }));
        }
        for (call, id) in reply.calls.iter().zip(&self.call_ids) {
            items.push(json!({
                "type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                "name": call.name, "arguments": call.arguments, "status": "completed",
            }));
        }
        items
    }

    fn response(&self, status: &str) -> Value {
        let mut response = json!({
            "id": self.response_id,
            "object": "response",
            "status": status,
            "model": self.model,
            "output": self.items(),
            "store": false,
            "usage": usage_json(self.reply.usage),
            "error": null,
            "incomplete_details": null,
        });
        if status == "incomplete" {
            response["incomplete_details"] = json!({"reason": "max_output_tokens"});
        }
        response
    }

    /// The SSE events, each whole.
    fn events(&self) -> Vec<String> {
        let mut started = self.response("in_progress");
        started["output"] = json!([]);
        started["usage"] = Value::Null;
        let mut events = vec![
            json!({"type": "response.created", "response": started.clone()}),
            json!({"type": "response.in_progress", "response": started}),
        ];
        for (output_index, item) in self.items().into_iter().enumerate() {
            let item_id = item["id"].clone();
            match item["type"].as_str() {
                Some("message") => {
                    let text = item["content"][0]["text"].as_str().unwrap_or_default();
                    let mut added = item.clone();
                    added["content"] = json!([]);
                    added["status"] = json!("in_progress");
                    events.push(json!({"type": "response.output_item.added",
                        "output_index": output_index, "item": added}));
                    events.push(
                        json!({"type": "response.content_part.added", "item_id": item_id,
                        "output_index": output_index, "content_index": 0,
                        "part": {"type": "output_text", "text": "", "annotations": []}}),
                    );
                    for piece in split_words(text) {
                        events.push(json!({"type": "response.output_text.delta",
                            "item_id": item_id, "output_index": output_index,
                            "content_index": 0, "delta": piece}));
                    }
                    events.push(
                        json!({"type": "response.output_text.done", "item_id": item_id,
                        "output_index": output_index, "content_index": 0, "text": text}),
                    );
                    events.push(
                        json!({"type": "response.content_part.done", "item_id": item_id,
                        "output_index": output_index, "content_index": 0,
                        "part": item["content"][0]}),
                    );
                }
                Some("function_call") => {
                    let arguments = item["arguments"].as_str().unwrap_or_default();
                    let mut added = item.clone();
                    added["arguments"] = json!("");
                    added["status"] = json!("in_progress");
                    events.push(json!({"type": "response.output_item.added",
                        "output_index": output_index, "item": added}));
                    let (head, tail) = split_in_two(arguments);
                    for piece in [head, tail] {
                        events.push(json!({"type": "response.function_call_arguments.delta",
                            "item_id": item_id, "output_index": output_index, "delta": piece}));
                    }
                    events.push(json!({"type": "response.function_call_arguments.done",
                        "item_id": item_id, "output_index": output_index,
                        "arguments": arguments}));
                }
                _ => {
                    events.push(json!({"type": "response.output_item.added",
                        "output_index": output_index, "item": item}));
                }
            }
            events.push(json!({"type": "response.output_item.done",
                "output_index": output_index, "item": item}));
        }
        if !self.reply.truncated {
            let status = self.status();
            let kind = format!("response.{status}");
            events.push(json!({"type": kind, "response": self.response(status)}));
        }
        events
            .into_iter()
            .enumerate()
            .map(|(sequence, mut event)| {
                event["sequence_number"] = json!(sequence);
                let name = event["type"].as_str().unwrap_or_default().to_owned();
                format!("event: {name}\ndata: {event}\n\n")
            })
            .collect()
    }
}

fn usage_json(usage: Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}
