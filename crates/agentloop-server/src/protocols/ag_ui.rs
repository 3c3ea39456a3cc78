//! agentloop's events as AG-UI events (the protocol of `@ag-ui/client` 1.x's `HttpAgent`, read
//! by CopilotKit). Pure but for the log line of a run's error: events in, AG-UI events out;
//! the route (`crate::ag_ui`) writes each as `data: {json}`.
//!
//! One AG-UI run is one request: a run of agentloop from its start (or from where a pause left
//! it) to its end or its next pause.
//!
//! | agentloop | AG-UI |
//! | --- | --- |
//! | the first event | `RUN_STARTED` (`threadId`, `runId` of the request; `metadata.agentloop`: run and session) |
//! | `thinking` | `STEP_FINISHED` of the previous iteration, `STEP_STARTED` (`stepName`: `iteration N`) |
//! | `assistant_delta` | `TEXT_MESSAGE_START` / `TEXT_MESSAGE_CONTENT` (one assistant message per reply) |
//! | `final_response` | the answer's `TEXT_MESSAGE_*`; nothing when the reply's streamed text was the answer already |
//! | `tool_selected` | `TOOL_CALL_START` (`toolCallId`: `RUN_ID:CALL_ID`, [`tool_call_id`]; `parentMessageId`: the reply), `TOOL_CALL_ARGS` (the arguments' JSON), `TOOL_CALL_END` |
//! | `tool_executed` | `TOOL_CALL_RESULT` (`content`: the result, or the error; `metadata.agentloop.status`); none for the result of a frontend tool the request brought |
//! | `plan_updated` | `STATE_SNAPSHOT`: the client's state with `plan` set |
//! | `input_required` | `CUSTOM agentloop.input_required`; a question is also the assistant's text |
//! | `tool_progress` | `CUSTOM agentloop.tool_progress` (`toolCallId` as in `TOOL_CALL_*`, `tool`, `progress`, `total`, `message`) |
//! | `side_effect`, `duplicate_detected`, `forced_finalize`, `user_message`, `run_resumed` | `CUSTOM agentloop.side_effect`, `.duplicate`, `.forced_finalize`, `.user_message`, `.run_resumed` (agentloop's fields) |
//! | a sub-agent's events | `CUSTOM agentloop.subagent` (the event as agentloop sends it) |
//! | `error` | `RUN_ERROR` (`code`, `message`: the plain sentence of `crate::disclosure` with the request's id), last |
//! | `output_delta` | `CUSTOM agentloop.output_delta` `{partial}` |
//! | `done` | open messages and the step ended, `CUSTOM agentloop.usage`, `RUN_FINISHED` with `usage`, `result.output` (a typed answer's value) and the `outcome`: `success`; `success` with `pendingToolCallIds` (client tools to run); `interrupt` (approvals, a question); `cancelled` |
//!
//! The model's text is streamed as it comes; agentloop sends an answer again as
//! `final_response` once a reply turns out to be the answer, which is left out here when it
//! repeats what was streamed (a forced summary, never streamed before, is sent).

use std::collections::HashSet;

use agentloop_core::protocol::{
    Event, EventKind, InputKind, PendingCall, RunStatus, ToolStatus, Usage,
};
use serde_json::{Value, json};
use uuid::Uuid;

use crate::disclosure;
use crate::request_id::{self, RequestScope};

/// The `reason` of the interrupt of a call that waits for approval.
pub const APPROVAL_REASON: &str = "agentloop:approval";
/// The `reason` of the interrupt of a question the run asks.
pub const QUESTION_REASON: &str = "agentloop:clarification";

/// The AG-UI events of one request.
#[derive(Debug)]
pub struct AgUiStream {
    thread_id: String,
    run_id: String,
    /// The client's state (an object), with the plan once there is one.
    state: Value,
    started: bool,
    /// The step in progress (its name).
    step: Option<String>,
    /// The assistant message of the reply in progress: its id.
    reply: Option<String>,
    /// The text message open now, and its text so far.
    text: Option<(String, String)>,
    /// The text of the reply's message as streamed, once it ended without tool calls: the
    /// answer, when `final_response` repeats it.
    streamed: Option<String>,
    /// Whether the answer is being written as its own message.
    answering: bool,
    /// What the run waits for, once it paused.
    waits: Option<(InputKind, Option<String>, Vec<PendingCall>)>,
    error: Option<(String, String)>,
    /// The request answered: what its errors may tell.
    scope: RequestScope,
    /// Calls of frontend tools whose results this request brought: the client has them.
    client_results: HashSet<String>,
    finished: bool,
}

