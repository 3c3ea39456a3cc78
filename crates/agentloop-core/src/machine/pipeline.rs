//! The tool pipeline of one reply: every call is checked before anything runs (name,
//! withdrawal, repetition, JSON, schema), the ones that pass go to the driver, and the batch is
//! resolved in the order the model issued the calls.

use std::fmt::Display;

use agentloop_protocol::{
    ChatMessage, EventKind, InputKind, MessageKind, PendingCall, ToolCall, ToolExecutionRecord,
    ToolStatus,
};
use serde_json::Value;

use super::{
    InputAnswer, InvalidAnswer, Phase, RunMachine, Step, Withheld,
    batch::{
        ArgumentsError, Batch, CallRefusal, Slot, SlotState, ToolInvocation, ToolOutcome,
        ToolResult, parse_arguments, refused_record,
    },
    builtins::{AskUserArgs, Builtin},
    resolution::record_text,
    text::{self, bound},
};
use crate::{canonical::canonical_json, catalog::CatalogEntry, policy::RunPolicy};

impl RunMachine {
    /// Feeds the result of one tool call; returns the next step once every call of the batch
    /// has ended.
    pub(super) fn on_tool_result(&mut self, mut result: ToolResult) -> Option<Step> {
        if !matches!(self.state.phase, Phase::AwaitingTools { .. }) {
            return Some(self.unexpected("a tool result"));
        }
        let max_chars = self.settings.tool_output_max_chars;
        let iteration = self.state.iteration;
        let slot = self.state.phase.batch_mut();
        let Some(slot) = slot.and_then(|batch| batch.slot_mut(&result.call_id)) else {
            tracing::warn!(call_id = %result.call_id, "result for a call that is not running");
            return None;
        };
        if !matches!(slot.state, SlotState::Running { .. }) {
            return None;
        }
        let ran = !matches!(
            result.outcome,
            ToolOutcome::Skipped(_) | ToolOutcome::Refused(_)
        );
        if let ToolOutcome::Refused(_) = &result.outcome {
            // It did not run: asking for it again is not a repeat.
            let call_id = slot.call.id.clone();
            self.state.seen_calls.retain(|_, first| *first != call_id);
        }
        let slot = self.state.phase.batch_mut()?.slot_mut(&result.call_id)?;
        if let ToolOutcome::Success(output) = &result.outcome {
            self.state.documents.extend(text::documents(output));
            if let Some(usage) = output.usage {
                self.state.usage.add(usage);
            }
            if let Some(cost) = output.cost_usd {
                self.state.usage.add_cost(cost);
            }
            let finalize = self
                .catalog
                .get(&slot.call.name)
                .is_some_and(|entry| entry.settings.finalize);
            if finalize {
                slot.final_answer = Some(text::finalize_answer(output));
            }
        }
        let tool = &slot.call.name;
        let failed = |error: String| {
            let message = text::tool_error_message(
                ToolStatus::Error,
                &error,
                "The tool failed. Fix the arguments if they caused it, try another tool, or tell \
                 the user what could not be done.",
            );
            (ToolStatus::Error, None, None, Some(error), message)
        };
        // What the tool says it cost, or what a sub-agent's LLM calls cost.
        let cost_usd = match &result.outcome {
            ToolOutcome::Success(output) => output
                .cost_usd
                .or_else(|| output.usage.and_then(|usage| usage.cost_usd)),
            _ => None,
        };
        if let ToolOutcome::Success(output) = &mut result.outcome {
            slot.images = std::mem::take(&mut output.images);
        }
        let (status, output, structured, error, message) = match result.outcome {
            ToolOutcome::Success(output) => (
                ToolStatus::Success,
                Some(output.text.clone()),
                output.structured,
                None,
                output.text,
            ),
            ToolOutcome::Failed(error) => failed(error.to_string()),
            ToolOutcome::TimedOut(limit) => failed(text::tool_timed_out(tool, limit)),
            ToolOutcome::Crashed(why) => failed(text::tool_crashed(&why)),
            ToolOutcome::Unavailable => failed(text::tool_unavailable(tool)),
            ToolOutcome::Skipped(reason) => {
                let message = text::tool_error_message(
                    ToolStatus::Skipped,
                    &reason,
                    "The call was not run. Do not repeat it; go on without it or tell the user.",
                );
                (ToolStatus::Skipped, None, None, Some(reason), message)
            }
            ToolOutcome::Refused(refusal) => {
                let message =
                    text::tool_error_message(refusal.status, &refusal.error, &refusal.hint);
                (refusal.status, None, None, Some(refusal.error), message)
            }
        };
        if let Some(arguments) = result.arguments {
            slot.arguments = arguments;
        }
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
            cost_usd,
            logs: result.logs,
        };
        let event = EventKind::ToolExecuted {
            call_id: record.call_id.clone(),
            tool: record.tool.clone(),
            status,
            duration_ms: record.duration_ms,
            result: record.result.as_deref().map(|text| bound(text, max_chars)),
            error,
        };
        slot.recorded = true;
        let call_id = record.call_id.clone();
        let tool = record.tool.clone();
        self.new_records.push(record.clone());
        slot.state = SlotState::resolved(record, message);
        slot.side_effects = result.side_effects.clone();
        if ran {
            self.count_call(true);
        }
        self.emit(event);
        for effect in result.side_effects {
            self.state.should_refresh |= effect.refresh;
            if let Some(note) = effect.note {
                let note = if effect.failed {
                    text::side_effect_error(&note)
                } else {
                    note
                };
                self.emit(EventKind::SideEffect {
                    call_id: call_id.clone(),
                    tool: tool.clone(),
                    note,
                });
            }
        }
        let running = self.state.phase.batch().map_or(0, Batch::running);
        (running == 0).then(|| self.finish_batch())
    }

    /// Checks every call of a reply (name, withdrawal, JSON, schema, repetition) and hands the
    /// ones that pass to the driver.
    pub(super) fn begin_batch(&mut self, text: Option<String>, calls: Vec<ToolCall>) -> Step {
        self.state.phase = Phase::AwaitingTools {
            batch: Batch::default(),
        };
        let mut issued = Vec::with_capacity(calls.len());
        for call in calls {
            // Checked against the calls before it in the batch (repetitions); the phase stays.
            let slot = self.check_call(call);
            issued.push(slot.call.clone());
            if let Some(batch) = self.state.phase.batch_mut() {
                batch.slots.push(slot);
            }
        }
        let message = ChatMessage::assistant_tool_calls(text, issued);
        self.push_message(MessageKind::ToolCall, message, Value::Null);
        let calls = self.pending_approvals();
        if calls.is_empty() {
            self.continue_batch()
        } else {
            // Nothing of the batch runs before a human decided.
            self.pause(InputKind::Approval, None, calls)
        }
    }

    fn check_call(&mut self, call: ToolCall) -> Slot {
        let iteration = self.state.iteration;
        let call_id = self.unique_call_id(&call.id);
        let catalog = self.catalog.clone();
        let builtin = Builtin::find(&call.name, &self.settings);
        let entry = match builtin {
            Some(_) => None,
            None => catalog.resolve(&call.name),
        };
        let tool = entry.map_or_else(|| call.name.clone(), |entry| entry.name().to_string());
        let parsed = parse_arguments(&call.arguments);
        let arguments = match &parsed {
            Ok(parsed) => parsed.clone(),
            Err(_) => Value::String(call.arguments.clone()),
        };
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

        if let Some(builtin) = builtin {
            return self.check_builtin(builtin, call, arguments, parsed);
        }
        let entry = match entry.map(|entry| (entry, self.withheld(entry))) {
            Some((entry, None)) => entry,
            not_offered => {
                let why = not_offered.and_then(|(_, why)| why);
                let refusal = self.not_offered(&tool, why);
                return self.refuse_with(call, arguments, refusal);
            }
        };

        let key = call_key(
            &tool,
            &parsed
                .as_ref()
                .map_or_else(|_| call.arguments.clone(), canonical_json),
        );
        if let Some(earlier) = self.state.seen_calls.get(&key).cloned() {
            return self.duplicate(call, arguments, &earlier);
        }
        // Repeating a call that failed on its arguments is a repeat too; repeating one that did
        // not run (the rate limit, a rewritten call refused) is a fair retry (`on_tool_result`
        // forgets its key).
        self.state.seen_calls.insert(key, call.id.clone());

        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(problem) => {
                let hint = format!(
                    "Call {} again with a JSON object that matches its schema.",
                    entry.provider_name
                );
                let error = problem.to_string();
                return self.refuse(call, arguments, ToolStatus::Error, error, &hint);
            }
        };
        if let Some(refusal) = schema_refusal(entry, &parsed) {
            return self.refuse_with(call, arguments, refusal);
        }
        let invocation = ToolInvocation {
            call_id: call.id.clone(),
            tool,
            arguments: parsed,
            timeout: entry.timeout(&self.settings),
        };
        Slot {
            call,
            arguments,
            state: SlotState::Held {
                invocation,
                // A client tool's call waits for the client's result like an approval.
                needs_approval: entry.settings.needs_approval || entry.client,
            },
            recorded: false,
            side_effects: Vec::new(),
            final_answer: None,
            images: Vec::new(),
        }
    }

    /// The refusal of a call of a catalog tool the run does not offer now, `why` (`None`: no
    /// tool of that name).
    fn not_offered(&self, tool: &str, why: Option<Withheld>) -> CallRefusal {
        let refusal = |status, error: String, hint: &str| CallRefusal {
            status,
            error,
            hint: hint.to_string(),
        };
        match why {
            // Hidden by a built-in tool of the same name: for the model, there is no such tool.
            None | Some(Withheld::Hidden) => {
                let available: Vec<String> =
                    self.offered_specs().map(|spec| spec.name.clone()).collect();
                let error = format!(
                    "unknown tool '{tool}'. Available tools: {}",
                    if available.is_empty() {
                        "none".to_string()
                    } else {
                        available.join(", ")
                    }
                );
                let hint = "Call one of the available tools, with its exact name.";
                refusal(ToolStatus::Error, error, hint)
            }
            Some(Withheld::Withdrawn) => {
                let error = format!(
                    "tool '{tool}' was withdrawn from this run after {} failures in a row",
                    self.settings.tool_failure_limit
                );
                let hint = "Use another tool, or answer with what you have.";
                refusal(ToolStatus::Blocked, error, hint)
            }
            Some(Withheld::Unclear) => {
                let error = format!(
                    "tool '{tool}' is offered only once the request is clear, and it was not \
                     clarified yet"
                );
                let hint = if self.settings.ask_user {
                    "Ask the user what they mean with ask_user, or answer with what you know."
                } else {
                    "Answer with what you know, or say what the user should make clear."
                };
                refusal(ToolStatus::Blocked, error, hint)
            }
            Some(Withheld::Refused(refusal)) => refusal,
        }
    }

    /// Hands the held calls of the batch (running, or paused until now) to the driver, or
    /// ends the batch when none is left.
    pub(super) fn release_batch(&mut self) -> Step {
        let mut batch = self.state.phase.take_batch().unwrap_or_default();
        let mut invocations = Vec::new();
        for slot in &mut batch.slots {
            if let SlotState::Held { invocation, .. } = &slot.state {
                let invocation = invocation.clone();
                slot.state = SlotState::Running {
                    invocation: invocation.clone(),
                };
                invocations.push(invocation);
            }
        }
        let idle = batch.running() == 0;
        self.state.phase = Phase::AwaitingTools { batch };
        if idle {
            return self.finish_batch();
        }
        Step::CallTools(invocations)
    }

    /// The calls of the batch that wait for a human's approval.
    pub(super) fn pending_approvals(&self) -> Vec<PendingCall> {
        self.state
            .phase
            .batch()
            .into_iter()
            .flat_map(|batch| &batch.slots)
            .filter(|slot| {
                matches!(
                    slot.state,
                    SlotState::Held {
                        needs_approval: true,
                        ..
                    }
                )
            })
            .map(|slot| PendingCall {
                call_id: slot.call.id.clone(),
                tool: slot.call.name.clone(),
                arguments: slot.arguments.clone(),
                client: self.is_client_call(slot),
            })
            .collect()
    }

    /// Applies a human's decision on the calls waiting for approval: the approved ones run
    /// (with the rest of their batch), the denied ones become tool errors the model reads, and
    /// the calls of client tools are answered with the client's `results`.
    pub(super) fn decide(&mut self, answer: &InputAnswer) -> Result<Step, InvalidAnswer> {
        let (approve, deny, results) = (&answer.approve, &answer.deny, &answer.results);
        let pending = self.pending_approvals();
        let waiting: Vec<String> = pending.iter().map(|call| call.call_id.clone()).collect();
        for id in approve.iter().chain(deny).chain(results.keys()) {
            let Some(call) = pending.iter().find(|call| call.call_id == *id) else {
                return Err(InvalidAnswer::NotWaitingForApproval {
                    call_id: id.clone(),
                    waiting,
                });
            };
            let decisions = [
                approve.contains(id),
                deny.contains(id),
                results.contains_key(id),
            ];
            if decisions.into_iter().filter(|made| *made).count() > 1 {
                return Err(InvalidAnswer::ApprovedAndDenied(id.clone()));
            }
            if call.client && approve.contains(id) {
                return Err(InvalidAnswer::ResultExpected(id.clone()));
            }
            if !call.client && results.contains_key(id) {
                return Err(InvalidAnswer::NotAClientCall(id.clone()));
            }
        }
        let undecided: Vec<String> = waiting
            .iter()
            .filter(|id| !approve.contains(id) && !deny.contains(id) && !results.contains_key(*id))
            .cloned()
            .collect();
        if !undecided.is_empty() {
            return Err(InvalidAnswer::Undecided(undecided));
        }
        let mut batch = self.state.phase.take_batch().unwrap_or_default();
        for slot in &mut batch.slots {
            if let Some(result) = results.get(&slot.call.id) {
                let structured = serde_json::from_str(result).ok();
                slot.state = self.answered_here(
                    &slot.call,
                    &slot.arguments,
                    result.clone(),
                    structured,
                    result.clone(),
                );
                continue;
            }
            if !deny.contains(&slot.call.id) {
                continue;
            }
            let error = format!("the user denied the call of {}", slot.call.name);
            slot.state = self.refusal(&slot.call, &slot.arguments, ToolStatus::Blocked, error, "The user did not allow this call. Do not repeat it; tell the user what was not done, or ask what they want instead.");
        }
        self.state.phase.put_batch(batch);
        Ok(self.continue_batch())
    }

    /// Whether `slot` is a call of one of the run's client tools.
    fn is_client_call(&self, slot: &Slot) -> bool {
        self.catalog
            .get(&slot.call.name)
            .is_some_and(|entry| entry.client)
    }

    /// Checks a call of a built-in tool and answers it: `write_plan` at once, `ask_user` when
    /// the user answered.
    fn check_builtin(
        &mut self,
        builtin: Builtin,
        call: ToolCall,
        arguments: Value,
        parsed: Result<Value, ArgumentsError>,
    ) -> Slot {
        let key = call_key(
            &call.name,
            &parsed
                .as_ref()
                .map_or_else(|_| call.arguments.clone(), canonical_json),
        );
        if let Some(earlier) = self.state.seen_calls.get(&key).cloned() {
            return self.duplicate(call, arguments, &earlier);
        }
        self.state.seen_calls.insert(key, call.id.clone());
        let hint = format!("Fix the arguments and call {} again.", builtin.name());
        let unfit = |problem: &dyn Display| {
            format!("the arguments do not fit {}: {problem}", builtin.name())
        };
        let parsed = match parsed {
            Ok(parsed) => match builtin.validate(&parsed) {
                Ok(()) => parsed,
                Err(problem) => {
                    let error = unfit(&problem);
                    return self.refuse(call, arguments, ToolStatus::Error, error, &hint);
                }
            },
            Err(problem) => {
                let error = unfit(&problem);
                return self.refuse(call, arguments, ToolStatus::Error, error, &hint);
            }
        };
        let state = match builtin {
            Builtin::AskUser => SlotState::Asking {
                question: serde_json::from_value::<AskUserArgs>(parsed)
                    .map(|args| args.question)
                    .unwrap_or_default(),
            },
            Builtin::WritePlan => match self.write_plan(&parsed) {
                Ok(text) => {
                    let plan = self
                        .state
                        .guidance
                        .plan
                        .as_ref()
                        .and_then(|plan| serde_json::to_value(plan).ok());
                    self.answered_here(&call, &arguments, text.clone(), plan, text)
                }
                Err(problem) => {
                    let error = format!("the plan was not changed: {problem}");
                    return self.refuse(call, arguments, ToolStatus::Error, error, &hint);
                }
            },
        };
        Slot {
            call,
            arguments,
            state,
            recorded: false,
            side_effects: Vec::new(),
            final_answer: None,
            images: Vec::new(),
        }
    }

    /// A call the loop answered itself (a built-in tool): a success with `result`, recorded and
    /// reported now; `message` is what the model reads.
    pub(super) fn answered_here(
        &mut self,
        call: &ToolCall,
        arguments: &Value,
        result: String,
        structured: Option<Value>,
        message: String,
    ) -> SlotState {
        self.count_call(false);
        let mut record = refused_record(
            self.state.now,
            call,
            arguments,
            self.state.iteration,
            ToolStatus::Success,
            String::new(),
        );
        record.error = None;
        record.result = Some(result.clone());
        record.structured_result = structured;
        self.emit(EventKind::ToolExecuted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status: ToolStatus::Success,
            duration_ms: 0,
            result: Some(result),
            error: None,
        });
        SlotState::resolved(record, message)
    }

    fn refuse_with(&mut self, call: ToolCall, arguments: Value, refusal: CallRefusal) -> Slot {
        let CallRefusal {
            status,
            error,
            hint,
        } = refusal;
        self.refuse(call, arguments, status, error, &hint)
    }

    fn refuse(
        &mut self,
        call: ToolCall,
        arguments: Value,
        status: ToolStatus,
        error: String,
        hint: &str,
    ) -> Slot {
        let state = self.refusal(&call, &arguments, status, error, hint);
        Slot {
            call,
            arguments,
            state,
            recorded: false,
            side_effects: Vec::new(),
            final_answer: None,
            images: Vec::new(),
        }
    }

    /// A call that ends without running: its record, the tool message the model reads, and
    /// its `tool_executed` event.
    pub(super) fn refusal(
        &mut self,
        call: &ToolCall,
        arguments: &Value,
        status: ToolStatus,
        error: String,
        hint: &str,
    ) -> SlotState {
        let message = text::tool_error_message(status, &error, hint);
        let record = refused_record(
            self.state.now,
            call,
            arguments,
            self.state.iteration,
            status,
            error.clone(),
        );
        self.refused_here.push(record.clone());
        self.emit(EventKind::ToolExecuted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            status,
            duration_ms: 0,
            result: None,
            error: Some(error),
        });
        SlotState::resolved(record, message)
    }

    fn duplicate(&mut self, call: ToolCall, arguments: Value, earlier_id: &str) -> Slot {
        self.state.duplicates += 1;
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
            self.state.now,
            &call,
            &arguments,
            self.state.iteration,
            ToolStatus::Skipped,
            error,
        );
        self.refused_here.push(record.clone());
        let in_batch = self.state.phase.batch().and_then(|batch| {
            batch
                .slots
                .iter()
                .position(|slot| slot.call.id == earlier_id)
        });
        let state = match in_batch {
            Some(index) => SlotState::SameAs { index },
            None => {
                let earlier = self
                    .record_by_call
                    .get(earlier_id)
                    .map(|&i| &self.state.records[i]);
                let message = text::duplicate_message(
                    earlier_id,
                    earlier.map(|record| (record.status, record_text(record))),
                    self.settings.tool_output_max_chars,
                );
                SlotState::resolved(record, message)
            }
        };
        Slot {
            call,
            arguments,
            state,
            recorded: false,
            side_effects: Vec::new(),
            final_answer: None,
            images: Vec::new(),
        }
    }

    fn unique_call_id(&mut self, proposed: &str) -> String {
        let mut id = if proposed.is_empty() {
            format!("call_{}", self.state.call_ids.len() + 1)
        } else {
            proposed.to_string()
        };
        let mut n = 2;
        while self.state.call_ids.contains(&id) {
            id = format!("{proposed}_{n}");
            n += 1;
        }
        self.state.call_ids.insert(id.clone());
        id
    }
}

