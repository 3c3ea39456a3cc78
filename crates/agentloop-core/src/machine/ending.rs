//! How a run ends: with an answer, cancelled, or failed (also when a step could not be saved).
//! The outcome is kept in the phase (`Phase::Finished`), and what the run reports takes its
//! finalize reason from the phase it ends in.

use agentloop_protocol::{
    ChatMessage, ErrorCode, EventKind, MessageKind, RunStatus, ToolExecutionRecord,
};
use serde_json::json;
use uuid::Uuid;

use super::{
    RunFailure, RunMachine, RunOutcome, RunState, Step, state::Phase, text, text::records_digest,
};

impl RunMachine {
    /// Ends the run at this safe point because the user asked to stop.
    pub(super) fn cancel(&mut self) -> Step {
        if matches!(self.state.phase, Phase::Finished { .. }) {
            return self.unexpected("a cancellation");
        }
        if self.state.phase.is_paused() {
            self.abandon_batch();
        }
        let mut answer = String::from("The run was cancelled before it finished.");
        if !self.state.records.is_empty() {
            answer.push_str(" Before it stopped, I had made these tool calls:\n");
            answer.push_str(&records_digest(&self.state.records));
        }
        let answer = self.emit_answer(answer);
        self.finish(RunStatus::Cancelled, Some(answer), None)
    }

    /// Ends the run with an error (the LLM failed, or the driver could not go on).
    pub(super) fn fail(&mut self, code: ErrorCode, message: String) -> Step {
        let announce = matches!(self.state.phase, Phase::Created);
        self.end_failed(code, message, announce)
    }

    /// Ends the run with an error; `announce`: its `run_started` event did not reach the
    /// clients, and comes first.
    fn end_failed(&mut self, code: ErrorCode, message: String, announce: bool) -> Step {
        if announce {
            self.emit(EventKind::RunStarted {
                session_id: self.state.input.session_id,
            });
        }
        self.emit(EventKind::Error {
            code,
            message: message.clone(),
        });
        let failure = RunFailure { code, message };
        self.finish(RunStatus::Failed, None, Some(failure))
    }

    /// Ends the run failed with `store_unavailable` because its last step could not be saved.
    /// Works in any phase, also after the run ended: an ending that was not saved did not
    /// happen, so its answer (or its pause) is dropped from the run and the failure says
    /// whether the model had answered. `announced` says whether the run's `run_started` event
    /// reached the clients (it is part of the first step).
    pub(super) fn fail_unsaved(&mut self, error: &str, announced: bool) -> Step {
        // The ending is replaced by the failure (`finish`), which keeps its finalize reason.
        let unsaved_end = self
            .state
            .phase
            .outcome()
            .map(|end| (end.answer.is_some(), end.message_id));
        let answered = unsaved_end.is_some_and(|(answered, _)| answered);
        if let Some((_, message_id)) = unsaved_end {
            self.state
                .turn
                .retain(|m| Some(m.id) != message_id && m.kind != MessageKind::Trace);
            self.taken_messages = self.taken_messages.min(self.state.turn.len());
        }
        let message = text::store_lost(error, answered);
        let announce = !announced || matches!(self.state.phase, Phase::Created);
        self.end_failed(ErrorCode::StoreUnavailable, message, announce)
    }

    pub(super) fn unexpected(&mut self, what: &str) -> Step {
        if let Some(outcome) = self.state.finished_outcome() {
            return Step::Finished(Box::new(outcome));
        }
        let message = format!("internal error: the run received {what} it was not waiting for");
        self.fail(ErrorCode::InternalError, message)
    }

