//! A run's events as the Responses API: the semantic stream events (`response.created`, ...,
//! `response.completed`, each with its `sequence_number`) and, by the same fold, the response
//! object. Pure: events in, JSON out. Replaying a run's stored events gives the same events
//! with the same numbers, so a client that resumes a stream (`starting_after`) misses nothing.
//!
//! | agentloop | Responses |
//! | --- | --- |
//! | the first event | `response.created`, `response.in_progress` |
//! | `final_response` | the message item (`response.output_item.added`, `response.content_part.added`), `response.output_text.delta` |
//! | `input_required` with calls of client tools | a `function_call` item per call (`added`, `response.function_call_arguments.done`, `done`) |
//! | `input_required` otherwise | its question as text |
//! | `done` | `response.output_text.done`, `response.content_part.done`, `response.output_item.done`, then `response.completed`, `response.failed` or `response.incomplete` (cancelled) |

use agentloop_core::protocol::{ErrorCode, Event, EventKind, InputKind, RunStatus, Usage};
use serde_json::{Value, json};
use uuid::Uuid;

/// The id of the response a run is: `resp_` and the run's id.
pub fn response_id(run_id: Uuid) -> String {
    format!("resp_{}", run_id.simple())
}

/// The run of a response id (`resp_<uuid>`; the bare UUID too).
pub fn run_of(response_id: &str) -> Option<Uuid> {
    let id = response_id.strip_prefix("resp_").unwrap_or(response_id);
    Uuid::parse_str(id).ok()
}

/// What the request said of the response (echoed in the object).
#[derive(Debug, Clone, Default)]
pub struct Echo {
    pub model: String,
    pub instructions: Option<String>,
    pub previous_response_id: Option<String>,
    pub background: bool,
    pub store: bool,
    pub metadata: Value,
}

/// One response being built from a run's events.
#[derive(Debug)]
pub struct ResponseEvents {
    run_id: Uuid,
    created_at: i64,
    echo: Echo,
    next_seq: u64,
    started: bool,
    /// The text of the message item, once it was added, and its output index.
    text: Option<(usize, String)>,
    /// Finished output items.
    output: Vec<Value>,
    status: &'static str,
    usage: Usage,
    error: Option<(ErrorCode, String)>,
    finished: bool,
}

impl ResponseEvents {
    pub fn new(run_id: Uuid, created_at: i64, echo: Echo) -> ResponseEvents {
        ResponseEvents {
            run_id,
            created_at,
            echo,
            next_seq: 0,
            started: false,
            text: None,
            output: Vec::new(),
            status: "in_progress",
            usage: Usage::default(),
            error: None,
            finished: false,
        }
    }

    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The stream events `event` adds. `error_message` tells what a client is told of an
    /// error event.
    pub fn push(&mut self, event: &Event, error_message: impl Fn(&Event) -> String) -> Vec<Value> {
        if self.finished || event.parent_run_id.is_some() {
            return Vec::new();
        }
        let mut out = Vec::new();
        if !self.started {
            self.started = true;
            let response = self.response();
            out.push(self.event("response.created", json!({"response": response})));
            out.push(self.event("response.in_progress", json!({"response": response})));
        }
        match &event.kind {
            EventKind::FinalResponse { delta } => out.extend(self.text_delta(delta)),
            EventKind::InputRequired {
                kind,
                question,
                calls,
                elicitation: None,
            } => {
                let client: Vec<_> = calls.iter().filter(|call| call.client).collect();
                if client.is_empty() {
                    let text = match (kind, question) {
                        (_, Some(question)) => question.clone(),
                        (InputKind::Approval, None) => format!(
                            "The run waits for approval; answer it with POST /v1/runs/{}/input.",
                            event.run_id
                        ),
                        (_, None) => String::new(),
                    };
                    out.extend(self.text_delta(&text));
                }
                for call in client {
                    let index = self.output.len() + usize::from(self.text.is_some());
                    let item = json!({
                        "type": "function_call",
                        "id": format!("fc_{}", call.call_id),
                        "call_id": call.call_id,
                        "name": call.tool,
                        "arguments": call.arguments.to_string(),
                        "status": "completed",
                    });
                    let mut added = item.clone();
                    added["status"] = json!("in_progress");
                    out.push(self.event(
                        "response.output_item.added",
                        json!({"output_index": index, "item": added}),
                    ));
                    out.push(self.event(
                        "response.function_call_arguments.done",
                        json!({"output_index": index, "item_id": item["id"], "arguments": item["arguments"]}),
                    ));
                    out.push(self.event(
                        "response.output_item.done",
                        json!({"output_index": index, "item": item}),
                    ));
                    self.output.push(item);
                }
            }
            EventKind::Error { code, .. } => self.error = Some((*code, error_message(event))),
            EventKind::Done { status, usage, .. } => {
                self.usage = *usage;
                out.extend(self.close_text());
                self.finished = true;
                let (status, kind) = match status {
                    RunStatus::Failed => ("failed", "response.failed"),
                    RunStatus::Cancelled => ("cancelled", "response.incomplete"),
                    _ => ("completed", "response.completed"),
                };
                self.status = status;
                if status == "failed" && self.error.is_none() {
                    self.error = Some((ErrorCode::InternalError, "the run failed".into()));
                }
                let response = self.response();
                out.push(self.event(kind, json!({"response": response})));
            }
            _ => {}
        }
        out
    }

