//! The server as an instance that owns runs: it registers in the store, shows signs of life,
//! takes cancel requests made through other instances, adopts the runs that instances which
//! stopped left behind, and hands its own over when it stops (see
//! `agentloop_core::durability`).

use std::{sync::Arc, time::Duration};

use agentloop_core::{
    Agent, InstanceKind,
    durability::{OwnedAgent, adopt_orphans, own},
    protocol::ResumeReason,
};
use tokio_util::task::AbortOnDropHandle;

use crate::{live::LiveRuns, state::AppState};

/// The loops that make this server an instance; they stop when this is dropped.
pub(crate) struct Durable {
    owned: OwnedAgent,
    _adopting: AbortOnDropHandle<()>,
}

impl Durable {
    /// Registers this server as an instance and starts its loops; its agent then owns the runs
    /// it starts. Without a store, or when the store cannot take the registration, the server
    /// runs as before: its runs have no owner and are not adopted.
    pub(crate) async fn start(state: &mut AppState) -> Option<Durable> {
        let lease = state.config.run_lease();
        let runs = state.runs.clone();
        let on_cancel = {
            let runs = runs.clone();
            Arc::new(move |run_id| {
                if let Some(run) = runs.get(run_id) {
                    tracing::info!(%run_id, "cancel asked through another instance");
                    run.cancel();
                }
            })
        };
        let owned = match own(&state.agent, InstanceKind::Server, lease, on_cancel).await {
            Ok(owned) => owned?,
            Err(error) => {
                tracing::warn!(%error, "cannot register this server as an instance: its runs \
                    will not be adopted by another instance if it stops");
                return None;
            }
        };
        state.agent = owned.agent.clone();
        let adopting = AbortOnDropHandle::new(tokio::spawn(adopt_forever(
            owned.agent.clone(),
            runs,
            lease,
            state.resume_reason,
        )));
        Some(Durable {
            owned,
            _adopting: adopting,
        })
    }

    pub(crate) fn agent(&self) -> &Agent {
        &self.owned.agent
    }

    /// Says in the store that this instance stopped: the runs it handed over are adopted at
    /// once, without waiting for its lease to run out.
    pub(crate) async fn retire(self) {
        let Some(store) = self.owned.agent.store() else {
            return;
        };
        if let Err(error) = store.retire_instance(&self.owned.instance.id).await {
            tracing::warn!(%error, "cannot say this instance stopped; its runs are adopted \
                once its lease runs out");
        }
    }
}

/// How often, at most, a server looks for runs left behind: runs handed over by an instance
/// that stopped are adopted within this, whatever the lease. One query per instance.
const ADOPT_EVERY: Duration = Duration::from_secs(1);

/// Looks for runs left behind at once, then every third of the lease (every second at most).
async fn adopt_forever(agent: Agent, runs: Arc<LiveRuns>, lease: Duration, reason: ResumeReason) {
    let every = (lease / 3).clamp(Duration::from_millis(100), ADOPT_EVERY);
    let mut ticks = tokio::time::interval(every);
    ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        ticks.tick().await;
        if runs.is_shutting_down() {
            return;
        }
        for resumed in adopt_orphans(&agent, lease, reason).await {
            let run_id = resumed.run_id();
            if let Err(error) = runs.adopt(&agent, resumed) {
                // Stopping: the run stays with this instance, which retires, so another
                // instance (or the next start) adopts it.
                tracing::warn!(%run_id, error = %error.message, "cannot drive an adopted run");
            }
        }
    }
}