/// Why the run's policy does not let `entry`'s tool be called, if it does not.
pub(crate) fn policy_refusal(entry: &CatalogEntry, policy: &RunPolicy) -> Option<CallRefusal> {
    // A client tool acts in the client, not on what the policies guard (`client_tool.rs`).
    if entry.client {
        return None;
    }
    let refusal = policy.refusal(entry)?;
    Some(CallRefusal {
        status: ToolStatus::Blocked,
        error: refusal.error,
        hint: refusal.hint.to_string(),
    })
}

/// Why `arguments` do not fit `entry`'s JSON Schema, if they do not.
pub(crate) fn schema_refusal(entry: &CatalogEntry, arguments: &Value) -> Option<CallRefusal> {
    let problems = entry.validate(arguments).err()?;
    Some(CallRefusal {
        status: ToolStatus::Error,
        error: format!(
            "the arguments do not match the schema of {}: {problems}",
            entry.name()
        ),
        hint: format!("Fix the arguments and call {} again.", entry.provider_name),
    })
}

/// The checks a call passes before it runs (policy, schema), made again on the arguments a
/// `before_call` hook rewrote: a rewritten call that fails them never reaches the tool.
pub fn recheck(entry: &CatalogEntry, policy: &RunPolicy, arguments: &Value) -> Option<CallRefusal> {
    policy_refusal(entry, policy).or_else(|| schema_refusal(entry, arguments))
}

/// What identifies a call for the duplicate check: a digest of the tool and its canonical
/// arguments, short and of fixed size whatever the arguments (the run's state keeps one per
/// call, and is saved with every step).
fn call_key(tool: &str, arguments: &str) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::new()
        .chain_update(tool.as_bytes())
        .chain_update([0u8])
        .chain_update(arguments.as_bytes())
        .finalize();
    use std::fmt::Write as _;
    let mut key = String::with_capacity(32);
    for byte in &digest[..16] {
        let _ = write!(key, "{byte:02x}");
    }
    key
}
