//! agentloop's events as the AI SDK's UI message stream (the `ai` package, v7: what
//! `DefaultChatTransport` and `readUIMessageStream` read). Pure but for the log line of a run's
//! error: events in, parts out; the route (`crate::chat`) writes each part as `data: {json}`
//! and ends with `data: [DONE]`.
//!
//! One run (or the part of it after a resume) is one assistant message:
//!
//! | agentloop | UI message stream |
//! | --- | --- |
//! | the first event | `start` (`messageId`: the run id; `messageMetadata`: run and session) |
//! | `thinking` | `finish-step` of the previous iteration, `start-step` |
//! | `assistant_delta` | `reasoning-start` / `reasoning-delta` (the model's working text) |
//! | `final_response` | `text-start` / `text-delta` (the answer) |
//! | `tool_selected` | `tool-input-start`, `tool-input-available` (`dynamic`, `providerExecuted`: tools the server runs) |
//! | `tool_executed` | `tool-output-available`, `tool-output-error`, or `tool-output-denied` for a call the user denied |
//! | `input_required` (approval) | `tool-approval-request` per call (`approvalId` = the call id) |
//! | `input_required` (clarification) | the question as text, and `data-input-required` (the `ask_user` call is no tool part) |
//! | `plan_updated` | `data-plan` (id `plan`: the message keeps the newest plan) |
//! | `side_effect`, `duplicate_detected`, `forced_finalize`, `user_message`, `run_resumed` | `data-side-effect`, `data-duplicate`, `data-forced-finalize`, `data-user-message`, `data-run-resumed` |
//! | a sub-agent's events | `data-subagent` (id: the sub-agent's run: its newest event) |
//! | `error` | `error` (`errorText`: the code, and the plain sentence of `crate::disclosure` with the request's id) |
//! | `done` | open parts ended, `finish-step`, `data-usage`, `finish` |
//!
//! The model's text while it may still call tools is reasoning, not text, because agentloop
//! sends the answer again as `final_response` once a reply turns out to be the answer: as text
//! both, the answer would show twice.

use std::collections::HashSet;

use agentloop_core::protocol::{Event, EventKind, InputKind, RunStatus, ToolStatus};
use serde_json::{Value, json};

use crate::disclosure;
use crate::request_id::RequestScope;

/// The stream of one assistant message: what is open, what was denied.
#[derive(Debug, Default)]
pub struct UiMessageStream {
    started: bool,
    step_open: bool,
    /// The id of the text part (the answer) in progress.
    text: Option<String>,
    /// The id of the reasoning part (working text) in progress.
    reasoning: Option<String>,
    /// Calls the user denied: their tool errors are `tool-output-denied`.
    denied: HashSet<String>,
    /// Whether the client's message already has the calls of the run before this stream (it
    /// continues the message that asked for approval).
    continues: bool,
    /// Calls this stream announced.
    announced: HashSet<String>,
    /// The kind of input the run waits for, once it asked.
    waits_for: Option<InputKind>,
    /// The request answered: what its errors may tell.
    scope: RequestScope,
    finished: bool,
}

impl UiMessageStream {
    /// The stream of the request being answered (its id is the one errors tell).
    pub fn new() -> Self {
        Self::default()
    }

    /// A stream that continues the message of a run whose calls the user approved or denied:
    /// `denied` are the calls refused.
    pub fn with_denied(denied: impl IntoIterator<Item = String>) -> Self {
        Self {
            denied: denied.into_iter().collect(),
            continues: true,
            ..Self::default()
        }
    }