    fn text_delta(&mut self, delta: &str) -> Vec<Value> {
        let mut out = Vec::new();
        if self.text.is_none() {
            let index = self.output.len();
            self.text = Some((index, String::new()));
            let mut item = self.message_item("");
            item["status"] = json!("in_progress");
            item["content"] = json!([]);
            out.push(self.event(
                "response.output_item.added",
                json!({"output_index": index, "item": item}),
            ));
            out.push(self.event(
                "response.content_part.added",
                json!({"output_index": index, "item_id": self.item_id(), "content_index": 0,
                    "part": {"type": "output_text", "text": "", "annotations": []}}),
            ));
        }
        if let Some((index, text)) = &mut self.text {
            text.push_str(delta);
            let index = *index;
            out.push(self.event(
                "response.output_text.delta",
                json!({"output_index": index, "item_id": self.item_id(), "content_index": 0,
                    "delta": delta, "logprobs": []}),
            ));
        }
        out
    }

    fn close_text(&mut self) -> Vec<Value> {
        let Some((index, text)) = self.text.take() else {
            return Vec::new();
        };
        let item = self.message_item(&text);
        let out = vec![
            self.event(
                "response.output_text.done",
                json!({"output_index": index, "item_id": self.item_id(), "content_index": 0,
                    "text": text, "logprobs": []}),
            ),
            self.event(
                "response.content_part.done",
                json!({"output_index": index, "item_id": self.item_id(), "content_index": 0,
                    "part": item["content"][0]}),
            ),
            self.event(
                "response.output_item.done",
                json!({"output_index": index, "item": item}),
            ),
        ];
        self.output.insert(index.min(self.output.len()), item);
        out
    }

    fn item_id(&self) -> String {
        format!("msg_{}", self.run_id.simple())
    }

    fn message_item(&self, text: &str) -> Value {
        json!({
            "type": "message",
            "id": self.item_id(),
            "status": "completed",
            "role": "assistant",
            "content": [{"type": "output_text", "text": text, "annotations": []}],
        })
    }

    fn event(&mut self, kind: &str, mut fields: Value) -> Value {
        fields["type"] = json!(kind);
        fields["sequence_number"] = json!(self.next_seq);
        self.next_seq += 1;
        fields
    }

    /// The response object as it stands.
    pub fn response(&self) -> Value {
        let mut output = self.output.clone();
        if let Some((index, text)) = &self.text {
            let mut item = self.message_item(text);
            item["status"] = json!("in_progress");
            output.insert((*index).min(output.len()), item);
        }
        let status = match (self.started, self.status, self.echo.background) {
            (false, "in_progress", true) => "queued",
            _ => self.status,
        };
        let error = self
            .error
            .as_ref()
            .map(|(code, message)| json!({"code": code.as_str(), "message": message}));
        json!({
            "id": response_id(self.run_id),
            "object": "response",
            "created_at": self.created_at,
            "status": status,
            "background": self.echo.background,
            "error": error,
            "incomplete_details": (status == "cancelled").then(|| json!({"reason": "cancelled"})),
            "instructions": self.echo.instructions,
            "metadata": self.echo.metadata,
            "model": self.echo.model,
            "output": output,
            "parallel_tool_calls": true,
            "previous_response_id": self.echo.previous_response_id,
            "store": self.echo.store,
            "temperature": Value::Null,
            "top_p": Value::Null,
            "text": {"format": {"type": "text"}},
            "tool_choice": "auto",
            "tools": [],
            "usage": self.finished.then(|| usage(&self.usage)),
        })
    }
}

/// A run's usage as the Responses API counts it.
pub fn usage(usage: &Usage) -> Value {
    json!({
        "input_tokens": usage.prompt_tokens,
        "input_tokens_details": {"cached_tokens": usage.cache_read_tokens},
        "output_tokens": usage.completion_tokens,
        "output_tokens_details": {"reasoning_tokens": usage.reasoning_tokens},
        "total_tokens": usage.prompt_tokens + usage.completion_tokens,
    })
}

#[cfg(test)]
#[path = "response_events_tests.rs"]
mod tests;
