//! Reading the Responses API's answers: a whole `response` object, or its semantic stream
//! events (`response.output_text.delta`, `response.function_call_arguments.delta`,
//! `response.output_item.done`, `response.completed`, `response.incomplete`,
//! `response.failed`, `error`), into a [`ModelReply`].

use std::collections::BTreeMap;
use std::sync::Arc;

use agentloop_core::protocol::{ToolCall, Usage};
use agentloop_core::{LlmError, ModelReply};
use serde::Deserialize;
use serde_json::Value;

use super::reasoning::ReasoningCache;
use crate::exchange::{AttemptError, Dialect, EventFolder, Folded, parse_json};
use crate::wire::error_message;

/// The Responses API's reply format. Reasoning items of a reply with calls go to `reasoning`.
pub(crate) struct ResponsesDialect {
    pub reasoning: Arc<ReasoningCache>,
    /// `max_output_tokens`, when the request set one.
    pub max_tokens: Option<u32>,
}

impl Dialect for ResponsesDialect {
    type Folder = StreamFolder;

    fn folder(&self) -> StreamFolder {
        StreamFolder {
            reasoning: Arc::clone(&self.reasoning),
            max_tokens: self.max_tokens,
            items: BTreeMap::new(),
            arguments: BTreeMap::new(),
            texts: BTreeMap::new(),
            end: None,
        }
    }

    fn read_body(&self, body: &[u8]) -> Result<ModelReply, AttemptError> {
        let response: WireResponse = parse_json(body, "the response")?;
        let items = response.output.clone();
        finish(
            response,
            items,
            &BTreeMap::new(),
            &self.reasoning,
            self.max_tokens,
        )
    }
}

/// The reply from a finished `response` and its output items (from the stream's
/// `output_item.done` events, or the response's own `output`).
fn finish(
    response: WireResponse,
    items: Vec<Value>,
    arguments: &BTreeMap<String, String>,
    reasoning: &ReasoningCache,
    max_tokens: Option<u32>,
) -> Result<ModelReply, AttemptError> {
    match response.status.as_deref() {
        Some("failed") => {
            return Err(match response.error {
                Some(error) => error.into_attempt_error(),
                None => AttemptError::protocol("the response failed without an error".into()),
            });
        }
        Some("incomplete") => {
            let reason = response
                .incomplete_details
                .and_then(|details| details.reason)
                .unwrap_or_default();
            return Err(AttemptError::Done(if reason == "max_output_tokens" {
                LlmError::MaxTokens {
                    limit: max_tokens.unwrap_or(0),
                }
            } else {
                LlmError::Protocol(format!("the response is incomplete ({reason})"))
            }));
        }
        _ => {}
    }
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    let mut thoughts = Vec::new();
    for item in items {
        match item["type"].as_str() {
            Some("message") => {
                for part in item["content"].as_array().into_iter().flatten() {
                    let piece = part["text"].as_str().or_else(|| part["refusal"].as_str());
                    text.push_str(piece.unwrap_or_default());
                }
            }
            Some("function_call") => {
                let id = item["id"].as_str().unwrap_or_default();
                let arguments = match item["arguments"].as_str() {
                    Some(whole) => whole.to_owned(),
                    None => arguments.get(id).cloned().unwrap_or_default(),
                };
                tool_calls.push(ToolCall {
                    id: item["call_id"].as_str().unwrap_or(id).to_owned(),
                    name: item["name"].as_str().unwrap_or_default().to_owned(),
                    arguments,
                });
            }
            Some("reasoning") => thoughts.push(item),
            _ => {}
        }
    }
    if let Some(first) = tool_calls.first() {
        reasoning.remember(&first.id, thoughts);
    }
    let finish_reason = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    Ok(ModelReply {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
        finish_reason: Some(finish_reason.to_owned()),
        usage: response.usage.map(WireUsage::into_usage),
        model: response.model.filter(|model| !model.is_empty()),
        id: response.id.filter(|id| !id.is_empty()),
    })
}

/// Folds the semantic events of one streamed response. Items are kept by `output_index`, so
/// their order is the model's even when their events interleave.
pub(crate) struct StreamFolder {
    reasoning: Arc<ReasoningCache>,
    max_tokens: Option<u32>,
    /// Finished items (`response.output_item.done`).
    items: BTreeMap<u64, Value>,
    /// Arguments of function calls as their deltas came, by item id.
    arguments: BTreeMap<String, String>,
    /// Text as its deltas came, by output index, for a message whose `done` never came.
    texts: BTreeMap<u64, String>,
    /// The final response (`response.completed`, `.incomplete` or `.failed`).
    end: Option<WireResponse>,
}