    /// Whether `finish` was sent (the message is complete; `[DONE]` follows).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The parts for `event`, in order.
    pub fn push(&mut self, event: &Event) -> Vec<Value> {
        let mut parts = Vec::new();
        if self.finished {
            return parts;
        }
        if !self.started {
            self.started = true;
            let session = match &event.kind {
                EventKind::RunStarted { session_id } => Some(session_id.to_string()),
                _ => None,
            };
            let run_id = event.parent_run_id.unwrap_or(event.run_id);
            let mut metadata = json!({ "runId": run_id });
            if let Some(session) = session {
                metadata["sessionId"] = json!(session);
            }
            parts.push(json!({
                "type": "start",
                "messageId": run_id.to_string(),
                "messageMetadata": metadata,
            }));
        }
        if event.parent_run_id.is_some() {
            parts.push(json!({
                "type": "data-subagent",
                "id": event.run_id.to_string(),
                "data": disclosure::shown_event(&self.scope, event),
            }));
            return parts;
        }
        match &event.kind {
            EventKind::RunStarted { .. } => {}
            // A typed answer as it is written: one part the client replaces (same id) until
            // the run's value, `complete`, comes with `done`.
            EventKind::OutputDelta { partial } => parts.push(output_part(partial, false)),
            EventKind::Thinking { .. } => {
                self.close_blocks(&mut parts);
                if self.step_open {
                    parts.push(json!({ "type": "finish-step" }));
                }
                self.step_open = true;
                parts.push(json!({ "type": "start-step" }));
            }
            EventKind::AssistantDelta { text } => {
                self.close_text(&mut parts);
                let id = self.reasoning.get_or_insert_with(|| {
                    let id = format!("reasoning-{}", event.seq);
                    parts.push(json!({ "type": "reasoning-start", "id": id }));
                    id
                });
                parts.push(json!({ "type": "reasoning-delta", "id": id, "delta": text }));
            }
            EventKind::FinalResponse { delta } => {
                self.close_reasoning(&mut parts);
                self.text_delta(event.seq, delta, &mut parts);
            }
            // The question is the assistant's text, the answer the user's next message.
            EventKind::ToolSelected { tool, .. } | EventKind::ToolExecuted { tool, .. }
                if tool == ASK_USER => {}
            EventKind::ToolSelected {
                call_id,
                tool,
                arguments,
                ..
            } => {
                self.close_blocks(&mut parts);
                self.announce(call_id, tool, arguments, &mut parts);
            }
            EventKind::ToolExecuted {
                call_id,
                tool,
                status,
                result,
                error,
                ..
            } => {
                self.close_blocks(&mut parts);
                if !self.continues && !self.announced.contains(call_id) {
                    // A call of the run before this message (a clarification was answered):
                    // the client's new message does not have it yet.
                    self.announce(call_id, tool, &Value::Null, &mut parts);
                }
                parts.push(match status {
                    ToolStatus::Success => json!({
                        "type": "tool-output-available",
                        "toolCallId": call_id,
                        "output": output(result.as_deref()),
                        "dynamic": true,
                        "providerExecuted": true,
                    }),
                    _ if self.denied.contains(call_id) => json!({
                        "type": "tool-output-denied",
                        "toolCallId": call_id,
                    }),
                    status => json!({
                        "type": "tool-output-error",
                        "toolCallId": call_id,
                        "errorText": error
                            .clone()
                            .or_else(|| result.clone())
                            .unwrap_or_else(|| status.as_str().to_string()),
                        "dynamic": true,
                        "providerExecuted": true,
                    }),
                });
            }
            EventKind::SideEffect {
                call_id,
                tool,
                note,
            } => parts.push(data(
                "side-effect",
                json!({ "callId": call_id, "tool": tool, "note": note }),
            )),
            // One part per call, its latest report: the client replaces a data part of the same
            // id.
            EventKind::ToolProgress {
                call_id,
                tool,
                progress,
                total,
                message,
            } => parts.push(json!({
                "type": "data-tool-progress",
                "id": call_id,
                "data": {
                    "callId": call_id,
                    "tool": tool,
                    "progress": progress,
                    "total": total,
                    "message": message,
                },
            })),
            EventKind::DuplicateDetected {
                call_id,
                tool,
                arguments,
            } => parts.push(data(
                "duplicate",
                json!({ "callId": call_id, "tool": tool, "arguments": arguments }),
            )),
            EventKind::ForcedFinalize { reason } => {
                parts.push(data("forced-finalize", json!({ "reason": reason })));
            }
            EventKind::UserMessage { text } => {
                parts.push(data("user-message", json!({ "text": text })));
            }
            // Accounting, not conversation: the run's cost comes with its end.
            EventKind::LlmCall { .. } => {}
            EventKind::GuardrailChecked {
                name,
                on,
                allowed,
                duration_ms,
                error,
            } => parts.push(data(
                "guardrail-checked",
                json!({ "name": name, "on": on, "allowed": allowed,
                        "durationMs": duration_ms, "error": error }),
            )),
            EventKind::GuardrailTripped {
                name,
                on,
                reason,
                action,
            } => parts.push(data(
                "guardrail-tripped",
                json!({ "name": name, "on": on, "reason": reason, "action": action }),
            )),
            // `guardrail_mode = "after"`: the client drops the text of this step.
            EventKind::AnswerRetracted { name } => {
                self.close_blocks(&mut parts);
                parts.push(data("answer-retracted", json!({ "name": name })));
            }
            EventKind::RunResumed { reason, instance } => parts.push(data(
                "run-resumed",
                json!({ "reason": reason, "instance": instance }),
            )),
            EventKind::PlanUpdated { plan } => parts.push(json!({
                "type": "data-plan",
                "id": "plan",
                "data": plan,
            })),
            // A running call's question: the run goes on; the client shows it (a form) and
            // answers with `POST /v1/runs/{id}/input {"elicitation": ...}`.
            EventKind::InputRequired {
                kind,
                question,
                elicitation: Some(elicitation),
                ..
            } => parts.push(data(
                "input-required",
                json!({ "kind": kind, "question": question, "calls": [], "elicitation": elicitation, "runId": event.run_id }),
            )),
            EventKind::InputRequired {
                kind,
                question,
                calls,
                elicitation: None,
            } => {
                self.close_blocks(&mut parts);
                self.waits_for = Some(*kind);
                match kind {
                    InputKind::Approval => {
                        for call in calls {
                            parts.push(json!({
                                "type": "tool-approval-request",
                                "approvalId": call.call_id,
                                "toolCallId": call.call_id,
                            }));
                        }
                    }
                    InputKind::Clarification => {
                        if let Some(question) = question {
                            self.text_delta(event.seq, question, &mut parts);
                            self.close_text(&mut parts);
                        }
                    }
                    InputKind::Elicitation => {}
                }
                parts.push(data(
                    "input-required",
                    json!({ "kind": kind, "question": question, "calls": calls }),
                ));
            }
            EventKind::Error { code, message } => {
                self.close_blocks(&mut parts);
                let error = disclosure::run_error(&self.scope, event.run_id, *code, message);
                parts.push(json!({
                    "type": "error",
                    "errorText": format!("{}: {}", error.code, disclosure::with_request_id(&error)),
                }));
            }
            EventKind::Done {
                status,
                iterations,
                tools_used,
                usage,
                output,
                ..
            } => {
                self.close_blocks(&mut parts);
                if let Some(value) = output {
                    parts.push(output_part(value, true));
                }
                if self.step_open {
                    self.step_open = false;
                    parts.push(json!({ "type": "finish-step" }));
                }
                parts.push(data(
                    "usage",
                    json!({
                        "status": status,
                        "iterations": iterations,
                        "toolsUsed": tools_used,
                        "usage": usage,
                    }),
                ));
                let reason = match status {
                    RunStatus::Completed => "stop",
                    RunStatus::Failed => "error",
                    // The `error` part before it says which guardrail and why.
                    RunStatus::Blocked => "content-filter",
                    RunStatus::AwaitingInput if self.waits_for == Some(InputKind::Approval) => {
                        "tool-calls"
                    }
                    RunStatus::AwaitingInput => "stop",
                    RunStatus::Cancelled | RunStatus::Running => "other",
                };
                parts.push(json!({
                    "type": "finish",
                    "finishReason": reason,
                    "messageMetadata": { "status": status },
                }));
                self.finished = true;
            }
        }
        parts
    }

