//! A paused run as data: what the store keeps so that the run resumes after a human answered,
//! in this process or in the next one after a restart. What can be derived again (the model's
//! view with its token counts, indexes) is not kept.

use std::{
    collections::{BTreeSet, HashMap},
    sync::Arc,
};

use agentloop_protocol::{FinalizeReason, SessionMessage, ToolExecutionRecord, Usage};
use serde::{Deserialize, Serialize};

use super::{Phase, RunInput, RunMachine, batch::Batch, guidance::Guidance, view};
use crate::{
    catalog::ToolCatalog, policy::RunPolicy, settings::AgentSettings, tokens::TokenCounter,
};

/// What the store keeps of a paused run: its state, and the seq of its last event (its events
/// go on from there).
#[derive(Debug, Serialize, Deserialize)]
pub struct PausedRun {
    pub snapshot: RunSnapshot,
    pub last_seq: u64,
}

/// Bumped when the shape changes, so that an old snapshot is refused rather than misread.
const VERSION: u32 = 1;

/// The state of a paused run.
#[derive(Debug, Serialize, Deserialize)]
pub struct RunSnapshot {
    version: u32,
    input: RunInput,
    turn: Vec<SessionMessage>,
    records: Vec<ToolExecutionRecord>,
    iteration: u32,
    tools_used: u32,
    usage: Usage,
    seen_calls: HashMap<String, String>,
    call_ids: BTreeSet<String>,
    duplicates: u32,
    consecutive_failures: u32,
    failure_streaks: HashMap<String, u32>,
    withdrawn: BTreeSet<String>,
    finalize_reason: Option<FinalizeReason>,
    should_refresh: bool,
    documents: Vec<serde_json::Value>,
    batch: Batch,
    /// Plan, clarification and review (absent in snapshots of runs without them).
    #[serde(default)]
    guidance: Guidance,
}

impl RunSnapshot {
    /// The context the run was started with (its policy is rebuilt from it).
    pub fn context(&self) -> &super::RunContext {
        &self.input.context
    }
}

impl RunMachine {
    /// The state of this paused run; `None` when it is not paused.
    pub fn snapshot(&self) -> Option<RunSnapshot> {
        if self.phase != Phase::AwaitingInput {
            return None;
        }
        Some(RunSnapshot {
            version: VERSION,
            input: self.input.clone(),
            turn: self.turn.clone(),
            records: self.records.clone(),
            iteration: self.iteration,
            tools_used: self.tools_used,
            usage: self.usage,
            seen_calls: self.seen_calls.clone(),
            call_ids: self.call_ids.clone(),
            duplicates: self.duplicates,
            consecutive_failures: self.consecutive_failures,
            failure_streaks: self.failure_streaks.clone(),
            withdrawn: self.withdrawn.clone(),
            finalize_reason: self.finalize_reason,
            should_refresh: self.should_refresh,
            documents: self.documents.clone(),
            batch: self.batch.clone(),
            guidance: self.guidance.clone(),
        })
    }

    /// The paused run of `snapshot`, under `policy` (rebuilt from its context by the caller),
    /// ready for [`RunMachine::resume`]. Its earlier messages and events are already stored.
    pub fn restore(
        snapshot: RunSnapshot,
        policy: RunPolicy,
        settings: Arc<AgentSettings>,
        catalog: Arc<ToolCatalog>,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<RunMachine, String> {
        if snapshot.version != VERSION {
            return Err(format!(
                "the paused run was saved by another version of agentloop (snapshot version {}, \
                 this one reads {VERSION})",
                snapshot.version
            ));
        }
        let mut input = snapshot.input;
        input.policy = policy;
        let mut machine = RunMachine::new(input, settings, catalog, counter);
        machine.phase = Phase::AwaitingInput;
        machine.outbox.clear();
        let max_chars = machine.settings.tool_output_max_chars;
        machine.turn_view = snapshot
            .turn
            .iter()
            .filter(|message| view::is_viewed(message.kind))
            .map(|message| {
                view::view_message(
                    &machine.catalog,
                    machine.counter.as_ref(),
                    &message.message,
                    max_chars,
                    false,
                )
            })
            .collect();
        machine.taken_messages = snapshot.turn.len();
        machine.turn = snapshot.turn;
        machine.record_by_call = snapshot
            .records
            .iter()
            .enumerate()
            .map(|(index, record)| (record.call_id.clone(), index))
            .collect();
        machine.records = snapshot.records;
        machine.iteration = snapshot.iteration;
        machine.tools_used = snapshot.tools_used;
        machine.usage = snapshot.usage;
        machine.seen_calls = snapshot.seen_calls;
        machine.call_ids = snapshot.call_ids;
        machine.duplicates = snapshot.duplicates;
        machine.consecutive_failures = snapshot.consecutive_failures;
        machine.failure_streaks = snapshot.failure_streaks;
        machine.withdrawn = snapshot.withdrawn;
        machine.finalize_reason = snapshot.finalize_reason;
        machine.should_refresh = snapshot.should_refresh;
        machine.documents = snapshot.documents;
        machine.batch = snapshot.batch;
        machine.guidance = snapshot.guidance;
        Ok(machine)
    }
}
