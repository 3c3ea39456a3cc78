//! Guardrails in the run: the question is checked before the first LLM call, the answer before
//! it is shown. The machine asks for a check (`Step::CheckGuardrails`) and is fed the verdicts
//! (`Input::GuardrailVerdicts`); it reports each (`guardrail_checked`, `guardrail_tripped`)
//! and decides: go on, send the model back with the reason (`action = "retry"`), or end the run
//! `blocked`.
//!
//! A refused answer, and the note that sent the model back, are messages of kind `blocked`:
//! the model reads them in this run (to write a better answer), the session keeps them, and no
//! later run reads them. With `guardrail_mode = "hold"` the driver streams no answer text while
//! output guardrails wait (`RunMachine::holds_answer`): the machine sends the text of a reply
//! that calls tools itself, and the answer once it passed.

use agentloop_protocol::{
    ChatMessage, ErrorCode, EventKind, GuardrailAction, GuardrailSide, LlmCallPurpose, MessageKind,
    RunStatus, Usage,
};
use serde_json::json;

use super::{
    RunFailure, RunMachine, Step,
    state::{PendingAnswer, Phase},
};
use crate::guardrail::{
    FailMode, GuardrailCheck, GuardrailLlmCall, GuardrailMode, GuardrailOutcome, GuardrailVerdict,
};

/// The guardrail that decides a check, and how.
struct Trip {
    name: String,
    reason: String,
    action: GuardrailAction,
}

impl RunMachine {
    /// Whether the driver holds the answer's text back: output guardrails check it first, in
    /// `hold` mode.
    pub fn holds_answer(&self) -> bool {
        self.settings.guardrail_mode == GuardrailMode::Hold
            && self.has_guardrails(GuardrailSide::Output)
    }

    fn has_guardrails(&self, on: GuardrailSide) -> bool {
        self.settings.guardrails.on(on).next().is_some()
    }

    /// The check of the question, when the run has input guardrails it did not pass yet.
    pub(super) fn check_question(&mut self) -> Option<Step> {
        if self.state.guarded.question_passed || !self.has_guardrails(GuardrailSide::Input) {
            return None;
        }
        self.state.phase = Phase::Guarding {
            guard_on: GuardrailSide::Input,
            pending_answer: None,
        };
        Some(Step::CheckGuardrails(self.guard_check()))
    }

    /// The run has its answer: shown and the run completed, or first checked by the output
    /// guardrails. `shown`: the driver streamed it already as `final_response`.
    pub(super) fn deliver(&mut self, text: String, shown: bool) -> Step {
        if !self.has_guardrails(GuardrailSide::Output) {
            let answer = if shown { text } else { self.emit_answer(text) };
            return self.finish(RunStatus::Completed, Some(answer), None);
        }
        let finalize = self.state.phase.finalize_reason();
        self.state.phase = Phase::Guarding {
            guard_on: GuardrailSide::Output,
            pending_answer: Some(PendingAnswer {
                text,
                shown,
                finalize,
            }),
        };
        Step::CheckGuardrails(self.guard_check())
    }

    /// The check the phase waits for (asked again when a resumed run is in the middle of it).
    pub(super) fn guard_check(&self) -> GuardrailCheck {
        let (on, text) = match &self.state.phase {
            Phase::Guarding {
                guard_on,
                pending_answer: Some(answer),
            } => (*guard_on, answer.text.clone()),
            Phase::Guarding { guard_on, .. } => (*guard_on, self.state.input.query.clone()),
            _ => (GuardrailSide::Input, self.state.input.query.clone()),
        };
        let names = self
            .settings
            .guardrails
            .on(on)
            .map(|rule| rule.name.clone())
            .collect();
        GuardrailCheck { on, text, names }
    }