    /// `tool-input-start` and `tool-input-available` of a call. `providerExecuted`: the server
    /// runs it (the client's `onToolCall` is not asked to).
    fn announce(&mut self, call_id: &str, tool: &str, input: &Value, parts: &mut Vec<Value>) {
        self.announced.insert(call_id.to_string());
        parts.push(json!({
            "type": "tool-input-start",
            "toolCallId": call_id,
            "toolName": tool,
            "dynamic": true,
            "providerExecuted": true,
        }));
        parts.push(json!({
            "type": "tool-input-available",
            "toolCallId": call_id,
            "toolName": tool,
            "input": input,
            "dynamic": true,
            "providerExecuted": true,
        }));
    }

    fn text_delta(&mut self, seq: u64, delta: &str, parts: &mut Vec<Value>) {
        let id = self.text.get_or_insert_with(|| {
            let id = format!("text-{seq}");
            parts.push(json!({ "type": "text-start", "id": id }));
            id
        });
        parts.push(json!({ "type": "text-delta", "id": id, "delta": delta }));
    }

    fn close_text(&mut self, parts: &mut Vec<Value>) {
        if let Some(id) = self.text.take() {
            parts.push(json!({ "type": "text-end", "id": id }));
        }
    }

    fn close_reasoning(&mut self, parts: &mut Vec<Value>) {
        if let Some(id) = self.reasoning.take() {
            parts.push(json!({ "type": "reasoning-end", "id": id }));
        }
    }

    fn close_blocks(&mut self, parts: &mut Vec<Value>) {
        self.close_reasoning(parts);
        self.close_text(parts);
    }
}

/// The built-in tool that asks the user a question.
const ASK_USER: &str = "ask_user";

/// A data part of agentloop's own (`data-NAME`).
/// The typed answer (docs/typed-answers.md): `data-output` with id `output`, so that each part
/// replaces the last in the client's message; `complete` on the run's valid value.
fn output_part(value: &Value, complete: bool) -> Value {
    json!({
        "type": "data-output",
        "id": "output",
        "data": { "value": value, "complete": complete },
    })
}

fn data(name: &str, data: Value) -> Value {
    json!({ "type": format!("data-{name}"), "data": data })
}

/// A tool's result: its JSON when it is JSON, else the text.
fn output(result: Option<&str>) -> Value {
    match result {
        None => Value::Null,
        Some(text) => serde_json::from_str(text).unwrap_or_else(|_| json!(text)),
    }
}

#[cfg(test)]
#[path = "ai_sdk_tests.rs"]
mod tests;