impl AgUiStream {
    /// The stream of the request of `thread_id` and `run_id` (the client's ids), whose client
    /// sent `state`; made while that request is answered (its id is the one errors tell).
    pub fn new(thread_id: impl Into<String>, run_id: impl Into<String>, state: Value) -> Self {
        Self {
            thread_id: thread_id.into(),
            run_id: run_id.into(),
            state: match state {
                Value::Object(_) => state,
                _ => json!({}),
            },
            started: false,
            step: None,
            reply: None,
            text: None,
            streamed: None,
            answering: false,
            waits: None,
            error: None,
            scope: request_id::current(),
            client_results: HashSet::new(),
            finished: false,
        }
    }

    /// The stream of a request that brought the results of the frontend tool calls
    /// `call_ids` (agentloop's ids): their `tool_executed` events are left out, the client
    /// has the results already.
    pub fn with_client_results(mut self, call_ids: impl IntoIterator<Item = String>) -> Self {
        self.client_results = call_ids.into_iter().collect();
        self
    }

    /// Whether `RUN_FINISHED` or `RUN_ERROR` was sent: nothing follows.
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// The AG-UI events for `event`, in order.
    pub fn push(&mut self, event: &Event) -> Vec<Value> {
        let mut out = Vec::new();
        if self.finished {
            return out;
        }
        if !self.started {
            self.started = true;
            let mut agentloop = json!({ "runId": event.parent_run_id.unwrap_or(event.run_id) });
            if let EventKind::RunStarted { session_id } = &event.kind {
                agentloop["sessionId"] = json!(session_id);
            }
            out.push(json!({
                "type": "RUN_STARTED",
                "threadId": self.thread_id,
                "runId": self.run_id,
                "metadata": { "agentloop": agentloop },
            }));
        }
        if event.parent_run_id.is_some() {
            out.push(custom(
                "subagent",
                json!(disclosure::shown_event(&self.scope, event)),
            ));
            return out;
        }
        match &event.kind {
            EventKind::RunStarted { .. } => {}
            // Partial typed answers are not mapped to this protocol yet; the answer's text is.
            // A typed answer as it is written; the run's value is `RUN_FINISHED.result.output`.
            EventKind::OutputDelta { partial } => {
                out.push(custom("output_delta", json!({ "partial": partial })));
            }
            EventKind::Thinking { iteration } => {
                self.end_reply(&mut out);
                self.end_step(&mut out);
                let name = format!("iteration {iteration}");
                out.push(json!({ "type": "STEP_STARTED", "stepName": name }));
                self.step = Some(name);
                self.reply = Some(message_id(event));
            }
            EventKind::AssistantDelta { text } => {
                if !text.is_empty() {
                    let id = self.reply_id(event);
                    self.write(&id, text, &mut out);
                }
            }
            EventKind::FinalResponse { delta } => self.answer(event, delta, &mut out),
            // The question is the assistant's text; its answer comes with the next request.
            EventKind::ToolSelected { tool, .. } | EventKind::ToolExecuted { tool, .. }
                if tool == ASK_USER => {}
            EventKind::ToolExecuted { call_id, .. } if self.client_results.contains(call_id) => {}
            EventKind::ToolSelected {
                call_id,
                tool,
                arguments,
                ..
            } => {
                let parent = self.reply_id(event);
                self.end_text(&mut out);
                self.streamed = None;
                let call_id = tool_call_id(event.run_id, call_id);
                out.push(json!({
                    "type": "TOOL_CALL_START",
                    "toolCallId": call_id,
                    "toolCallName": tool,
                    "parentMessageId": parent,
                }));
                out.push(json!({
                    "type": "TOOL_CALL_ARGS",
                    "toolCallId": call_id,
                    "delta": arguments.to_string(),
                }));
                out.push(json!({ "type": "TOOL_CALL_END", "toolCallId": call_id }));
            }
            EventKind::ToolExecuted {
                call_id,
                status,
                duration_ms,
                result,
                error,
                ..
            } => {
                self.end_text(&mut out);
                let content = match status {
                    ToolStatus::Success => result.clone().unwrap_or_default(),
                    _ => error
                        .clone()
                        .or_else(|| result.clone())
                        .unwrap_or_else(|| status.as_str().to_string()),
                };
                let call_id = tool_call_id(event.run_id, call_id);
                out.push(json!({
                    "type": "TOOL_CALL_RESULT",
                    "messageId": format!("{call_id}-result"),
                    "toolCallId": call_id,
                    "content": content,
                    "role": "tool",
                    "metadata": { "agentloop": { "status": status, "durationMs": duration_ms } },
                }));
            }
            EventKind::SideEffect {
                call_id,
                tool,
                note,
            } => out.push(custom(
                "side_effect",
                json!({ "callId": call_id, "tool": tool, "note": note }),
            )),
            EventKind::ToolProgress {
                call_id,
                tool,
                progress,
                total,
                message,
            } => out.push(custom(
                "tool_progress",
                json!({
                    "toolCallId": tool_call_id(event.run_id, call_id),
                    "tool": tool,
                    "progress": progress,
                    "total": total,
                    "message": message,
                }),
            )),
            EventKind::DuplicateDetected {
                call_id,
                tool,
                arguments,
            } => out.push(custom(
                "duplicate",
                json!({ "callId": call_id, "tool": tool, "arguments": arguments }),
            )),
            EventKind::LlmCall { .. } => {
                // agentloop's own payload: the event's fields without its type.
                let mut payload = json!(event.kind);
                if let Some(fields) = payload.as_object_mut() {
                    fields.remove("type");
                }
                out.push(custom("llm_call", payload));
            }
            EventKind::ForcedFinalize { reason } => {
                out.push(custom("forced_finalize", json!({ "reason": reason })));
            }
            EventKind::GuardrailChecked { .. } | EventKind::GuardrailTripped { .. } => {
                let mut payload = json!(event.kind);
                let name = event.kind.type_name();
                if let Some(fields) = payload.as_object_mut() {
                    fields.remove("type");
                }
                out.push(custom(name, payload));
            }
            // `guardrail_mode = "after"`: the client drops the text of this step.
            EventKind::AnswerRetracted { name } => {
                self.end_reply(&mut out);
                out.push(custom("answer_retracted", json!({ "name": name })));
            }
            EventKind::UserMessage { text } => {
                out.push(custom("user_message", json!({ "text": text })));
            }
            EventKind::RunResumed { reason, instance } => out.push(custom(
                "run_resumed",
                json!({ "reason": reason, "instance": instance }),
            )),
            EventKind::PlanUpdated { plan } => {
                self.state["plan"] = json!(plan);
                out.push(json!({ "type": "STATE_SNAPSHOT", "snapshot": self.state }));
            }
            // A running call's question: the run goes on; the client shows it and answers with
            // `POST /v1/runs/{id}/input {"elicitation": ...}`.
            EventKind::InputRequired {
                kind,
                question,
                elicitation: Some(elicitation),
                ..
            } => out.push(custom(
                "input_required",
                json!({ "kind": kind, "question": question, "calls": [], "elicitation": elicitation, "runId": event.run_id }),
            )),
            EventKind::InputRequired {
                kind,
                question,
                calls,
                elicitation: None,
            } => {
                self.end_reply(&mut out);
                if let Some(question) = question {
                    let id = format!("{}-question", message_id(event));
                    self.write(&id, question, &mut out);
                    self.end_text(&mut out);
                }
                out.push(custom(
                    "input_required",
                    json!({ "kind": kind, "question": question, "calls": calls }),
                ));
                self.waits = Some((*kind, question.clone(), calls.clone()));
            }
            EventKind::Error { code, message } => {
                let error = disclosure::run_error(&self.scope, event.run_id, *code, message);
                self.error = Some((error.code.clone(), disclosure::with_request_id(&error)));
            }
            EventKind::Done {
                status,
                iterations,
                tools_used,
                usage,
                output,
                ..
            } => {
                self.end_reply(&mut out);
                self.end_step(&mut out);
                out.push(custom(
                    "usage",
                    json!({
                        "status": status,
                        "iterations": iterations,
                        "toolsUsed": tools_used,
                        "usage": usage,
                    }),
                ));
                out.push(self.last(event.run_id, *status, usage, output.as_ref()));
                self.finished = true;
            }
        }
        out
    }