    /// The verdicts of the check the run waits for.
    pub(super) fn on_guardrail_verdicts(&mut self, verdicts: Vec<GuardrailVerdict>) -> Step {
        let Phase::Guarding {
            guard_on: on,
            pending_answer,
        } = &self.state.phase
        else {
            return self.unexpected("guardrail verdicts");
        };
        let (on, pending) = (*on, pending_answer.clone());
        let mut trip = None;
        for verdict in verdicts {
            for call in &verdict.llm_calls {
                self.account_guardrail_call(call);
            }
            let Some(rule) = self.settings.guardrails.rule(&verdict.name).cloned() else {
                continue;
            };
            let (allowed, reason, error) = match verdict.outcome {
                GuardrailOutcome::Allowed => (true, None, None),
                GuardrailOutcome::Tripped { reason } => (false, Some(reason), None),
                GuardrailOutcome::Failed { error } => match rule.fail {
                    FailMode::Open => (true, None, Some(error)),
                    FailMode::Closed => (
                        false,
                        Some(format!("the guardrail could not decide: {error}")),
                        Some(error),
                    ),
                },
            };
            self.emit(EventKind::GuardrailChecked {
                name: rule.name.clone(),
                on,
                allowed,
                duration_ms: verdict.duration_ms,
                error: error.clone(),
            });
            if let (Some(reason), None) = (reason, &trip) {
                // Sent back only on a refusal: a guardrail that could not decide would again.
                let retry = rule.action == GuardrailAction::Retry
                    && on == GuardrailSide::Output
                    && error.is_none();
                let used = self
                    .state
                    .guarded
                    .retried
                    .get(&rule.name)
                    .copied()
                    .unwrap_or(0);
                let action = if retry && used < rule.retries {
                    GuardrailAction::Retry
                } else {
                    GuardrailAction::Block
                };
                trip = Some(Trip {
                    name: rule.name,
                    reason,
                    action,
                });
            }
        }
        match (trip, pending) {
            (None, None) => {
                self.state.guarded.question_passed = true;
                self.begin_work()
            }
            (None, Some(answer)) => {
                self.state.phase = match answer.finalize {
                    Some(reason) => Phase::AwaitingFinalize { reason },
                    None => Phase::AwaitingStep,
                };
                let text = if answer.shown {
                    answer.text
                } else {
                    self.emit_answer(answer.text)
                };
                self.finish(RunStatus::Completed, Some(text), None)
            }
            (Some(trip), pending) => self.tripped(on, trip, pending),
        }
    }

    fn tripped(&mut self, on: GuardrailSide, trip: Trip, answer: Option<PendingAnswer>) -> Step {
        self.emit(EventKind::GuardrailTripped {
            name: trip.name.clone(),
            on,
            reason: trip.reason.clone(),
            action: trip.action,
        });
        if let Some(answer) = &answer {
            // A typed value refused is no value: a retry gives another, a block none.
            self.state.typed.value = None;
            if self.settings.guardrail_mode == GuardrailMode::After {
                self.emit(EventKind::AnswerRetracted {
                    name: trip.name.clone(),
                });
            }
            let metadata = json!({ "guardrail": trip.name, "reason": trip.reason });
            self.push_message(
                MessageKind::Blocked,
                ChatMessage::assistant(answer.text.clone()),
                metadata,
            );
        }
        let finalize = answer.as_ref().and_then(|answer| answer.finalize);
        if trip.action == GuardrailAction::Retry {
            *self
                .state
                .guarded
                .retried
                .entry(trip.name.clone())
                .or_default() += 1;
            let note = format!(
                "Your answer above was not accepted ({}: {}). Write the answer again without \
                 this problem.",
                trip.name, trip.reason
            );
            self.push_message(
                MessageKind::Blocked,
                ChatMessage::user(note),
                json!({ "guardrail": trip.name }),
            );
            return match finalize {
                Some(reason) => {
                    self.state.phase = Phase::AwaitingFinalize { reason };
                    self.force_finalize(reason)
                }
                None => {
                    self.state.phase = Phase::AwaitingStep;
                    self.next_iteration()
                }
            };
        }
        // The outcome keeps the reason the summary was forced for.
        self.state.phase = match finalize {
            Some(reason) => Phase::AwaitingFinalize { reason },
            None => Phase::AwaitingStep,
        };
        let message = format!(
            "The {} was blocked by the guardrail `{}`: {}",
            match on {
                GuardrailSide::Input => "request",
                GuardrailSide::Output => "answer",
            },
            trip.name,
            trip.reason
        );
        self.emit(EventKind::Error {
            code: ErrorCode::Blocked,
            message: message.clone(),
        });
        let failure = RunFailure {
            code: ErrorCode::Blocked,
            message,
        };
        self.finish(RunStatus::Blocked, None, Some(failure))
    }

    /// Prices an `llm` guardrail's call, adds it to the run's usage and reports it
    /// (`llm_call` with purpose `guardrail`).
    fn account_guardrail_call(&mut self, call: &GuardrailLlmCall) {
        let model = call
            .model
            .clone()
            .or_else(|| self.settings.pricing.default_model.clone());
        let priced = model
            .as_deref()
            .and_then(|model| self.settings.pricing.prices.cost(model, &call.usage));
        self.state.usage.add(Usage {
            cost_usd: priced,
            cost_complete: priced.is_some(),
            ..call.usage
        });
        self.emit(EventKind::LlmCall {
            iteration: self.state.iteration,
            purpose: LlmCallPurpose::Guardrail,
            model,
            duration_ms: call.duration_ms,
            prompt_tokens: call.usage.prompt_tokens,
            completion_tokens: call.usage.completion_tokens,
            cached_tokens: call.usage.cache_read_tokens,
            cost_usd: priced,
        });
    }
}