    pub(super) fn finish(
        &mut self,
        status: RunStatus,
        answer: Option<String>,
        failure: Option<RunFailure>,
    ) -> Step {
        if !self.state.records.is_empty() || !self.state.guidance.is_empty() {
            let trace = ChatMessage::system(format!(
                "Execution trace of this run:\n{}{}",
                records_digest(&self.state.records),
                self.state.guidance.trace_lines()
            ));
            // What the run spent, with its cost, kept with its trace.
            let mut metadata = json!({
                "execution_trace": trace_records(&self.state.records),
                "usage": self.state.usage,
            });
            if !self.state.documents.is_empty() {
                metadata["documents"] = json!(self.state.documents);
            }
            self.state.guidance.extend_trace(&mut metadata);
            self.push_message(MessageKind::Trace, trace, metadata);
        }
        let metadata = self.answer_metadata();
        let message_id = answer.as_ref().map(|answer| {
            let message = ChatMessage::assistant(answer.clone());
            self.push_message(MessageKind::Dialogue, message, metadata)
        });
        // Messages the run took that no LLM call read stay in the session, after the answer,
        // as the user's next words: taken, never lost.
        self.apply_steering();
        self.emit(EventKind::Done {
            status,
            iterations: self.state.iteration,
            tools_used: self.state.tools_used,
            message_id,
            usage: self.state.usage,
            should_refresh: self.state.should_refresh,
            output: self.state.typed.value.clone(),
        });
        // Taken before the phase changes: the finalize reason comes from the phase.
        let ended = self.outcome_apart(status, answer, failure, message_id);
        let outcome = self.state.with_parts(ended.clone());
        // The phase keeps the outcome without the run's messages and records: they are the
        // state's (`turn`, `records`), and are not copied a second time.
        self.state.phase = Phase::Finished {
            outcome: Box::new(ended),
        };
        Step::Finished(Box::new(outcome))
    }

    pub(super) fn outcome_with(
        &self,
        status: RunStatus,
        answer: Option<String>,
        failure: Option<RunFailure>,
        message_id: Option<Uuid>,
    ) -> RunOutcome {
        self.state
            .with_parts(self.outcome_apart(status, answer, failure, message_id))
    }

    /// The outcome without the run's messages and records.
    fn outcome_apart(
        &self,
        status: RunStatus,
        answer: Option<String>,
        failure: Option<RunFailure>,
        message_id: Option<Uuid>,
    ) -> RunOutcome {
        RunOutcome {
            run_id: self.state.input.run_id,
            session_id: self.state.input.session_id,
            status,
            answer,
            failure,
            finalize_reason: self.state.phase.finalize_reason(),
            plan: self.state.guidance.plan.clone(),
            input_required: None,
            iterations: self.state.iteration,
            tools_used: self.state.tools_used,
            records: Vec::new(),
            messages: Vec::new(),
            usage: self.state.usage,
            message_id,
            should_refresh: self.state.should_refresh,
            output: self.state.typed.value.clone(),
        }
    }
}

impl RunState {
    /// How the run ended, whole (with its messages and records), once it has.
    pub fn finished_outcome(&self) -> Option<RunOutcome> {
        let ended = self.phase.outcome()?;
        Some(self.with_parts(ended.clone()))
    }

    /// `outcome` with the run's messages and records as they stand.
    fn with_parts(&self, outcome: RunOutcome) -> RunOutcome {
        RunOutcome {
            records: self.records.clone(),
            messages: self.turn.clone(),
            ..outcome
        }
    }
}

/// The records as the trace message keeps them: without their outputs, which the run's tool
/// executions hold whole (by `call_id`), so that a large output is not stored again with every
/// trace; `result_bytes` says how long the result was.
fn trace_records(records: &[ToolExecutionRecord]) -> Vec<serde_json::Value> {
    records
        .iter()
        .map(|record| {
            let outline = ToolExecutionRecord {
                call_id: record.call_id.clone(),
                iteration: record.iteration,
                tool: record.tool.clone(),
                arguments: record.arguments.clone(),
                started_at: record.started_at,
                duration_ms: record.duration_ms,
                status: record.status,
                result: None,
                structured_result: None,
                error: record.error.clone(),
                cost_usd: None,
                logs: Vec::new(),
            };
            let mut value = json!(outline);
            if let Some(result) = &record.result {
                value["result_bytes"] = json!(result.len());
            }
            value
        })
        .collect()
}