impl EventFolder for StreamFolder {
    fn push(&mut self, event: &str, data: &str) -> Result<Folded, AttemptError> {
        let value: Value = serde_json::from_str(data).map_err(|error| {
            AttemptError::protocol(format!(
                "a stream event ({event}) is not valid JSON ({error}): {}",
                error_message(data)
            ))
        })?;
        let index = value["output_index"].as_u64().unwrap_or_default();
        match value["type"].as_str().unwrap_or(event) {
            "response.output_text.delta" | "response.refusal.delta" => {
                let delta = value["delta"].as_str().unwrap_or_default();
                if delta.is_empty() {
                    return Ok(Folded::Nothing);
                }
                self.texts.entry(index).or_default().push_str(delta);
                return Ok(Folded::Text(delta.to_owned()));
            }
            "response.function_call_arguments.delta" => {
                let id = value["item_id"].as_str().unwrap_or_default().to_owned();
                let delta = value["delta"].as_str().unwrap_or_default();
                self.arguments.entry(id).or_default().push_str(delta);
            }
            "response.output_item.done" => {
                self.items.insert(index, value["item"].clone());
            }
            kind @ ("response.completed" | "response.incomplete" | "response.failed") => {
                let response: WireResponse = serde_json::from_value(value["response"].clone())
                    .map_err(|error| {
                        AttemptError::protocol(format!(
                            "the final {kind} event is malformed: {error}"
                        ))
                    })?;
                if kind == "response.failed" {
                    // Failed before anything usable: retried like its status, when it has one.
                    return Err(match response.error {
                        Some(error) => error.into_attempt_error(),
                        None => {
                            AttemptError::protocol("the response failed without an error".into())
                        }
                    });
                }
                self.end = Some(response);
                return Ok(Folded::End);
            }
            "error" => {
                let error: WireError = serde_json::from_value(value).unwrap_or_default();
                return Err(error.into_attempt_error());
            }
            _ => {}
        }
        Ok(Folded::Nothing)
    }

    fn finish(self) -> Result<ModelReply, LlmError> {
        let Some(response) = self.end else {
            return Err(LlmError::TruncatedStream);
        };
        let mut items = self.items;
        for (index, text) in self.texts {
            items.entry(index).or_insert_with(|| {
                serde_json::json!({"type": "message", "content": [{"type": "output_text", "text": text}]})
            });
        }
        // The items as the stream finished them; the final event's `output` when it sent none.
        let items: Vec<Value> = if items.is_empty() {
            response.output.clone()
        } else {
            items.into_values().collect()
        };
        finish(
            response,
            items,
            &self.arguments,
            &self.reasoning,
            self.max_tokens,
        )
        .map_err(|error| match error {
            AttemptError::Done(error) => error,
            other => other.into_llm_error("", "", 0),
        })
    }
}

#[derive(Debug, Clone, Deserialize)]
struct WireResponse {
    /// The provider's id of the response (`resp_...`).
    #[serde(default)]
    id: Option<String>,
    /// The model that answered.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    output: Vec<Value>,
    #[serde(default)]
    usage: Option<WireUsage>,
    #[serde(default)]
    error: Option<WireError>,
    #[serde(default)]
    incomplete_details: Option<IncompleteDetails>,
}

#[derive(Debug, Clone, Deserialize)]
struct IncompleteDetails {
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    input_tokens_details: Option<Details>,
    #[serde(default)]
    output_tokens_details: Option<Details>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
struct Details {
    #[serde(default)]
    cached_tokens: Option<u64>,
    #[serde(default)]
    reasoning_tokens: Option<u64>,
}

impl WireUsage {
    fn into_usage(self) -> Usage {
        Usage {
            prompt_tokens: self.input_tokens,
            completion_tokens: self.output_tokens,
            cache_read_tokens: self
                .input_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0),
            cache_creation_tokens: 0,
            reasoning_tokens: self
                .output_tokens_details
                .and_then(|details| details.reasoning_tokens)
                .unwrap_or(0),
            cost_usd: None,
            cost_complete: false,
        }
    }
}

/// `{"code": "rate_limit_exceeded", "message": "..."}`, in a failed response or an `error`
/// event.
#[derive(Debug, Clone, Default, Deserialize)]
struct WireError {
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

impl WireError {
    /// Errors OpenAI names as overload or rate limits are retried like their HTTP statuses.
    fn into_attempt_error(self) -> AttemptError {
        let code = self.code.unwrap_or_default();
        let status = match code.as_str() {
            "rate_limit_exceeded" => Some(429),
            "server_error" | "server_is_overloaded" | "slow_down" => Some(500),
            _ => None,
        };
        let message = match (self.message, code.is_empty()) {
            (Some(message), true) => message,
            (Some(message), false) => format!("{message} ({code})"),
            (None, _) => code,
        };
        AttemptError::provider_error(status, message)
    }
}