    /// `RUN_FINISHED` with the run's outcome, or `RUN_ERROR` for a run that failed.
    fn last(
        &self,
        run_id: Uuid,
        status: RunStatus,
        usage: &Usage,
        output: Option<&Value>,
    ) -> Value {
        // A blocked run ends in error too: its `error` event names the guardrail.
        if matches!(status, RunStatus::Failed | RunStatus::Blocked) {
            let (code, message) = self
                .error
                .clone()
                .unwrap_or_else(|| ("internal_error".into(), "the run failed".into()));
            return json!({ "type": "RUN_ERROR", "code": code, "message": message });
        }
        let outcome = match (status, &self.waits) {
            (RunStatus::Cancelled, _) => json!({ "type": "cancelled" }),
            (RunStatus::AwaitingInput, Some((kind, question, calls))) => {
                let (client, approvals): (Vec<&PendingCall>, Vec<&PendingCall>) =
                    calls.iter().partition(|call| call.client);
                let mut interrupts: Vec<Value> = approvals
                    .iter()
                    .map(|call| {
                        let id = tool_call_id(run_id, &call.call_id);
                        json!({
                            "id": id,
                            "reason": APPROVAL_REASON,
                            "message": format!("Allow {}?", call.tool),
                            "toolCallId": id,
                            "metadata": { "agentloop": { "tool": call.tool, "arguments": call.arguments } },
                        })
                    })
                    .collect();
                if *kind == InputKind::Clarification {
                    interrupts.push(json!({
                        "id": run_id.to_string(),
                        "reason": QUESTION_REASON,
                        "message": question.clone().unwrap_or_default(),
                    }));
                }
                if interrupts.is_empty() {
                    // Only client tools wait: the client runs them and sends their results.
                    let pending: Vec<String> = client
                        .iter()
                        .map(|call| tool_call_id(run_id, &call.call_id))
                        .collect();
                    json!({ "type": "success", "pendingToolCallIds": pending })
                } else {
                    json!({ "type": "interrupt", "interrupts": interrupts })
                }
            }
            _ => json!({ "type": "success" }),
        };
        let mut result = json!({ "status": status, "agentloopRunId": run_id });
        if let Some(output) = output {
            // A typed answer's value (docs/typed-answers.md).
            result["output"] = output.clone();
        }
        json!({
            "type": "RUN_FINISHED",
            "threadId": self.thread_id,
            "runId": self.run_id,
            "result": result,
            "outcome": outcome,
            "usage": [{
                "inputTokens": usage.prompt_tokens,
                "outputTokens": usage.completion_tokens,
                "totalTokens": usage.total(),
                "cachedInputTokens": usage.cache_read_tokens,
                "reasoningTokens": usage.reasoning_tokens,
            }],
        })
    }

