//! A paused run as data: what the store keeps so that the run resumes after a human answered,
//! in this process or in the next one after a restart. It is the run's whole [`RunState`]; what
//! can be derived again (the model's view with its token counts, indexes) is rebuilt.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use super::{
    RunMachine, RunState,
    state::{Phase, STATE_VERSION},
};
use crate::{
    catalog::ToolCatalog, policy::RunPolicy, settings::AgentSettings, tokens::TokenCounter,
};

/// What the store keeps of a paused run: its state, and the seq of its last event (its events
/// go on from there).
#[derive(Debug, Serialize, Deserialize)]
pub struct PausedRun {
    #[serde(alias = "snapshot")]
    pub state: RunState,
    pub last_seq: u64,
}

/// A paused run saved by another version of agentloop, whose state this one cannot read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the paused run was saved by another version of agentloop (state version {saved}, this one \
     reads {reads})"
)]
pub struct OtherStateVersion {
    pub saved: u32,
    pub reads: u32,
}

impl RunMachine {
    /// The state of this paused run; `None` when it is not paused.
    pub fn snapshot(&self) -> Option<&RunState> {
        (self.state.phase == Phase::AwaitingInput).then_some(&self.state)
    }

    /// The paused run of `state`, under `policy` (rebuilt from its context by the caller),
    /// ready for [`RunMachine::resume`]. Its earlier messages and events are already stored.
    pub fn restore(
        mut state: RunState,
        policy: RunPolicy,
        settings: Arc<AgentSettings>,
        catalog: Arc<ToolCatalog>,
        counter: Arc<dyn TokenCounter>,
    ) -> Result<RunMachine, OtherStateVersion> {
        if state.version != STATE_VERSION {
            return Err(OtherStateVersion {
                saved: state.version,
                reads: STATE_VERSION,
            });
        }
        state.input.policy = policy;
        Ok(RunMachine::from_state(state, settings, catalog, counter))
    }
}
