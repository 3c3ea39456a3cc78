//! A run's events as Chat Completions: the chunks of a stream (`chat.completion.chunk`) and, by
//! the same fold, the whole `chat.completion`. Pure: events in, JSON out.
//!
//! | agentloop | Chat Completions |
//! | --- | --- |
//! | the first event | a chunk with `delta.role: "assistant"` |
//! | `final_response` | `delta.content` (the answer) |
//! | `assistant_delta` (the model's working text), `tool_selected`, `tool_executed` | `delta.reasoning_content`, unless reasoning is off |
//! | `input_required` with calls of client tools | `delta.tool_calls`, `finish_reason: "tool_calls"` |
//! | `input_required` otherwise (a question, approvals) | the question (or what waits) as content, `finish_reason: "stop"` |
//! | `done` | `finish_reason` (`stop`, or `length` when the loop had to force its answer); `usage` |
//! | `error` | the run's error (the plain sentence of `crate::disclosure`) |
//!
//! A sub-agent's events (`parent_run_id`) are left out: its work shows in its caller's tool call.

use std::collections::HashSet;

use agentloop_core::protocol::{
    ErrorCode, Event, EventKind, InputKind, RunStatus, ToolStatus, Usage,
};
use serde_json::{Value, json};
use uuid::Uuid;

/// The longest tool result shown as reasoning, in characters.
const SHOWN_RESULT: usize = 400;

/// One completion being built from a run's events.
#[derive(Debug)]
pub struct ChatChunks {
    id: String,
    created: i64,
    model: String,
    reasoning: bool,
    /// Names of the client's tools: their calls are `tool_calls`, not reasoning.
    client_tools: HashSet<String>,
    started: bool,
    content: String,
    reasoning_text: String,
    tool_calls: Vec<Value>,
    finish_reason: Option<&'static str>,
    forced: bool,
    usage: Usage,
    error: Option<(ErrorCode, String)>,
    finished: bool,
}

impl ChatChunks {
    pub fn new(
        run_id: Uuid,
        created: i64,
        model: &str,
        reasoning: bool,
        client_tools: HashSet<String>,
    ) -> ChatChunks {
        ChatChunks {
            id: completion_id(run_id),
            created,
            model: model.to_string(),
            reasoning,
            client_tools,
            started: false,
            content: String::new(),
            reasoning_text: String::new(),
            tool_calls: Vec::new(),
            finish_reason: None,
            forced: false,
            usage: Usage::default(),
            error: None,
            finished: false,
        }
    }

    /// Whether the run's last event came.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The run's error, once it failed: its code and message.
    pub fn error(&self) -> Option<&(ErrorCode, String)> {
        self.error.as_ref()
    }