    /// A chunk of the answer: nothing when it repeats the reply's streamed text, else the
    /// answer's own message.
    fn answer(&mut self, event: &Event, delta: &str, out: &mut Vec<Value>) {
        if !self.answering {
            let streamed = self
                .text
                .as_ref()
                .map(|(_, text)| text.clone())
                .or_else(|| self.streamed.clone());
            if streamed.is_some_and(|text| text.trim() == delta.trim()) {
                self.end_text(out);
                self.streamed = None;
                return;
            }
            self.end_text(out);
            self.answering = true;
            self.text = None;
            let id = format!("{}-answer", message_id(event));
            self.write(&id, delta, out);
            return;
        }
        if let Some((id, _)) = self.text.clone() {
            self.write(&id, delta, out);
        }
    }

    /// Writes `delta` into the text message `id`, opening it if it is not the open one.
    fn write(&mut self, id: &str, delta: &str, out: &mut Vec<Value>) {
        if self.text.as_ref().is_none_or(|(open, _)| open != id) {
            self.end_text(out);
            out.push(json!({ "type": "TEXT_MESSAGE_START", "messageId": id, "role": "assistant" }));
            self.text = Some((id.to_string(), String::new()));
        }
        if let Some((_, text)) = &mut self.text {
            text.push_str(delta);
        }
        if !delta.is_empty() {
            out.push(json!({ "type": "TEXT_MESSAGE_CONTENT", "messageId": id, "delta": delta }));
        }
    }

    fn end_text(&mut self, out: &mut Vec<Value>) {
        if let Some((id, text)) = self.text.take() {
            out.push(json!({ "type": "TEXT_MESSAGE_END", "messageId": id }));
            if !self.answering {
                self.streamed = Some(text);
            }
        }
    }

    /// Ends the reply in progress: its text, and what is remembered of it.
    fn end_reply(&mut self, out: &mut Vec<Value>) {
        self.end_text(out);
        self.streamed = None;
        self.reply = None;
        self.answering = false;
    }

    fn end_step(&mut self, out: &mut Vec<Value>) {
        if let Some(name) = self.step.take() {
            out.push(json!({ "type": "STEP_FINISHED", "stepName": name }));
        }
    }

    /// The assistant message of the reply in progress (one is made for a reply that came
    /// without a `thinking` before it, as after a resume).
    fn reply_id(&mut self, event: &Event) -> String {
        self.reply.get_or_insert_with(|| message_id(event)).clone()
    }
}

/// The built-in tool that asks the user a question.
const ASK_USER: &str = "ask_user";

/// The AG-UI id of call `call_id` of run `run_id`: unique in the thread (a model may give the
/// calls of two runs the same id); interrupts and frontend tool results name calls by it.
pub fn tool_call_id(run_id: Uuid, call_id: &str) -> String {
    format!("{run_id}:{call_id}")
}

/// An id unique in the thread: the run's id and the event's place in it.
fn message_id(event: &Event) -> String {
    format!("{}-{}", event.run_id, event.seq)
}

/// A `CUSTOM` event of agentloop's own (`agentloop.NAME`).
fn custom(name: &str, value: Value) -> Value {
    json!({ "type": "CUSTOM", "name": format!("agentloop.{name}"), "value": value })
}

#[cfg(test)]
#[path = "ag_ui_tests.rs"]
mod tests;
