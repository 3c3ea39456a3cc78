//! The state of a run as one value. Everything a run needs to go on is in [`RunState`]; a paused
//! run is saved as exactly this value, so a field added to it cannot be forgotten by a copy kept
//! by hand. What is derived from it (the model's view with its token counts, indexes) is
//! rebuilt when a machine is made from a state ([`RunMachine::from_state`]).
//!
//! Time and new ids come from outside: the time arrives with each input ([`RunMachine::handle`]),
//! and ids are derived from the run's id and a counter kept in the state, so feeding the same
//! inputs to the same state yields the same events, byte for byte.

use std::collections::{BTreeMap, BTreeSet};

use agentloop_protocol::{FinalizeReason, SessionMessage, ToolExecutionRecord, Usage};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::{RunInput, RunOutcome, batch::Batch, guidance::Guidance};

/// Bumped when the shape changes, so that a state saved by another version is refused rather
/// than misread. Version 1 was the hand-kept snapshot of paused runs; version 2 the whole state
/// of paused runs; version 3 the checkpoint of every step (`checkpoint.rs`); version 4 the
/// phase that carries its data (the batch, the finalize reason, the outcome).
pub(super) const STATE_VERSION: u32 = 4;

/// Where a run stands, with what only that phase has: nothing beside it can disagree with it.
///
/// Saved flattened into the state (`"phase": "awaiting_tools", "batch": {...}`), so that the
/// data of a phase sits where the fields beside the phase sat before.
///
/// The finalize reason has one source: the phase. It is `AwaitingFinalize { reason }` while
/// the forced summary is awaited, and the outcome's `finalize_reason` once the run ended
/// ([`Phase::finalize_reason`]); the outcome of a run that ends in the middle of the summary
/// (cancelled, failed) takes it from the phase it ends in. No phase goes back from these two
/// to another, so the reason, once set, is reported to the end.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub(super) enum Phase {
    Created,
    /// Waiting for the plan (`[agent.planning]`).
    AwaitingPlan,
    /// Waiting for a reviewer's verdict (`[agent.review]`).
    AwaitingReview,
    AwaitingStep,
    /// Waiting for the calls of the batch to end.
    AwaitingTools {
        batch: Batch,
    },
    /// Waiting for the forced summary, and why it was forced.
    AwaitingFinalize {
        reason: FinalizeReason,
    },
    /// Waiting for the typed answer from a call that can only answer (formatting the model's
    /// prose, or a repair); `reason` when the summary was forced before it.
    AwaitingOutput {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<FinalizeReason>,
    },
    /// Paused until a human answers (`resume`): on the calls of `batch` (approvals, `ask_user`
    /// questions), or, with no batch, on the plan's or a reviewer's question
    /// (`guidance.question`).
    AwaitingInput {
        batch: Option<Batch>,
    },
    /// Waiting for the guardrails' verdicts on the question (no `pending_answer`) or on the
    /// answer.
    Guarding {
        guard_on: agentloop_protocol::GuardrailSide,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pending_answer: Option<PendingAnswer>,
    },
    /// The run ended, and how (its outcome without the run's messages and records, which are
    /// the state's: `RunState::finished_outcome` puts them together).
    Finished {
        outcome: Box<RunOutcome>,
    },
}

impl Phase {
    /// The calls of the reply being worked on: running, or paused for a human.
    pub(super) fn batch(&self) -> Option<&Batch> {
        match self {
            Phase::AwaitingTools { batch } | Phase::AwaitingInput { batch: Some(batch) } => {
                Some(batch)
            }
            _ => None,
        }
    }

    pub(super) fn batch_mut(&mut self) -> Option<&mut Batch> {
        match self {
            Phase::AwaitingTools { batch } | Phase::AwaitingInput { batch: Some(batch) } => {
                Some(batch)
            }
            _ => None,
        }
    }

