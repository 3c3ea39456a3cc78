//! The run as a state machine that does no I/O.
//!
//! The driver asks [`RunMachine::start`] for the first [`Step`], performs it (an LLM call or tool
//! calls), and feeds the result back; every feed returns the next step until
//! [`Step::Finished`]. Events pile up in an outbox the driver drains after each feed, so it can
//! persist a step's changes before it emits them.

mod batch;
mod text;
mod view;

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use agentloop_protocol::{
    ChatMessage, EventKind, FinalizeReason, RunStatus, ToolCall, ToolExecutionRecord, ToolStatus,
    Usage,
};
use serde_json::Value;
use uuid::Uuid;

pub use batch::{ToolInvocation, ToolResult};
pub use text::{bound, fallback_answer, one_line, records_digest};

use crate::{
    canonical::canonical_json,
    catalog::ToolCatalog,
    llm::{CallPurpose, LlmError, ModelReply, ModelRequest, ToolChoice},
    settings::AgentSettings,
};
use batch::{Batch, Slot, SlotState, parse_arguments, refused_record};

/// Who a run is for and under which rules.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunContext {
    pub user_id: Option<String>,
    pub entity_id: Option<String>,
    pub workflow: Option<String>,
    pub read_only: bool,
}

/// Everything a run starts from.
#[derive(Debug, Clone)]
pub struct RunInput {
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub query: String,
    /// Earlier messages of the session, oldest first.
    pub history: Vec<ChatMessage>,
    pub system_prompt: String,
    pub model: Option<String>,
    pub max_iterations: u32,
    pub context: RunContext,
}

/// What the driver must do next.
#[derive(Debug)]
pub enum Step {
    CallModel(ModelRequest),
    CallTools(Vec<ToolInvocation>),
    Finished(Box<RunOutcome>),
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq)]
pub struct RunFailure {
    pub code: String,
    pub message: String,
}

/// How a run ended, with everything it produced.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub status: RunStatus,
    /// The answer; `None` only when the run failed.
    pub answer: Option<String>,
    pub failure: Option<RunFailure>,
    /// Set when the loop had to force the summary.
    pub finalize_reason: Option<FinalizeReason>,
    pub iterations: u32,
    pub tools_used: u32,
    pub records: Vec<ToolExecutionRecord>,
    /// This run's messages: the user message, tool calls and results, and the answer.
    pub messages: Vec<ChatMessage>,
    pub usage: Usage,
    /// Id of the final assistant message.
    pub message_id: Option<Uuid>,
    pub should_refresh: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Created,
    AwaitingStep,
    AwaitingTools,
    AwaitingFinalize(FinalizeReason),
    Finished,
}

/// One run of the loop.
pub struct RunMachine {
    input: RunInput,
    settings: Arc<AgentSettings>,
    catalog: Arc<ToolCatalog>,
    phase: Phase,
    /// This run's messages, starting with the user message.
    turn: Vec<ChatMessage>,
    records: Vec<ToolExecutionRecord>,
    record_by_call: HashMap<String, usize>,
    iteration: u32,
    tools_used: u32,
    usage: Usage,
    /// Canonical `tool + arguments` of every call of the run, to the id of its first call.
    seen_calls: HashMap<String, String>,
    call_ids: BTreeSet<String>,
    duplicates: u32,
    consecutive_failures: u32,
    failure_streaks: HashMap<String, u32>,
    withdrawn: BTreeSet<String>,
    finalize_reason: Option<FinalizeReason>,
    batch: Batch,
    outbox: Vec<EventKind>,
    outcome: Option<RunOutcome>,
}

impl RunMachine {
    pub fn new(input: RunInput, settings: Arc<AgentSettings>, catalog: Arc<ToolCatalog>) -> Self {
        let turn = vec![ChatMessage::user(input.query.clone())];
        Self {
            input,
            settings,
            catalog,
            phase: Phase::Created,
            turn,
            records: Vec::new(),
            record_by_call: HashMap::new(),
            iteration: 0,
            tools_used: 0,
            usage: Usage::default(),
            seen_calls: HashMap::new(),
            call_ids: BTreeSet::new(),
            duplicates: 0,
            consecutive_failures: 0,
            failure_streaks: HashMap::new(),
            withdrawn: BTreeSet::new(),
            finalize_reason: None,
            batch: Batch::default(),
            outbox: Vec::new(),
            outcome: None,
        }
    }

