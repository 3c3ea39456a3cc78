//! The run's state as the store keeps it, with every step: what a run needs to go on after a
//! pause, a crash or a handover, in a form that does not grow with each step.
//!
//! A [`RunState`] is saved in three parts. What the run started from and never changes (its
//! history, system prompt and client tools: the *input*) is saved once, with the first step. What grows with
//! the run (its messages and tool executions) is saved once each, as the step's messages and
//! records. The rest (the *head*: phase, counters, the batch in progress, plan, how the run
//! ended) is small and replaces the head of the step before. [`RunState::from_parts`] puts the three together
//! again; what can be derived (the documents tools returned, the model's view) is rebuilt.
//! The parts are the state's own serialization: there is no second list of fields to keep.

use std::{
    collections::{HashMap, HashSet},
    sync::Arc,
};

use agentloop_protocol::{SessionMessage, ToolExecutionRecord, ToolStatus};
use serde_json::Value;

use super::{RunMachine, RunState, batch::Batch, state::STATE_VERSION, text};
use crate::{
    catalog::ToolCatalog, policy::RunPolicy, settings::AgentSettings, tokens::TokenCounter,
    tool::ToolOutput,
};

/// A state saved by another version of agentloop, which this one cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the run was saved by another version of agentloop (state version {saved}, this one reads \
     {reads})"
)]
pub struct OtherStateVersion {
    pub saved: u32,
    pub reads: u32,
}

