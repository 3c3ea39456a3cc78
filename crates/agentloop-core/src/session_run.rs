//! A run backed by a store: the session is created if new and held for the run (a second run
//! of the same session is refused, never interleaved), the history is read from it, the question
//! is saved before the first LLM call, and every step after.

use std::{sync::Arc, time::Duration};

use agentloop_protocol::ChatMessage;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    agent::{Agent, RunRequest},
    driver::{Emitter, Persistence, drive},
    machine::RunOutcome,
    store::{NewRun, NewSession, SessionLock, Store, StoreError},
};

/// How long a run holds its session without renewing; renewed at a third of it while it works,
/// so a crashed process frees its sessions within this time.
pub const SESSION_LEASE: Duration = Duration::from_secs(90);

/// The user a run belongs to when the request names none.
pub const DEFAULT_USER: &str = "local";

/// Runs `request` with `store`: see the module documentation.
pub(crate) async fn run_with_store(
    agent: &Agent,
    store: Arc<dyn Store>,
    mut request: RunRequest,
    emitter: &mut Emitter,
    cancel: CancellationToken,
) -> RunOutcome {
    let session_id = request.session_id.unwrap_or_else(Uuid::now_v7);
    request.session_id = Some(session_id);
    let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
    let user_id = request
        .context
        .user_id
        .get_or_insert_with(|| DEFAULT_USER.to_string())
        .clone();

    let prepared = prepare(
        agent,
        store.as_ref(),
        &request,
        session_id,
        run_id,
        &user_id,
    )
    .await;
    let history = match prepared {
        Ok(history) => history,
        Err((code, message)) => {
            // Nothing is saved: the run never started. Driving the ended machine only emits
            // its events (run_started, error, done).
            let mut machine = agent.prepare(request);
            let _ = machine.fail(code, message);
            let services = agent.services().clone();
            return drive(machine, services, emitter, CancellationToken::new(), None).await;
        }
    };
    if request.include_history {
        request.history = history;
    }
    let save_chat = request.save_chat;
    let machine = agent.prepare(request);

    let renewal = tokio::spawn(renew_lease(store.clone(), session_id, run_id));
    let persistence = Persistence {
        store,
        save_messages: save_chat,
        retry: agent.settings().store_retry(),
    };
    let outcome = drive(
        machine,
        agent.services().clone(),
        emitter,
        cancel,
        Some(persistence),
    )
    .await;
    renewal.abort();
    outcome
}

/// Everything before the first LLM call: the session, its lock, the history and the run row.
async fn prepare(
    agent: &Agent,
    store: &dyn Store,
    request: &RunRequest,
    session_id: Uuid,
    run_id: Uuid,
    user_id: &str,
) -> Result<Vec<ChatMessage>, (&'static str, String)> {
    let unavailable = |error: StoreError| ("store_unavailable", error.to_string());
    match store.session(session_id).await.map_err(unavailable)? {
        Some(session) if session.user_id != user_id => {
            return Err((
                "session_not_found",
                format!("session {session_id} not found"),
            ));
        }
        Some(_) => {}
        None if request.save_chat => {
            let session = NewSession {
                id: session_id,
                user_id: user_id.to_string(),
                title: title(&request.query),
            };
            store.create_session(&session).await.map_err(unavailable)?;
        }
        None => {}
    }
    match store
        .lock_session(session_id, run_id, SESSION_LEASE)
        .await
        .map_err(unavailable)?
    {
        SessionLock::Acquired => {}
        SessionLock::Busy { run_id: holder } => {
            return Err((
                "session_busy",
                format!(
                    "session {session_id} already has a run in progress ({holder}); wait for it \
                     to finish or cancel it, then ask again"
                ),
            ));
        }
    }
    let history = if request.include_history {
        let limit = agent.settings().history_messages;
        store
            .history(session_id, limit)
            .await
            .map_err(unavailable)?
            .into_iter()
            .map(|stored| stored.message)
            .collect()
    } else {
        Vec::new()
    };
    let run = NewRun {
        id: run_id,
        session_id,
        user_id: user_id.to_string(),
        query: request.query.clone(),
        model: request.model.clone(),
        save_chat: request.save_chat,
        context: json!({
            "entity_id": request.context.entity_id,
            "workflow": request.context.workflow,
            "read_only": request.context.read_only,
        }),
        started_at: crate::clock::now(),
    };
    store.start_run(&run).await.map_err(unavailable)?;
    Ok(history)
}

async fn renew_lease(store: Arc<dyn Store>, session_id: Uuid, run_id: Uuid) {
    let mut ticks = tokio::time::interval(SESSION_LEASE / 3);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        if let Err(error) = store
            .renew_session_lock(session_id, run_id, SESSION_LEASE)
            .await
        {
            tracing::warn!(%session_id, %run_id, %error, "cannot renew the session lease");
        }
    }
}

