//! The end of a batch: its tool messages appended in the order the model issued the calls,
//! its records kept, the failure budgets updated, and the loop's next step decided.

use agentloop_protocol::{
    ChatMessage, FinalizeReason, MessageKind, RunStatus, ToolCall, ToolExecutionRecord, ToolStatus,
};
use serde_json::Value;

use super::{
    RunMachine, Step,
    batch::{Batch, SlotState, refused_record},
    text,
};

impl RunMachine {
    /// Appends the batch's tool messages in the order the model issued the calls, updates the
    /// failure budgets, and decides whether the loop goes on.
    pub(super) fn finish_batch(&mut self) -> Step {
        let batch = self.state.phase.take_batch().unwrap_or_default();
        if let Some(answer) = self.resolve_batch(batch) {
            if self.typed.is_some() {
                // Its result is the answer, to be given as the run's value.
                return self.on_typed_step_text(answer);
            }
            // A finalize tool answered: no further LLM call.
            let answer = self.emit_answer(answer);
            return self.finish(RunStatus::Completed, Some(answer), None);
        }
        if self.state.duplicates >= 2 {
            self.force_finalize(FinalizeReason::DuplicateCalls)
        } else if self.state.consecutive_failures >= self.settings.max_consecutive_failures {
            self.force_finalize(FinalizeReason::ConsecutiveFailures)
        } else {
            self.next_iteration()
        }
    }

    /// Ends a paused batch that will never run (the run is cancelled): its waiting calls are
    /// skipped, so the conversation never holds a tool call without its result.
    pub(super) fn abandon_batch(&mut self) {
        let Some(mut batch) = self.state.phase.take_batch() else {
            return;
        };
        for slot in &mut batch.slots {
            if !matches!(
                slot.state,
                SlotState::Held { .. } | SlotState::Asking { .. }
            ) {
                continue;
            }
            let error = "the run was cancelled before this call ran".to_string();
            slot.state = self.refusal(
                &slot.call,
                &slot.arguments,
                ToolStatus::Skipped,
                error,
                "Not run.",
            );
        }
        self.resolve_batch(batch);
    }

    /// Appends the batch's results in the order the model issued the calls, then its notes,
    /// keeps the records and updates the failure budgets. Returns the answer of a finalize
    /// tool that succeeded, if any.
    fn resolve_batch(&mut self, batch: Batch) -> Option<String> {
        let max_chars = self.settings.tool_output_max_chars;
        let slots = batch.slots;
        let mut resolved: Vec<(ToolCall, ToolExecutionRecord, String, bool, Vec<_>)> =
            Vec::with_capacity(slots.len());
        let mut notes = Vec::new();
        let mut final_answer = None;
        for slot in slots {
            let (record, message) = match slot.state {
                SlotState::Resolved {
                    record, message, ..
                } => (*record, message),
                SlotState::SameAs { index } => {
                    let earlier = resolved.get(index).map(|(call, record, ..)| {
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
                        self.state.now,
                        &slot.call,
                        &slot.arguments,
                        self.state.iteration,
                        ToolStatus::Skipped,
                        error,
                    );
                    (record, message)
                }
                SlotState::Running { .. } | SlotState::Held { .. } | SlotState::Asking { .. } => {
                    // Cannot happen: a batch is finished only when nothing runs or waits.
                    let error = "the call did not report a result".to_string();
                    let message =
                        text::tool_error_message(ToolStatus::Error, &error, "Try the call again.");
                    let record = refused_record(
                        self.state.now,
                        &slot.call,
                        &slot.arguments,
                        self.state.iteration,
                        ToolStatus::Error,
                        error,
                    );
                    (record, message)
                }
            };
            notes.extend(
                slot.side_effects
                    .iter()
                    .filter_map(text::side_effect_message),
            );
            if final_answer.is_none() {
                final_answer = slot.final_answer.clone();
            }
            resolved.push((slot.call, record, message, slot.recorded, slot.images));
        }
        for (call, record, message, recorded, images) in resolved {
            self.count_failure(&record);
            if !recorded {
                self.new_records.push(record.clone());
            }
            let message = ChatMessage::tool_result(call.id, message).with_attachments(images);
            self.push_message(MessageKind::ToolResult, message, Value::Null);
            self.record_by_call
                .insert(record.call_id.clone(), self.state.records.len());
            self.state.records.push(record);
        }
        // After all results: providers want a turn's results right after its tool calls.
        for note in notes {
            self.push_message(MessageKind::Note, ChatMessage::system(note), Value::Null);
        }
        final_answer
    }

    fn count_failure(&mut self, record: &ToolExecutionRecord) {
        let known = self.catalog.get(&record.tool).is_some();
        match record.status {
            ToolStatus::Success => {
                self.state.consecutive_failures = 0;
                self.state.failure_streaks.remove(&record.tool);
            }
            ToolStatus::Error => {
                self.state.consecutive_failures += 1;
                if known {
                    let streak = self
                        .state
                        .failure_streaks
                        .entry(record.tool.clone())
                        .or_default();
                    *streak += 1;
                    if *streak >= self.settings.tool_failure_limit {
                        self.state.withdrawn.insert(record.tool.clone());
                    }
                }
            }
            ToolStatus::Blocked | ToolStatus::Skipped => {}
        }
    }
}

/// The text a record contributes when a later call repeats it.
pub(super) fn record_text(record: &ToolExecutionRecord) -> &str {
    match record.status {
        ToolStatus::Success => record.result.as_deref().unwrap_or_default(),
        _ => record.error.as_deref().unwrap_or_default(),
    }
}