    /// Moves the batch out of the phase (an empty one is left in its place), to be worked on
    /// while the machine is borrowed, and handed to the phase that comes next.
    pub(super) fn take_batch(&mut self) -> Option<Batch> {
        self.batch_mut().map(std::mem::take)
    }

    /// Puts back a batch taken with [`Phase::take_batch`], in the place it left.
    pub(super) fn put_batch(&mut self, batch: Batch) {
        if let Some(place) = self.batch_mut() {
            *place = batch;
        }
    }

    /// Why the summary was forced, if it was.
    pub(super) fn finalize_reason(&self) -> Option<FinalizeReason> {
        match self {
            Phase::AwaitingFinalize { reason } => Some(*reason),
            Phase::Guarding {
                pending_answer: Some(answer),
                ..
            } => answer.finalize,
            Phase::AwaitingOutput { reason } => *reason,
            Phase::Finished { outcome } => outcome.finalize_reason,
            _ => None,
        }
    }

    pub(super) fn outcome(&self) -> Option<&RunOutcome> {
        match self {
            Phase::Finished { outcome } => Some(outcome),
            _ => None,
        }
    }

    pub(super) fn is_paused(&self) -> bool {
        matches!(self, Phase::AwaitingInput { .. })
    }
}

/// What the run keeps of its guardrails: whether the question passed (a resumed run does not
/// check it again), and how often each output guardrail sent the model back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct Guarded {
    #[serde(default)]
    pub(super) question_passed: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) retried: BTreeMap<String, u32>,
}

impl Guarded {
    pub(super) fn is_empty(&self) -> bool {
        *self == Guarded::default()
    }
}

/// An answer waiting for the output guardrails.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub(super) struct PendingAnswer {
    pub(super) text: String,
    /// Already streamed as `final_response` (the summary, with `guardrail_mode = "after"`).
    #[serde(default)]
    pub(super) shown: bool,
    /// The summary was forced, and why: a retry forces it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) finalize: Option<FinalizeReason>,
}

/// How far a typed run got with its answer: saved with the state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(super) struct TypedProgress {
    /// Invalid answers so far.
    #[serde(default)]
    pub failures: u32,
    /// The valid value, once the model gave it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub value: Option<serde_json::Value>,
}

impl TypedProgress {
    pub(super) fn is_empty(&self) -> bool {
        *self == TypedProgress::default()
    }
}

/// Everything a run needs to go on.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RunState {
    pub(super) version: u32,
    pub(super) input: RunInput,
    /// Where the run stands, with the batch being worked on, the finalize reason and the
    /// outcome: what only some phases have.
    #[serde(flatten)]
    pub(super) phase: Phase,
    /// The time of the input being handled (or of the run's start).
    pub(super) now: DateTime<Utc>,
    /// Ids handed out so far (messages); the next id derives from this count.
    pub(super) ids_issued: u64,
    /// This run's messages, starting with the question. (Left out of a checkpoint's head
    /// while empty: the head is written with them taken out.)
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) turn: Vec<SessionMessage>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) records: Vec<ToolExecutionRecord>,
    pub(super) iteration: u32,
    pub(super) tools_used: u32,
    pub(super) usage: Usage,
    /// Canonical `tool + arguments` of every call of the run, to the id of its first call.
    pub(super) seen_calls: BTreeMap<String, String>,
    pub(super) call_ids: BTreeSet<String>,
    pub(super) duplicates: u32,
    pub(super) consecutive_failures: u32,
    pub(super) failure_streaks: BTreeMap<String, u32>,
    pub(super) withdrawn: BTreeSet<String>,
    /// Messages the user sent while the run works, not in the conversation yet: added before
    /// the next LLM call (`steering.rs`).
    #[serde(default)]
    pub(super) steering: Vec<String>,
    /// A side effect asked the client to refresh its view.
    pub(super) should_refresh: bool,
    /// Documents tools returned (`documents: [...]`), kept with the run's trace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) documents: Vec<serde_json::Value>,
    /// Plan, clarification and review.
    pub(super) guidance: Guidance,
    /// What passed the guardrails, and the retries they asked for.
    #[serde(default, skip_serializing_if = "Guarded::is_empty")]
    pub(super) guarded: Guarded,
    /// The typed answer's attempts and value (runs with an output schema).
    #[serde(default, skip_serializing_if = "TypedProgress::is_empty")]
    pub(super) typed: TypedProgress,
}

