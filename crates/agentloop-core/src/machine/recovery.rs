//! Going on from the last saved step after the process that ran the run stopped (a crash, a
//! deploy, a handover). The seam is marked with `run_resumed`; then the step that was under way
//! is taken again, with one rule for the tool calls that may have been running:
//!
//! - a call whose result was saved is never executed again (its slot is resolved);
//! - a call that may have started but whose result was not saved runs again only when its tool
//!   is read-only or idempotent;
//! - otherwise, by default, the model is told that its outcome is unknown (a tool error with
//!   code `outcome_unknown`); with `on_unknown_outcome = "ask"` the run pauses for a human to
//!   approve running it again or to deny it.

use agentloop_protocol::{EventKind, InputKind, ResumeReason, ToolStatus};
use serde_json::json;

use super::{RunMachine, Step, batch::SlotState, state::Phase, text};
use crate::{llm::ToolChoice, settings::UnknownOutcome};

/// What becomes of a call that was running when the process stopped.
enum Cutoff {
    RunAgain,
    TellModel,
    Ask,
}

impl RunMachine {
    /// Goes on from the saved state, in a process other than the one that saved it.
    pub(super) fn recover(&mut self, reason: ResumeReason, instance: String) -> Step {
        if matches!(
            self.state.phase,
            Phase::Created | Phase::AwaitingInput { .. } | Phase::Finished { .. }
        ) {
            return self.unexpected("a resumption");
        }
        self.emit(EventKind::RunResumed { reason, instance });
        match &self.state.phase {
            Phase::AwaitingStep => Step::CallModel(self.request(ToolChoice::Auto, None)),
            Phase::AwaitingFinalize { reason } => {
                let reason = *reason;
                Step::CallModel(self.request(ToolChoice::None, Some(reason)))
            }
            Phase::AwaitingOutput { .. } => Step::CallModel(self.output_request()),
            Phase::AwaitingPlan => self.plan_request(),
            Phase::AwaitingReview => self.review_request(),
            Phase::AwaitingTools { .. } => self.recover_batch(),
            // Checked again: a verdict that was not saved did not happen.
            Phase::Guarding { .. } => Step::CheckGuardrails(self.guard_check()),
            Phase::Created | Phase::AwaitingInput { .. } | Phase::Finished { .. } => {
                self.unexpected("a resumption")
            }
        }
    }

    /// The batch under way: calls that ended keep their result; each call that was running is
    /// run again, reported as of unknown outcome, or held for a human (see the module).
    fn recover_batch(&mut self) -> Step {
        let mut ask = false;
        let mut batch = self.state.phase.take_batch().unwrap_or_default();
        for slot in &mut batch.slots {
            let SlotState::Running { invocation } = &slot.state else {
                continue;
            };
            let invocation = invocation.clone();
            let (call, arguments) = (&slot.call, &slot.arguments);
            let state = match self.cutoff(&invocation.tool) {
                Cutoff::RunAgain => SlotState::Held {
                    invocation,
                    needs_approval: false,
                },
                Cutoff::Ask => {
                    ask = true;
                    SlotState::Held {
                        invocation,
                        needs_approval: true,
                    }
                }
                Cutoff::TellModel => {
                    let error = text::outcome_unknown(&call.name);
                    let state = self.refusal(
                        call,
                        arguments,
                        ToolStatus::Error,
                        error,
                        text::OUTCOME_UNKNOWN_HINT,
                    );
                    match state {
                        SlotState::Resolved { record, .. } => {
                            let message = json!({
                                "status": ToolStatus::Error.as_str(),
                                "code": text::OUTCOME_UNKNOWN,
                                "error": record.error,
                                "hint": text::OUTCOME_UNKNOWN_HINT,
                            })
                            .to_string();
                            self.new_records.push((*record).clone());
                            slot.recorded = true;
                            SlotState::Resolved {
                                record,
                                message,
                                output_saved: false,
                            }
                        }
                        other => other,
                    }
                }
            };
            slot.state = state;
        }
        self.state.phase.put_batch(batch);
        if ask {
            let calls = self.pending_approvals();
            return self.pause(
                InputKind::Approval,
                Some(text::outcome_unknown_question()),
                calls,
            );
        }
        self.continue_batch()
    }

    fn cutoff(&self, tool: &str) -> Cutoff {
        let Some(entry) = self.catalog.get(tool) else {
            // Gone from the catalog: running it again fails as any call of a missing tool.
            return Cutoff::RunAgain;
        };
        if entry.is_idempotent() {
            return Cutoff::RunAgain;
        }
        match entry.settings.on_unknown_outcome {
            UnknownOutcome::TellModel => Cutoff::TellModel,
            UnknownOutcome::Ask => Cutoff::Ask,
        }
    }
}
