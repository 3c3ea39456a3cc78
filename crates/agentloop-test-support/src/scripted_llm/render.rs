//! Turning a [`Reply`] into the bytes api.openai.com would send: a `chat.completion` object, or
//! `chat.completion.chunk` events over SSE.

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::{Value, json};

use super::reply::{Cut, Reply, ScriptedError, Usage};

pub(super) const EVENT_STREAM: &str = "text/event-stream; charset=utf-8";

/// What the request asked for and the identifiers this answer carries.
pub(super) struct Answer<'a> {
    pub reply: &'a Reply,
    pub completion_id: String,
    /// One per scripted call, in order.
    pub call_ids: Vec<String>,
    pub model: String,
    pub created: u64,
    pub stream: bool,
    pub include_usage: bool,
}

impl Answer<'_> {
    pub fn into_response(self) -> Response {
        let mut response = match (&self.reply.error, self.reply.cut, self.stream) {
            (Some(error), _, _) => error_response(error),
            (None, Some(cut), _) => self.cut_response(cut),
            (None, None, true) => self.event_stream(),
            (None, None, false) => (StatusCode::OK, axum::Json(self.completion())).into_response(),
        };
        for (name, value) in &self.reply.headers {
            if let (Ok(name), Ok(value)) = (
                HeaderName::from_bytes(name.as_bytes()),
                HeaderValue::from_str(value),
            ) {
                response.headers_mut().append(name, value);
            }
        }
        response
    }

    fn completion(&self) -> Value {
        let reply = self.reply;
        let mut message = json!({
            "role": "assistant",
            "content": match (&reply.text, reply.calls.is_empty()) {
                (Some(text), _) => Value::from(text.as_str()),
                (None, true) => Value::from(""),
                (None, false) => Value::Null,
            },
            "refusal": null,
        });
        if !reply.calls.is_empty() {
            message["tool_calls"] = reply
                .calls
                .iter()
                .zip(&self.call_ids)
                .map(|(call, id)| {
                    json!({
                        "id": id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    })
                })
                .collect();
        }
        json!({
            "id": self.completion_id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_scripted",
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": reply.finish_reason(),
            }],
            "usage": usage_json(reply.usage),
        })
    }

    fn event_stream(&self) -> Response {
        let events: Vec<Result<String, Infallible>> = self
            .chunks()
            .into_iter()
            .map(|data| Ok(event(&data)))
            .collect();
        let body = Body::from_stream(futures::stream::iter(events));
        (
            StatusCode::OK,
            [
                (CONTENT_TYPE, EVENT_STREAM),
                (HeaderName::from_static("cache-control"), "no-cache"),
            ],
            body,
        )
            .into_response()
    }

    /// The answer's status and headers, then part of its body, then the connection breaks.
    fn cut_response(&self, cut: Cut) -> Response {
        let (content_type, whole, tool_call_event) = if self.stream {
            let mut whole = String::new();
            let mut tool_call_event = None;
            for data in self.chunks() {
                let event = event(&data);
                if tool_call_event.is_none() && data.contains("\"tool_calls\"") {
                    tool_call_event = Some((whole.len(), event.len()));
                }
                whole.push_str(&event);
            }
            (EVENT_STREAM, whole, tool_call_event)
        } else {
            let whole = self.completion().to_string();
            ("application/json", whole, None)
        };
        let sent = match (cut, tool_call_event) {
            (Cut::MidToolCall, Some((start, length))) => start + length / 2,
            _ => whole.len() / 2,
        };
        let whole = Bytes::from(whole);
        let mut response = (
            StatusCode::OK,
            [(CONTENT_TYPE, content_type)],
            broken_body(whole.slice(..sent)),
        )
            .into_response();
        if cut == Cut::ShortOfContentLength {
            response
                .headers_mut()
                .insert(CONTENT_LENGTH, HeaderValue::from(whole.len()));
        }
        response
    }

    /// The `data:` payloads, in order: role, text pieces, tool call pieces, finish, usage,
    /// `[DONE]`.
    fn chunks(&self) -> Vec<String> {
        let reply = self.reply;
        let text = reply.text.as_deref().unwrap_or_default();
        let mut deltas = vec![json!({
            "role": "assistant",
            "content": if reply.text.is_some() || reply.calls.is_empty() { Value::from("") } else { Value::Null },
        })];
        deltas.extend(
            split_words(text)
                .into_iter()
                .map(|piece| json!({"content": piece})),
        );
        for (index, (call, id)) in reply.calls.iter().zip(&self.call_ids).enumerate() {
            let (head, tail) = split_in_two(&call.arguments);
            deltas.push(json!({"tool_calls": [{
                "index": index, "id": id, "type": "function",
                "function": {"name": call.name, "arguments": head},
            }]}));
            deltas.push(json!({"tool_calls": [{"index": index, "function": {"arguments": tail}}]}));
        }
        let mut chunks: Vec<Value> = deltas
            .into_iter()
            .map(|delta| {
                self.chunk(
                    json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": null}]),
                )
            })
            .collect();
        if !reply.truncated {
            chunks.push(self.chunk(json!([{
                "index": 0, "delta": {}, "logprobs": null, "finish_reason": reply.finish_reason(),
            }])));
            if self.include_usage {
                let mut usage = self.chunk(json!([]));
                usage["usage"] = usage_json(reply.usage);
                chunks.push(usage);
            }
        }
        let mut data: Vec<String> = chunks.iter().map(Value::to_string).collect();
        if !reply.truncated {
            data.push("[DONE]".to_owned());
        }
        data
    }

    fn chunk(&self, choices: Value) -> Value {
        let mut chunk = json!({
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": "fp_scripted",
            "choices": choices,
        });
        if self.include_usage {
            chunk["usage"] = Value::Null;
        }
        chunk
    }
}