impl RunState {
    /// The state of a run that has not started, at `now`.
    pub(super) fn new(input: RunInput, now: DateTime<Utc>) -> RunState {
        RunState {
            version: STATE_VERSION,
            input,
            phase: Phase::Created,
            now,
            ids_issued: 0,
            turn: Vec::new(),
            records: Vec::new(),
            iteration: 0,
            tools_used: 0,
            usage: Usage::nothing_spent(),
            seen_calls: BTreeMap::new(),
            call_ids: BTreeSet::new(),
            duplicates: 0,
            consecutive_failures: 0,
            failure_streaks: BTreeMap::new(),
            withdrawn: BTreeSet::new(),
            steering: Vec::new(),
            should_refresh: false,
            documents: Vec::new(),
            guidance: Guidance::default(),
            guarded: Guarded::default(),
            typed: Default::default(),
        }
    }

    /// The context the run was started with (its policy is rebuilt from it).
    pub fn context(&self) -> &super::RunContext {
        &self.input.context
    }

    pub fn run_id(&self) -> Uuid {
        self.input.run_id
    }

    /// A new id: time-ordered like a UUIDv7 (the input's time), and a function of the run's
    /// id and how many ids it issued before, never of a random source.
    pub(super) fn next_id(&mut self) -> Uuid {
        self.ids_issued += 1;
        let mixed = self.input.run_id.as_u128()
            ^ u128::from(self.ids_issued).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835);
        let bytes = mixed.to_be_bytes();
        let mut tail = [0u8; 10];
        tail.copy_from_slice(&bytes[6..]);
        let millis = u64::try_from(self.now.timestamp_millis()).unwrap_or_default();
        uuid::Builder::from_unix_timestamp_millis(millis, &tail).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::machine::RunContext;

    fn state() -> RunState {
        let input = RunInput {
            refused: None,
            run_id: Uuid::from_u128(7),
            session_id: Uuid::from_u128(8),
            query: "q".into(),
            attachments: Vec::new(),
            history: Vec::new(),
            system_prompt: "s".into(),
            model: None,
            max_iterations: 3,
            context: RunContext::default(),
            started_at: DateTime::from_timestamp_millis(1_700_000_000_000).unwrap(),
            policy: Default::default(),
            client_tools: Vec::new(),
            budget: Default::default(),
            output: None,
        };
        let now = input.started_at;
        RunState::new(input, now)
    }

    #[test]
    fn ids_are_distinct_ordered_by_time_and_the_same_on_every_replay() {
        let (mut a, mut b) = (state(), state());
        let first: Vec<Uuid> = (0..100).map(|_| a.next_id()).collect();
        let again: Vec<Uuid> = (0..100).map(|_| b.next_id()).collect();
        assert_eq!(first, again);
        let distinct: BTreeSet<Uuid> = first.iter().copied().collect();
        assert_eq!(distinct.len(), 100);
        assert!(first.iter().all(|id| id.get_version_num() == 7));
        a.now += chrono::Duration::milliseconds(5);
        assert!(a.next_id() > *first.iter().max().unwrap());
    }

    #[test]
    fn a_state_round_trips_through_json() {
        let mut original = state();
        original.phase = Phase::AwaitingFinalize {
            reason: FinalizeReason::MaxIterations,
        };
        original.seen_calls.insert("k".into(), "c1".into());
        let text = serde_json::to_string(&original).unwrap();
        let back: RunState = serde_json::from_str(&text).unwrap();
        assert_eq!(serde_json::to_string(&back).unwrap(), text);
        assert_eq!(
            back.phase.finalize_reason(),
            Some(FinalizeReason::MaxIterations)
        );
    }
}