/// A session's title: its first question, on one line, shortened.
fn title(query: &str) -> String {
    crate::machine::one_line(query, 80)
}

/// Why a paused run cannot resume.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResumeError {
    #[error("the agent has no store: only runs saved in a store can pause and resume")]
    NoStore,
    #[error("run {0} is not waiting for input")]
    NotPaused(Uuid),
    /// The answer does not fit what the run waits for; the run stays paused.
    #[error("{0}")]
    InvalidAnswer(String),
    #[error("the paused run cannot be read: {0}")]
    Corrupt(String),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A paused run, restored and given its answer, ready to be driven on.
pub struct Resumed {
    machine: crate::machine::RunMachine,
    step: crate::machine::Step,
    last_seq: u64,
    save_chat: bool,
    store: Arc<dyn Store>,
}

impl Resumed {
    pub fn run_id(&self) -> Uuid {
        self.machine.run_id()
    }

    pub fn session_id(&self) -> Uuid {
        self.machine.input().session_id
    }

    /// The seq of the last event before the pause; the resumed run's events follow it.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
}

impl Agent {
    /// Restores the paused run `run_id` from the store and applies `answer` (approvals or
    /// denials). Nothing runs yet: drive it with [`Agent::run_resumed`]. An answer that does
    /// not fit leaves the run paused.
    pub async fn resume(
        &self,
        run_id: Uuid,
        answer: &crate::machine::InputAnswer,
    ) -> Result<Resumed, ResumeError> {
        let (mut machine, last_seq, save_chat, store) = self.restore_paused(run_id).await?;
        let step = machine.resume(answer).map_err(ResumeError::InvalidAnswer)?;
        claim(store.as_ref(), run_id).await?;
        Ok(Resumed {
            machine,
            step,
            last_seq,
            save_chat,
            store,
        })
    }

    /// Cancels the paused run `run_id`: its waiting calls are skipped and it ends `cancelled`.
    pub async fn cancel_paused(&self, run_id: Uuid) -> Result<Resumed, ResumeError> {
        let (mut machine, last_seq, save_chat, store) = self.restore_paused(run_id).await?;
        let step = machine.cancel();
        claim(store.as_ref(), run_id).await?;
        Ok(Resumed {
            machine,
            step,
            last_seq,
            save_chat,
            store,
        })
    }

    /// Drives a resumed run to its end (or its next pause), saving each step and sending its
    /// events, numbered after the ones before the pause, to `sink`.
    pub async fn run_resumed(
        &self,
        resumed: Resumed,
        sink: Arc<dyn crate::driver::EventSink>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let Resumed {
            machine,
            step,
            last_seq,
            save_chat,
            store,
        } = resumed;
        let run_id = machine.run_id();
        let session_id = machine.input().session_id;
        let mut emitter = Emitter::resuming(run_id, last_seq, sink);
        let renewal = tokio::spawn(renew_lease(store.clone(), session_id, run_id));
        let persistence = Persistence {
            store,
            save_messages: save_chat,
            retry: self.settings().store_retry(),
        };
        let services = self.services().clone();
        let outcome = crate::driver::drive_from(
            machine,
            step,
            services,
            &mut emitter,
            cancel,
            Some(persistence),
        )
        .await;
        renewal.abort();
        outcome
    }

    async fn restore_paused(
        &self,
        run_id: Uuid,
    ) -> Result<(crate::machine::RunMachine, u64, bool, Arc<dyn Store>), ResumeError> {
        let store = self.store().cloned().ok_or(ResumeError::NoStore)?;
        let value = store
            .paused_run(run_id)
            .await?
            .ok_or(ResumeError::NotPaused(run_id))?;
        let paused: crate::machine::PausedRun = serde_json::from_value(value)
            .map_err(|error| ResumeError::Corrupt(error.to_string()))?;
        let save_chat = store
            .run(run_id)
            .await?
            .map(|run| run.save_chat)
            .unwrap_or(true);
        let policy = self
            .policy_for(&paused_context(&paused))
            .map_err(ResumeError::Corrupt)?;
        let machine = crate::machine::RunMachine::restore(
            paused.snapshot,
            policy,
            self.settings().clone(),
            self.catalog(),
            self.services().counter.clone(),
        )
        .map_err(ResumeError::Corrupt)?;
        Ok((machine, paused.last_seq, save_chat, store))
    }
}

/// Takes the paused run for this caller, or says it no longer waits (someone else resumed it).
async fn claim(store: &dyn Store, run_id: Uuid) -> Result<(), ResumeError> {
    if store.claim_paused_run(run_id).await? {
        Ok(())
    } else {
        Err(ResumeError::NotPaused(run_id))
    }
}

fn paused_context(paused: &crate::machine::PausedRun) -> crate::machine::RunContext {
    paused.snapshot.context().clone()
}