fn event(data: &str) -> String {
    format!("data: {data}\n\n")
}

/// `head`, then an error that makes hyper drop the connection: a chunked body gets no end, a
/// body with a `Content-Length` stays short of it.
pub(super) fn broken_body(head: Bytes) -> Body {
    let broken = futures::stream::once(async {
        // hyper writes out what it buffered while the body waits; an error at once would drop
        // the head with the connection.
        tokio::task::yield_now().await;
        Err(std::io::Error::new(
            std::io::ErrorKind::ConnectionAborted,
            "the script cuts the answer here",
        ))
    });
    Body::from_stream(futures::stream::once(async { Ok(head) }).chain(broken))
}

pub(super) fn error_response(error: &ScriptedError) -> Response {
    let kind = match error.status {
        401 | 403 => "authentication_error",
        429 => "rate_limit_error",
        500.. => "server_error",
        _ => "invalid_request_error",
    };
    let status = StatusCode::from_u16(error.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body =
        json!({"error": {"message": error.message, "type": kind, "param": null, "code": null}});
    (status, axum::Json(body)).into_response()
}

fn usage_json(usage: Usage) -> Value {
    let mut value = json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    });
    // As OpenAI reports prompt cache reads (`with_cache`).
    if usage.cache_read_tokens > 0 {
        value["prompt_tokens_details"] = json!({"cached_tokens": usage.cache_read_tokens});
    }
    value
}

/// Word by word, each piece keeping its trailing whitespace; a single word is still cut in two
/// so every text of two characters or more arrives in several deltas.
pub(super) fn split_words(text: &str) -> Vec<&str> {
    let pieces: Vec<&str> = text.split_inclusive(char::is_whitespace).collect();
    if pieces.len() == 1 {
        let (head, tail) = split_in_two(text);
        return [head, tail]
            .into_iter()
            .filter(|piece| !piece.is_empty())
            .collect();
    }
    pieces
}

/// At the middle character, never inside a UTF-8 sequence.
pub(super) fn split_in_two(text: &str) -> (&str, &str) {
    let middle = text.chars().count() / 2;
    let cut = text
        .char_indices()
        .nth(middle)
        .map_or(text.len(), |(index, _)| index);
    text.split_at(cut)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_keep_their_spaces_and_short_texts_still_split() {
        assert_eq!(split_words("Hello big world"), ["Hello ", "big ", "world"]);
        assert_eq!(split_words("Hi"), ["H", "i"]);
        assert_eq!(split_words("é"), ["é"]);
        assert!(split_words("").is_empty());
    }

    #[test]
    fn halves_respect_char_boundaries() {
        assert_eq!(split_in_two("{\"a\":1}"), ("{\"a", "\":1}"));
        assert_eq!(split_in_two("ééé"), ("é", "éé"));
        assert_eq!(split_in_two(""), ("", ""));
    }
}