/// Why saved parts do not make a state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UnreadableState {
    #[error(transparent)]
    OtherVersion(#[from] OtherStateVersion),
    #[error("the saved state of the run cannot be read: {0}")]
    Json(#[from] serde_json::Error),
    #[error("the saved state of the run is not a JSON object")]
    NotAnObject,
    #[error("the saved state of the run names a tool result that was not saved")]
    MissingOutput,
}

/// The fields of the input saved once, with the first step.
const INPUT_APART: [&str; 3] = ["history", "system_prompt", "client_tools"];

impl RunState {
    /// The head of the state, as JSON text: everything but its input's history and system
    /// prompt, its messages, records and documents (also those of a finished run's outcome),
    /// and the outputs of the batch's calls that ended (saved as their records).
    ///
    /// Written straight to text: the parts saved apart are moved out while the rest is
    /// written, then put back, so the head's cost does not grow with the run (its empty
    /// collections are not written).
    pub fn head(&mut self) -> Result<String, serde_json::Error> {
        let turn = std::mem::take(&mut self.turn);
        let records = std::mem::take(&mut self.records);
        let documents = std::mem::take(&mut self.documents);
        let history = std::mem::take(&mut self.input.history);
        let system_prompt = std::mem::take(&mut self.input.system_prompt);
        let client_tools = std::mem::take(&mut self.input.client_tools);
        let outputs = self.phase.batch_mut().map(Batch::leave_outputs_out);
        let head = serde_json::to_string(&*self);
        if let (Some(batch), Some(outputs)) = (self.phase.batch_mut(), outputs) {
            batch.put_outputs_back(outputs);
        }
        self.turn = turn;
        self.records = records;
        self.documents = documents;
        self.input.history = history;
        self.input.system_prompt = system_prompt;
        self.input.client_tools = client_tools;
        head
    }

    /// What the run started from and never changes: saved once. With `history_window`, the
    /// history came from the store (that many dialogue messages) and is read from it again
    /// rather than saved.
    pub fn fixed_input(&self, history_window: Option<usize>) -> Value {
        let mut fixed = match history_window {
            Some(window) => serde_json::json!({
                "history_window": window,
                "system_prompt": self.input.system_prompt,
            }),
            None => serde_json::json!({
                "history": self.input.history,
                "system_prompt": self.input.system_prompt,
            }),
        };
        if !self.input.client_tools.is_empty() {
            fixed["client_tools"] =
                serde_json::to_value(&self.input.client_tools).unwrap_or(Value::Null);
        }
        fixed
    }

    /// The state again, from its saved parts: the input saved with the first step, the head of
    /// the last step, and the run's messages and tool executions in the order they were saved.
    pub fn from_parts(
        input: Value,
        head: Value,
        turn: Vec<SessionMessage>,
        records: Vec<ToolExecutionRecord>,
    ) -> Result<RunState, UnreadableState> {
        let Value::Object(mut fields) = head else {
            return Err(UnreadableState::NotAnObject);
        };
        let version = fields.get("version").and_then(Value::as_u64).unwrap_or(0);
        if version != u64::from(STATE_VERSION) {
            return Err(OtherStateVersion {
                saved: u32::try_from(version).unwrap_or(u32::MAX),
                reads: STATE_VERSION,
            }
            .into());
        }
        let saved: HashMap<&str, &ToolExecutionRecord> = records
            .iter()
            .map(|record| (record.call_id.as_str(), record))
            .collect();
        for resolved in resolved_slots(&mut fields) {
            put_output_back(resolved, &saved)?;
        }
        let Value::Object(fixed) = input else {
            return Err(UnreadableState::NotAnObject);
        };
        if let Some(Value::Object(run_input)) = fields.get_mut("input") {
            for field in INPUT_APART {
                if let Some(value) = fixed.get(field) {
                    run_input.insert(field.to_string(), value.clone());
                }
            }
        }
        fields.insert("turn".into(), serde_json::to_value(&turn)?);
        fields.insert("records".into(), Value::Array(Vec::new()));
        fields.insert("documents".into(), Value::Array(Vec::new()));
        let mut state: RunState = serde_json::from_value(Value::Object(fields))?;
        state.documents = documents(&records);
        state.records = finished_records(&state, records);
        Ok(state)
    }
}

/// The calls of the batch under way that ended: `{"record": ..., "message": ...}` each. The
/// batch is the phase's (`awaiting_tools`, or a paused `awaiting_input`), flattened into the
/// state beside the phase's name.
fn resolved_slots(fields: &mut serde_json::Map<String, Value>) -> impl Iterator<Item = &mut Value> {
    fields
        .get_mut("batch")
        .and_then(|batch| batch.get_mut("slots"))
        .and_then(Value::as_array_mut)
        .into_iter()
        .flatten()
        .filter_map(|slot| {
            slot.get_mut("state")
                .and_then(|state| state.get_mut("Resolved"))
        })
}

/// The output left out of the head, from the record saved with it.
fn put_output_back(
    resolved: &mut Value,
    saved: &HashMap<&str, &ToolExecutionRecord>,
) -> Result<(), UnreadableState> {
    let Some(Value::Bool(true)) = resolved
        .as_object_mut()
        .and_then(|o| o.remove("output_saved"))
    else {
        return Ok(());
    };
    let call_id = resolved.pointer("/record/call_id").and_then(Value::as_str);
    let Some(record) = call_id.and_then(|id| saved.get(id)) else {
        return Err(UnreadableState::MissingOutput);
    };
    let result = record.result.clone().unwrap_or_default();
    if resolved.get("message").is_some_and(Value::is_null) {
        resolved["message"] = Value::String(result.clone());
    }
    resolved["record"]["result"] = Value::String(result);
    resolved["record"]["structured_result"] =
        record.structured_result.clone().unwrap_or(Value::Null);
    Ok(())
}

/// The records of the batches that ended, in the order the model issued their calls (the
/// store keeps them in the order they ended); the calls of the batch in progress are in its
/// slots.
fn finished_records(state: &RunState, saved: Vec<ToolExecutionRecord>) -> Vec<ToolExecutionRecord> {
    let in_batch: HashSet<&str> = state
        .phase
        .batch()
        .into_iter()
        .flat_map(|batch| &batch.slots)
        .map(|slot| slot.call.id.as_str())
        .collect();
    let issued: HashMap<&str, usize> = state
        .turn
        .iter()
        .flat_map(|message| &message.message.tool_calls)
        .enumerate()
        .map(|(index, call)| (call.id.as_str(), index))
        .collect();
    let mut records: Vec<ToolExecutionRecord> = saved
        .into_iter()
        .filter(|record| !in_batch.contains(record.call_id.as_str()))
        .collect();
    records.sort_by_key(|record| {
        issued
            .get(record.call_id.as_str())
            .copied()
            .unwrap_or(usize::MAX)
    });
    records
}

/// The documents successful calls returned, in the order the calls ended.
fn documents(records: &[ToolExecutionRecord]) -> Vec<Value> {
    records
        .iter()
        .filter(|record| record.status == ToolStatus::Success)
        .flat_map(|record| {
            let output = ToolOutput {
                text: record.result.clone().unwrap_or_default(),
                structured: record.structured_result.clone(),
                usage: None,
                cost_usd: None,
                images: Vec::new(),
            };
            text::documents(&output)
        })
        .collect()
}

impl RunMachine {
    /// The machine of a saved `state`, under `policy` (rebuilt from its context by the
    /// caller). Its earlier messages and events are already stored.
    pub fn restore(
        mut state: RunState,
        policy: RunPolicy,
        settings: Arc<AgentSettings>,
        catalog: Arc<ToolCatalog>,
        counter: Arc<dyn TokenCounter>,
    ) -> RunMachine {
        state.input.policy = policy;
        RunMachine::from_state(state, settings, catalog, counter)
    }

    /// The head of the run's state as of now ([`RunState::head`]).
    pub fn checkpoint_head(&mut self) -> Result<String, serde_json::Error> {
        self.state.head()
    }

    /// What a run that stops here without ending reports (handed over, or adopted by another
    /// instance): status `running`, no answer; its state is in the store.
    pub fn left_behind(&self) -> super::RunOutcome {
        self.outcome_with(agentloop_protocol::RunStatus::Running, None, None, None)
    }

    /// Whether the run is paused for a human (its state then waits in the store).
    pub fn awaits_input(&self) -> bool {
        self.state.phase.is_paused()
    }

    /// Whether the run has not started yet: restored from the checkpoint of its beginning
    /// ([`first_checkpoint`]), it starts rather than resumes.
    pub fn not_started(&self) -> bool {
        matches!(self.state.phase, super::state::Phase::Created)
    }
}

/// The state of a run before its first step (seq 0), as a checkpoint holds it: what it starts
/// from ([`RunState::fixed_input`]) and the head of its state. Saved with the run's row, so that
/// a run whose process stops before its first step is saved can be started again from it.
/// `input` is given back, for the run to start from.
pub fn first_checkpoint(
    input: super::RunInput,
    history_window: Option<usize>,
) -> (super::RunInput, Result<(Value, String), serde_json::Error>) {
    let started_at = input.started_at;
    let mut state = RunState::new(input, started_at);
    let parts = state
        .head()
        .map(|head| (state.fixed_input(history_window), head));
    (state.input, parts)
}