    pub fn run_id(&self) -> Uuid {
        self.input.run_id
    }

    pub fn input(&self) -> &RunInput {
        &self.input
    }

    pub fn iteration(&self) -> u32 {
        self.iteration
    }

    /// Events produced since the last call, in order.
    pub fn take_events(&mut self) -> Vec<EventKind> {
        std::mem::take(&mut self.outbox)
    }

    /// Tools that failed too often and are no longer offered.
    pub fn withdrawn_tools(&self) -> impl Iterator<Item = &str> {
        self.withdrawn.iter().map(String::as_str)
    }

    /// Begins the run.
    pub fn start(&mut self) -> Step {
        if self.phase != Phase::Created {
            return self.unexpected("start");
        }
        self.emit(EventKind::RunStarted {
            session_id: self.input.session_id,
        });
        self.next_iteration()
    }

    /// Feeds the result of the LLM call asked for by the last step.
    pub fn on_model_reply(&mut self, reply: Result<ModelReply, LlmError>) -> Step {
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => return self.fail(error.code(), error.to_string()),
        };
        if let Some(usage) = reply.usage {
            self.usage.add(usage);
        }
        match self.phase {
            Phase::AwaitingStep => self.on_step_reply(reply),
            Phase::AwaitingFinalize(_) => {
                let answer = match reply.text() {
                    // The driver already streamed this text as the answer.
                    Some(text) => text.to_string(),
                    None => self.emit_answer(fallback_answer(&self.records)),
                };
                self.finish(RunStatus::Completed, Some(answer), None)
            }
            _ => self.unexpected("a model reply"),
        }
    }

    /// Feeds the result of one tool call; returns the next step once every call of the batch
    /// has ended.
    pub fn on_tool_result(&mut self, result: ToolResult) -> Option<Step> {
        if self.phase != Phase::AwaitingTools {
            return Some(self.unexpected("a tool result"));
        }
        let max_chars = self.settings.tool_output_max_chars;
        let iteration = self.iteration;
        let Some(slot) = self.batch.slot_mut(&result.call_id) else {
            tracing::warn!(call_id = %result.call_id, "result for a call that is not running");
            return None;
        };
        if !matches!(slot.state, SlotState::Running) {
            return None;
        }
        let (status, output, structured, error, message) = match result.outcome {
            Ok(output) => (
                ToolStatus::Success,
                Some(output.text.clone()),
                output.structured,
                None,
                output.text,
            ),
            Err(error) => {
                let message = text::tool_error_message(
                    ToolStatus::Error,
                    &error,
                    "The tool failed. Fix the arguments if they caused it, try another tool, or \
                     tell the user what could not be done.",
                );
                (ToolStatus::Error, None, None, Some(error), message)
            }
        };
        let record = ToolExecutionRecord {
            call_id: slot.call.id.clone(),
            iteration,
            tool: slot.call.name.clone(),
            arguments: slot.arguments.clone(),
            started_at: result.started_at,
            duration_ms: result.duration_ms,
            status,
            result: output,
            structured_result: structured,
            error: error.clone(),
        };
        let event = EventKind::ToolExecuted {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            status,
            duration_ms: record.duration_ms,
            result: record.result.as_deref().map(|text| bound(text, max_chars)),
            error,
        };
        slot.state = SlotState::Resolved {
            record: Box::new(record),
            message,
        };
        self.tools_used += 1;
        self.emit(event);
        (self.batch.running() == 0).then(|| self.finish_batch())
    }

    /// Ends the run at this safe point because the user asked to stop.
    pub fn cancel(&mut self) -> Step {
        if self.phase == Phase::Finished {
            return self.unexpected("a cancellation");
        }
        let mut answer = String::from("The run was cancelled before it finished.");
        if !self.records.is_empty() {
            answer.push_str(" Before it stopped, I had made these tool calls:\n");
            answer.push_str(&records_digest(&self.records));
        }
        let answer = self.emit_answer(answer);
        self.finish(RunStatus::Cancelled, Some(answer), None)
    }

    /// Ends the run with an error (the LLM failed, or the driver could not go on).
    pub fn fail(&mut self, code: &str, message: String) -> Step {
        self.emit(EventKind::Error {
            code: code.to_string(),
            message: message.clone(),
        });
        let failure = RunFailure {
            code: code.to_string(),
            message,
        };
        self.finish(RunStatus::Failed, None, Some(failure))
    }

    fn unexpected(&mut self, what: &str) -> Step {
        if let Some(outcome) = &self.outcome {
            return Step::Finished(Box::new(outcome.clone()));
        }
        let message = format!("internal error: the run received {what} it was not waiting for");
        self.fail("internal_error", message)
    }

    fn next_iteration(&mut self) -> Step {
        if self.iteration >= self.input.max_iterations {
            return self.force_finalize(FinalizeReason::MaxIterations);
        }
        self.iteration += 1;
        self.phase = Phase::AwaitingStep;
        self.emit(EventKind::Thinking {
            iteration: self.iteration,
        });
        Step::CallModel(self.request(ToolChoice::Auto, None))
    }

    fn force_finalize(&mut self, reason: FinalizeReason) -> Step {
        self.phase = Phase::AwaitingFinalize(reason);
        self.finalize_reason = Some(reason);
        self.emit(EventKind::ForcedFinalize { reason });
        Step::CallModel(self.request(ToolChoice::None, Some(reason)))
    }

    fn on_step_reply(&mut self, reply: ModelReply) -> Step {
        if !reply.tool_calls.is_empty() {
            return self.begin_batch(reply.text().map(str::to_string), reply.tool_calls);
        }
        match reply.text() {
            Some(text) => {
                let answer = self.emit_answer(text.to_string());
                self.finish(RunStatus::Completed, Some(answer), None)
            }
            None => self.force_finalize(FinalizeReason::DegenerateResponse),
        }
    }

    /// Checks every call of a reply (name, withdrawal, JSON, schema, repetition) and hands the
    /// ones that pass to the driver.
    fn begin_batch(&mut self, text: Option<String>, calls: Vec<ToolCall>) -> Step {
        self.phase = Phase::AwaitingTools;
        self.batch = Batch::default();
        let mut issued = Vec::with_capacity(calls.len());
        for call in calls {
            let slot = self.check_call(call);
            issued.push(slot.call.clone());
            self.batch.slots.push(slot);
        }
        self.turn
            .push(ChatMessage::assistant_tool_calls(text, issued));
        if self.batch.running() == 0 {
            return self.finish_batch();
        }
        Step::CallTools(std::mem::take(&mut self.batch.invocations))
    }

    fn check_call(&mut self, call: ToolCall) -> Slot {
        let iteration = self.iteration;
        let call_id = self.unique_call_id(&call.id);
        let catalog = self.catalog.clone();
        let entry = catalog.resolve(&call.name);
        let tool = entry.map_or_else(|| call.name.clone(), |entry| entry.name().to_string());
        let parsed = parse_arguments(&call.arguments);
        let arguments = parsed
            .clone()
            .unwrap_or_else(|_| Value::String(call.arguments.clone()));
        let call = ToolCall {
            id: call_id,
            name: tool.clone(),
            arguments: call.arguments,
        };
        self.emit(EventKind::ToolSelected {
            iteration,
            call_id: call.id.clone(),
            tool: tool.clone(),
            arguments: arguments.clone(),
        });

        let Some(entry) = entry else {
            let available: Vec<&str> = self
                .offered_entries()
                .map(|entry| entry.provider_name.as_str())
                .collect();
            let error = format!(
                "unknown tool '{tool}'. Available tools: {}",
                if available.is_empty() {
                    "none".to_string()
                } else {
                    available.join(", ")
                }
            );
            return self.refuse(
                call,
                arguments,
                ToolStatus::Error,
                error,
                "Call one of the available tools, with its exact name.",
            );
        };
        if self.withdrawn.contains(&tool) {
            let error = format!(
                "tool '{tool}' was withdrawn from this run after {} failures in a row",
                self.settings.tool_failure_limit
            );
            return self.refuse(
                call,
                arguments,
                ToolStatus::Blocked,
                error,
                "Use another tool, or answer with what you have.",
            );
        }

        let key = format!(
            "{tool}\n{}",
            parsed
                .as_ref()
                .map_or_else(|_| call.arguments.clone(), canonical_json)
        );
        if let Some(earlier) = self.seen_calls.get(&key).cloned() {
            return self.duplicate(call, arguments, &earlier);
        }
        self.seen_calls.insert(key, call.id.clone());

        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(problem) => {
                let hint = format!(
                    "Call {} again with a JSON object that matches its schema.",
                    entry.provider_name
                );
                return self.refuse(call, arguments, ToolStatus::Error, problem, &hint);
            }
        };
        if let Err(problems) = entry.validate(&parsed) {
            let error = format!("the arguments do not match the schema of {tool}: {problems}");
            let hint = format!("Fix the arguments and call {} again.", entry.provider_name);
            return self.refuse(call, arguments, ToolStatus::Error, error, &hint);
        }
        let timeout = entry.timeout(&self.settings);
        self.batch.invocations.push(ToolInvocation {
            call_id: call.id.clone(),
            tool,
            arguments: parsed,
            timeout,
        });
        Slot {
            call,
            arguments,
            state: SlotState::Running,
        }
    }

    fn refuse(
        &mut self,
        call: ToolCall,
        arguments: Value,
        status: ToolStatus,
        error: String,
        hint: &str,
    ) -> Slot {
        let message = text::tool_error_message(status, &error, hint);
        let record = refused_record(&call, &arguments, self.iteration, status, error.clone());
        self.emit(EventKind::ToolExecuted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status,
            duration_ms: 0,
            result: None,
            error: Some(error),
        });
        Slot {
            call,
            arguments,
            state: SlotState::Resolved {
                record: Box::new(record),
                message,
            },
        }
    }

    fn duplicate(&mut self, call: ToolCall, arguments: Value, earlier_id: &str) -> Slot {
        self.duplicates += 1;
        self.emit(EventKind::DuplicateDetected {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            arguments: arguments.clone(),
        });
        let error = format!("duplicate of {earlier_id}: not executed again");
        self.emit(EventKind::ToolExecuted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status: ToolStatus::Skipped,
            duration_ms: 0,
            result: None,
            error: Some(error.clone()),
        });
        let record = refused_record(
            &call,
            &arguments,
            self.iteration,
            ToolStatus::Skipped,
            error,
        );
        let state = match self
            .batch
            .slots
            .iter()
            .position(|slot| slot.call.id == earlier_id)
        {
            Some(index) => SlotState::SameAs { index },
            None => {
                let earlier = self
                    .record_by_call
                    .get(earlier_id)
                    .map(|&i| &self.records[i]);
                let message = text::duplicate_message(
                    earlier_id,
                    earlier.map(|record| (record.status, record_text(record))),
                    self.settings.tool_output_max_chars,
                );
                SlotState::Resolved {
                    record: Box::new(record),
                    message,
                }
            }
        };
        Slot {
            call,
            arguments,
            state,
        }
    }

    /// Appends the batch's tool messages in the order the model issued the calls, updates the
    /// failure budgets, and decides whether the loop goes on.
    fn finish_batch(&mut self) -> Step {
        let max_chars = self.settings.tool_output_max_chars;
        let slots = std::mem::take(&mut self.batch.slots);
        let mut resolved: Vec<(ToolCall, ToolExecutionRecord, String)> =
            Vec::with_capacity(slots.len());
        for slot in slots {
            let (record, message) = match slot.state {
                SlotState::Resolved { record, message } => (*record, message),
                SlotState::SameAs { index } => {
                    let earlier = resolved.get(index).map(|(call, record, _)| {
                        (
                            call.id.clone(),
                            record.status,
                            record_text(record).to_string(),
                        )
                    });
                    let (earlier_id, earlier) = match &earlier {
                        Some((id, status, text)) => (id.as_str(), Some((*status, text.as_str()))),
                        None => ("an earlier call", None),
                    };
                    let message = text::duplicate_message(earlier_id, earlier, max_chars);
                    let error = format!("duplicate of {earlier_id}: not executed again");
                    let record = refused_record(
                        &slot.call,
                        &slot.arguments,
                        self.iteration,
                        ToolStatus::Skipped,
                        error,
                    );
                    (record, message)
                }
                SlotState::Running => {
                    // Cannot happen: a batch is finished only when nothing runs.
                    let error = "the call did not report a result".to_string();
                    let message =
                        text::tool_error_message(ToolStatus::Error, &error, "Try the call again.");
                    let record = refused_record(
                        &slot.call,
                        &slot.arguments,
                        self.iteration,
                        ToolStatus::Error,
                        error,
                    );
                    (record, message)
                }
            };
            resolved.push((slot.call, record, message));
        }
        for (call, record, message) in resolved {
            self.count_failure(&record);
            self.turn.push(ChatMessage::tool_result(call.id, message));
            self.record_by_call
                .insert(record.call_id.clone(), self.records.len());
            self.records.push(record);
        }
        if self.duplicates >= 2 {
            self.force_finalize(FinalizeReason::DuplicateCalls)
        } else if self.consecutive_failures >= self.settings.max_consecutive_failures {
            self.force_finalize(FinalizeReason::ConsecutiveFailures)
        } else {
            self.next_iteration()
        }
    }

    fn count_failure(&mut self, record: &ToolExecutionRecord) {
        let known = self.catalog.get(&record.tool).is_some();
        match record.status {
            ToolStatus::Success => {
                self.consecutive_failures = 0;
                self.failure_streaks.remove(&record.tool);
            }
            ToolStatus::Error => {
                self.consecutive_failures += 1;
                if known {
                    let streak = self.failure_streaks.entry(record.tool.clone()).or_default();
                    *streak += 1;
                    if *streak >= self.settings.tool_failure_limit {
                        self.withdrawn.insert(record.tool.clone());
                    }
                }
            }
            ToolStatus::Blocked | ToolStatus::Skipped => {}
        }
    }

    fn unique_call_id(&mut self, proposed: &str) -> String {
        let mut id = if proposed.is_empty() {
            format!("call_{}", self.call_ids.len() + 1)
        } else {
            proposed.to_string()
        };
        let mut n = 2;
        while self.call_ids.contains(&id) {
            id = format!("{proposed}_{n}");
            n += 1;
        }
        self.call_ids.insert(id.clone());
        id
    }

    /// Emits the whole answer as one `final_response` chunk and hands it back.
    fn emit_answer(&mut self, answer: String) -> String {
        self.emit(EventKind::FinalResponse {
            delta: answer.clone(),
        });
        answer
    }

    fn finish(
        &mut self,
        status: RunStatus,
        answer: Option<String>,
        failure: Option<RunFailure>,
    ) -> Step {
        self.phase = Phase::Finished;
        let message_id = answer.as_ref().map(|answer| {
            self.turn.push(ChatMessage::assistant(answer.clone()));
            Uuid::now_v7()
        });
        self.emit(EventKind::Done {
            status,
            iterations: self.iteration,
            tools_used: self.tools_used,
            message_id,
            usage: self.usage,
            should_refresh: false,
        });
        let outcome = RunOutcome {
            run_id: self.input.run_id,
            session_id: self.input.session_id,
            status,
            answer,
            failure,
            finalize_reason: self.finalize_reason,
            iterations: self.iteration,
            tools_used: self.tools_used,
            records: self.records.clone(),
            messages: self.turn.clone(),
            usage: self.usage,
            message_id,
            should_refresh: false,
        };
        self.outcome = Some(outcome.clone());
        Step::Finished(Box::new(outcome))
    }

    fn emit(&mut self, event: EventKind) {
        self.outbox.push(event);
    }

    fn request(&self, tool_choice: ToolChoice, finalize: Option<FinalizeReason>) -> ModelRequest {
        let purpose = if finalize.is_some() {
            CallPurpose::Finalize
        } else {
            CallPurpose::Step
        };
        view::build_request(self, tool_choice, purpose, finalize)
    }

    fn offered_entries(&self) -> impl Iterator<Item = &crate::catalog::CatalogEntry> {
        self.catalog
            .entries()
            .iter()
            .filter(|entry| !self.withdrawn.contains(entry.name()))
    }
}

/// The text a record contributes when a later call repeats it.
fn record_text(record: &ToolExecutionRecord) -> &str {
    match record.status {
        ToolStatus::Success => record.result.as_deref().unwrap_or_default(),
        _ => record.error.as_deref().unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests;
