//! Runs that outlive the process that started them.
//!
//! Every step of a run saves its checkpoint (see `machine/checkpoint.rs`) in the step's
//! transaction, so a run can go on from its last saved step in another process. A process that
//! works on runs is an [`Instance`]: it registers, then shows signs of life with one heartbeat
//! per instance ([`keep_alive`]), whatever its number of runs. A server whose heartbeat is older
//! than the run lease (`[server] run_lease_s`), or that said it stopped, has left its runs
//! behind: another server adopts them ([`adopt_orphans`], a compare-and-set on the owner that
//! exactly one instance wins), and the run goes on from its last saved step with `run_resumed`.
//!
//! What runs at most once and what at least once:
//! - a tool call whose result was saved is never executed again; side-effect hooks run once
//!   per executed call, with it;
//! - an LLM call under way when the process stopped is made again (it changes nothing);
//! - a tool call that may have started but whose result was not saved runs again only when its
//!   tool is read-only or idempotent; otherwise the model is told its outcome is unknown, or a
//!   human is asked (`on_unknown_outcome`);
//! - every call carries an idempotency key, `{run_id}:{call_id}`, the same across a resume
//!   ([`crate::ToolContext::idempotency_key`]).

use std::{sync::Arc, time::Duration};

use agentloop_protocol::ResumeReason;
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;

use crate::{
    agent::Agent,
    session_resume::{ResumeError, Resumed},
    store::{Instance, InstanceKind, Store, StoreError},
};

/// How often an instance looks for cancel requests of its runs made through other instances.
pub const CANCEL_POLL: Duration = Duration::from_secs(1);

/// How many left-behind runs one sweep adopts at most.
const ADOPT_BATCH: u32 = 32;

/// Registers a new instance of `kind` in `store`, alive as of now. Its id is new for every
/// start of a process; its name says where it runs (host and process id).
pub async fn register(store: &dyn Store, kind: InstanceKind) -> Result<Instance, StoreError> {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|host| !host.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/etc/hostname")
                .ok()
                .map(|host| host.trim().to_string())
        })
        .unwrap_or_else(|| "localhost".to_string());
    let instance = Instance {
        id: Uuid::now_v7().to_string(),
        kind,
        name: format!("{host}:{}", std::process::id()),
    };
    store.register_instance(&instance).await?;
    Ok(instance)
}

/// Keeps `instance` alive in the store while the returned handle lives: a heartbeat every
/// third of `lease`, and every [`CANCEL_POLL`] the cancel requests of its runs, each handed to
/// `on_cancel`. Stops when dropped.
pub fn keep_alive(
    store: Arc<dyn Store>,
    instance_id: String,
    lease: Duration,
    on_cancel: Arc<dyn Fn(Uuid) + Send + Sync>,
) -> AbortOnDropHandle<()> {
    AbortOnDropHandle::new(tokio::spawn(async move {
        let beat_every = (lease / 3).max(Duration::from_millis(100));
        let mut beat = tokio::time::interval(beat_every);
        let mut poll = tokio::time::interval(CANCEL_POLL.min(beat_every));
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = beat.tick() => {
                    if let Err(error) = store.heartbeat(&instance_id).await {
                        tracing::warn!(instance = %instance_id, %error, "cannot show a sign of life");
                    }
                }
                _ = poll.tick() => match store.cancel_requests(&instance_id).await {
                    Ok(runs) => runs.into_iter().for_each(|run_id| on_cancel(run_id)),
                    Err(error) => {
                        tracing::debug!(instance = %instance_id, %error, "cannot read cancel requests");
                    }
                },
            }
        }
    }))
}

/// An agent whose runs belong to an instance registered in its store and kept alive there:
/// the heartbeat and the cancel requests stop when this is dropped.
pub struct OwnedAgent {
    pub agent: Agent,
    pub instance: Instance,
    _alive: AbortOnDropHandle<()>,
}

/// Registers this process as an instance of `kind` in `agent`'s store, keeps it alive
/// ([`keep_alive`]) and makes it the owner of the agent's runs ([`Agent::owned_by`]). `None`
/// for an agent without a store.
pub async fn own(
    agent: &Agent,
    kind: InstanceKind,
    lease: Duration,
    on_cancel: Arc<dyn Fn(Uuid) + Send + Sync>,
) -> Result<Option<OwnedAgent>, StoreError> {
    let Some(store) = agent.store().cloned() else {
        return Ok(None);
    };
    let instance = register(store.as_ref(), kind).await?;
    tracing::info!(instance = %instance.id, name = %instance.name, "instance registered");
    let alive = keep_alive(store, instance.id.clone(), lease, on_cancel);
    Ok(Some(OwnedAgent {
        agent: agent.clone().owned_by(instance.id.clone()),
        instance,
        _alive: alive,
    }))
}

/// Adopts the runs servers left behind (stopped, or silent for longer than `lease`) with
/// `agent`, which must be owned by an instance ([`Agent::owned_by`]). Each run comes back
/// ready to be driven ([`Agent::run_resumed`]); a run another instance took first is skipped,
/// and one that cannot go on (its state unreadable) is ended `failed` in the store.
pub async fn adopt_orphans(agent: &Agent, lease: Duration, reason: ResumeReason) -> Vec<Resumed> {
    let Some(store) = agent.store().cloned() else {
        return Vec::new();
    };
    let orphans = match store.orphaned_runs(lease, ADOPT_BATCH).await {
        Ok(orphans) => orphans,
        Err(error) => {
            tracing::warn!(%error, "cannot look for runs left behind");
            return Vec::new();
        }
    };
    let mut adopted = Vec::with_capacity(orphans.len());
    for orphan in orphans {
        match agent.adopt(orphan.run_id, reason, lease).await {
            Ok(resumed) => {
                tracing::info!(run_id = %orphan.run_id, from = %orphan.owner,
                    handed_over = orphan.handed_over, "adopted a run left behind");
                adopted.push(resumed);
            }
            Err(ResumeError::NotAdoptable(_)) => {}
            Err(ResumeError::Corrupt(error)) => {
                tracing::error!(run_id = %orphan.run_id, %error, "a run left behind cannot go on; it ends failed");
                if let Err(error) = agent
                    .end_unrecoverable(orphan.run_id, &error.to_string())
                    .await
                {
                    tracing::warn!(run_id = %orphan.run_id, %error, "cannot end the run");
                }
            }
            Err(error) => {
                tracing::warn!(run_id = %orphan.run_id, %error, "cannot adopt a run left behind");
            }
        }
    }
    adopted
}