    /// The chunks `event` adds. `error_message` tells what a client is told of an error event.
    pub fn push(&mut self, event: &Event, error_message: impl Fn(&Event) -> String) -> Vec<Value> {
        if self.finished || event.parent_run_id.is_some() {
            return Vec::new();
        }
        let mut chunks = Vec::new();
        if !self.started {
            self.started = true;
            chunks.push(self.chunk(json!({"role": "assistant", "content": ""}), None));
        }
        match &event.kind {
            EventKind::FinalResponse { delta } => {
                self.content.push_str(delta);
                chunks.push(self.chunk(json!({"content": delta}), None));
            }
            EventKind::AssistantDelta { text } => chunks.extend(self.reason(text)),
            EventKind::ToolSelected {
                tool, arguments, ..
            } if !self.client_tools.contains(tool) => {
                let text = format!("\n→ {tool} {arguments}\n");
                chunks.extend(self.reason(&text));
            }
            EventKind::ToolExecuted {
                tool,
                status,
                result,
                error,
                ..
            } if !self.client_tools.contains(tool) => {
                let shown = match status {
                    ToolStatus::Success => result.as_deref().unwrap_or_default(),
                    _ => error.as_deref().unwrap_or("failed"),
                };
                let text = format!("← {tool}: {}\n", shortened(shown));
                chunks.extend(self.reason(&text));
            }
            EventKind::ForcedFinalize { .. } => self.forced = true,
            EventKind::InputRequired {
                kind,
                question,
                calls,
                elicitation: None,
            } => {
                let client: Vec<_> = calls.iter().filter(|call| call.client).collect();
                if !client.is_empty() {
                    let calls: Vec<Value> = client
                        .iter()
                        .enumerate()
                        .map(|(index, call)| {
                            json!({
                                "index": index,
                                "id": call.call_id,
                                "type": "function",
                                "function": {"name": call.tool, "arguments": call.arguments.to_string()},
                            })
                        })
                        .collect();
                    self.tool_calls = calls.clone();
                    self.finish_reason = Some("tool_calls");
                    chunks.push(self.chunk(json!({"tool_calls": calls}), None));
                } else {
                    let text = match (kind, question) {
                        (_, Some(question)) => question.clone(),
                        (InputKind::Approval, None) => {
                            let tools: Vec<&str> =
                                calls.iter().map(|call| call.tool.as_str()).collect();
                            format!(
                                "The run waits for approval of: {}. Answer it with POST \
                                 /v1/runs/{}/input.",
                                tools.join(", "),
                                event.run_id
                            )
                        }
                        (_, None) => String::new(),
                    };
                    self.content.push_str(&text);
                    chunks.push(self.chunk(json!({"content": text}), None));
                }
            }
            EventKind::Error { code, .. } => {
                self.error = Some((*code, error_message(event)));
            }
            EventKind::Done { status, usage, .. } => {
                self.finished = true;
                self.usage = *usage;
                if *status == RunStatus::Failed && self.error.is_none() {
                    self.error = Some((ErrorCode::InternalError, "the run failed".into()));
                }
                let reason = self.finish_reason.unwrap_or(match self.forced {
                    true => "length",
                    false => "stop",
                });
                self.finish_reason = Some(reason);
                if self.error.is_none() {
                    chunks.push(self.chunk(json!({}), Some(reason)));
                }
            }
            _ => {}
        }
        chunks
    }

    fn reason(&mut self, text: &str) -> Option<Value> {
        if !self.reasoning || text.is_empty() {
            return None;
        }
        self.reasoning_text.push_str(text);
        Some(self.chunk(json!({"reasoning_content": text}), None))
    }

    fn chunk(&self, delta: Value, finish_reason: Option<&str>) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": Value::Null,
            "choices": [{"index": 0, "delta": delta, "logprobs": Value::Null, "finish_reason": finish_reason}],
        })
    }

    /// The last chunk of a stream that asked for usage (`stream_options.include_usage`).
    pub fn usage_chunk(&self) -> Value {
        json!({
            "id": self.id,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": [],
            "usage": usage(&self.usage),
        })
    }

    /// The whole completion, once the run finished (or paused).
    pub fn completion(&self) -> Value {
        let mut message = json!({
            "role": "assistant",
            "content": (!self.content.is_empty() || self.tool_calls.is_empty()).then_some(&self.content),
            "refusal": Value::Null,
        });
        if self.reasoning && !self.reasoning_text.is_empty() {
            message["reasoning_content"] = json!(self.reasoning_text);
        }
        if !self.tool_calls.is_empty() {
            let calls: Vec<Value> = self
                .tool_calls
                .iter()
                .map(|call| {
                    let mut call = call.clone();
                    if let Some(fields) = call.as_object_mut() {
                        fields.remove("index");
                    }
                    call
                })
                .collect();
            message["tool_calls"] = json!(calls);
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "system_fingerprint": Value::Null,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": Value::Null,
                "finish_reason": self.finish_reason.unwrap_or("stop"),
            }],
            "usage": usage(&self.usage),
        })
    }
}

/// The id of the completion a run answers: `chatcmpl-` and the run's id.
pub fn completion_id(run_id: Uuid) -> String {
    format!("chatcmpl-{}", run_id.simple())
}

/// A run's usage as OpenAI counts it.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
        "prompt_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "completion_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
    })
}

fn shortened(text: &str) -> String {
    match text.char_indices().nth(SHOWN_RESULT) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_string(),
    }
}

#[cfg(test)]
#[path = "chunks_tests.rs"]
mod tests;
