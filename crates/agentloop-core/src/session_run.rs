//! A run backed by a store: the session is created if new and held for the run (a second run
//! of the same session is refused, never interleaved), the history is read from it, the question
//! is saved before the first LLM call, and every step after.

use std::sync::Arc;

use agentloop_protocol::ErrorCode;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    agent::{Agent, RunRequest},
    driver::drive,
    emitter::{Emitter, EventSink},
    machine::{Input, InvalidAnswer, OtherStateVersion, RunOutcome},
    policy::{DEFAULT_USER, UnknownWorkflow},
    step_writer::Persistence,
    store::{NewRun, NewSession, SESSION_LEASE, SessionLock, Store, StoreError},
};

/// Why a run could not begin. Nothing of it was saved, and no session is held.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// The session does not exist, or belongs to another user.
    #[error("session {0} not found")]
    SessionNotFound(Uuid),
    /// Another run holds the session.
    #[error(
        "session {session_id} already has a run in progress ({run_id}); wait for it to finish \
         or cancel it, then ask again"
    )]
    SessionBusy { session_id: Uuid, run_id: Uuid },
    /// The run's context names a workflow the agent does not have.
    #[error(transparent)]
    UnknownWorkflow(#[from] UnknownWorkflow),
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl StartError {
    /// The code of the run's `error` event, as the API documents it.
    pub fn code(&self) -> ErrorCode {
        match self {
            StartError::SessionNotFound(_) => ErrorCode::SessionNotFound,
            StartError::SessionBusy { .. } => ErrorCode::SessionBusy,
            StartError::UnknownWorkflow(_) => ErrorCode::UnknownWorkflow,
            StartError::Store(_) => ErrorCode::StoreUnavailable,
        }
    }
}

/// A run that has begun: with a store, its session is created if new and held for it, its
/// history read and its row written. Drive it with [`Agent::run_begun`]; a begun run that is
/// dropped instead gives its session back.
pub struct BegunRun {
    request: RunRequest,
    store: Option<Arc<dyn Store>>,
    /// Holds the session until the run is driven (or this is dropped).
    hold: Option<SessionHold>,
}

impl BegunRun {
    pub fn run_id(&self) -> Uuid {
        self.request.run_id.unwrap_or_default()
    }

    pub fn session_id(&self) -> Uuid {
        self.request.session_id.unwrap_or_default()
    }
}

/// A session taken for a run that has not been driven yet.
struct SessionHold {
    store: Arc<dyn Store>,
    session_id: Uuid,
    run_id: Uuid,
}

impl SessionHold {
    /// The run goes on: from now on its last step releases the session.
    fn keep(mut self) {
        self.run_id = Uuid::nil();
    }
}

impl Drop for SessionHold {
    fn drop(&mut self) {
        if self.run_id.is_nil() {
            return;
        }
        let (store, session_id, run_id) = (self.store.clone(), self.session_id, self.run_id);
        // No runtime means the process is ending; the lease then frees the session.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(error) = store.unlock_session(session_id, run_id).await {
                    tracing::warn!(%session_id, %run_id, %error, "cannot give the session back");
                }
            });
        }
    }
}

impl Agent {
    /// Begins `request`: checks its context, and with a store creates the session if new,
    /// takes it for the run (a second run of a session is refused, never interleaved), reads
    /// its history and records the run. Nothing is emitted yet.
    pub async fn begin(&self, mut request: RunRequest) -> Result<BegunRun, StartError> {
        let session_id = *request.session_id.get_or_insert_with(Uuid::now_v7);
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        self.policy_for(&request.context)?;
        let Some(store) = self.store().cloned() else {
            return Ok(BegunRun {
                request,
                store: None,
                hold: None,
            });
        };
        let user_id = request
            .context
            .user_id
            .get_or_insert_with(|| DEFAULT_USER.to_string())
            .clone();
        let hold = take_session(store.clone(), &request, session_id, run_id, &user_id).await?;
        // From here on, an error gives the session back (through `hold`).
        let history = if request.include_history {
            let limit = self.settings().history_messages;
            store
                .history(session_id, limit)
                .await?
                .into_iter()
                .map(|stored| stored.message)
                .collect()
        } else {
            Vec::new()
        };
        let run = NewRun {
            id: run_id,
            session_id,
            user_id,
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
        store.start_run(&run).await?;
        if request.include_history {
            request.history = history;
        }
        Ok(BegunRun {
            request,
            store: Some(store),
            hold: Some(hold),
        })
    }

    /// Drives a begun run to its end, saving each step (with a store) and sending its events
    /// to `sink`.
    pub async fn run_begun(
        &self,
        begun: BegunRun,
        sink: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let BegunRun {
            request,
            store,
            hold,
        } = begun;
        let mut emitter = Emitter::new(request.run_id.unwrap_or_default(), sink);
        let save_chat = request.save_chat;
        let machine = self.prepare(request);
        let Some(store) = store else {
            return drive(machine, self.services().clone(), &mut emitter, cancel, None).await;
        };
        if let Some(hold) = hold {
            hold.keep();
        }
        self.drive_saved(machine, None, store, save_chat, &mut emitter, cancel)
            .await
    }

    /// Drives `machine` (from `step`, or from its start) with its steps saved in `store`,
    /// renewing its session lease while it works.
    async fn drive_saved(
        &self,
        machine: crate::machine::RunMachine,
        step: Option<crate::machine::Step>,
        store: Arc<dyn Store>,
        save_chat: bool,
        emitter: &mut Emitter,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let _renewal =
            LeaseRenewal::start(store.clone(), machine.input().session_id, machine.run_id());
        let persistence = Some(Persistence {
            store,
            save_messages: save_chat,
            retry: self.settings().store_retry(),
        });
        let services = self.services().clone();
        match step {
            Some(step) => {
                crate::driver::drive_from(machine, step, services, emitter, cancel, persistence)
                    .await
            }
            None => drive(machine, services, emitter, cancel, persistence).await,
        }
    }
}

impl Agent {
    /// Runs to the end in the current task, sending events to `sink`. With a store, the run is
    /// saved step by step in its session.
    pub async fn run_with_sink(
        &self,
        mut request: RunRequest,
        sink: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        let mut emitter = Emitter::new(run_id, sink);
        match self.store() {
            Some(_) => run_with_store(self, request, &mut emitter, cancel).await,
            None => {
                let machine = self.prepare(request);
                drive(machine, self.services().clone(), &mut emitter, cancel, None).await
            }
        }
    }
}

/// Runs `request` with `store`: see the module documentation.
pub(crate) async fn run_with_store(
    agent: &Agent,
    request: RunRequest,
    emitter: &mut Emitter,
    cancel: CancellationToken,
) -> RunOutcome {
    let unstarted = request.clone();
    match agent.begin(request).await {
        Ok(begun) => {
            let sink = emitter.sink();
            agent.run_begun(begun, sink, cancel).await
        }
        Err(error) => {
            // Nothing is saved: the run never started. Driving the ended machine only emits
            // its events (run_started, error, done).
            let mut machine = agent.prepare(unstarted);
            let _ = machine.fail(error.code(), error.to_string());
            let services = agent.services().clone();
            drive(machine, services, emitter, CancellationToken::new(), None).await
        }
    }
}

/// Creates the session if new and takes it for `run_id`.
async fn take_session(
    store: Arc<dyn Store>,
    request: &RunRequest,
    session_id: Uuid,
    run_id: Uuid,
    user_id: &str,
) -> Result<SessionHold, StartError> {
    match store.session(session_id).await? {
        Some(session) if session.user_id != user_id => {
            return Err(StartError::SessionNotFound(session_id));
        }
        Some(_) => {}
        None if request.existing_session => {
            return Err(StartError::SessionNotFound(session_id));
        }
        None if request.save_chat => {
            let session = NewSession {
                id: session_id,
                user_id: user_id.to_string(),
                title: title(&request.query),
            };
            store.create_session(&session).await?;
        }
        None => {}
    }
    match store
        .lock_session(session_id, run_id, SESSION_LEASE)
        .await?
    {
        SessionLock::Acquired => Ok(SessionHold {
            store,
            session_id,
            run_id,
        }),
        SessionLock::Busy { run_id: holder } => Err(StartError::SessionBusy {
            session_id,
            run_id: holder,
        }),
    }
}

/// Renews a run's session lease while it lives; stops when dropped.
struct LeaseRenewal(tokio::task::JoinHandle<()>);

impl LeaseRenewal {
    fn start(store: Arc<dyn Store>, session_id: Uuid, run_id: Uuid) -> LeaseRenewal {
        LeaseRenewal(tokio::spawn(renew_lease(store, session_id, run_id)))
    }
}

impl Drop for LeaseRenewal {
    fn drop(&mut self) {
        self.0.abort();
    }
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
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    #[error("the agent has no store: only runs saved in a store can pause and resume")]
    NoStore,
    #[error("run {0} is not waiting for input")]
    NotPaused(Uuid),
    /// The answer does not fit what the run waits for; the run stays paused.
    #[error(transparent)]
    InvalidAnswer(#[from] InvalidAnswer),
    #[error("the paused run cannot be read: {0}")]
    Corrupt(#[from] CorruptRun),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a stored paused run cannot be resumed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptRun {
    #[error("{0}")]
    Unreadable(#[from] serde_json::Error),
    #[error(transparent)]
    OtherVersion(#[from] OtherStateVersion),
    /// Its workflow is no longer configured.
    #[error(transparent)]
    UnknownWorkflow(#[from] UnknownWorkflow),
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
        let now = crate::clock::now();
        let step = machine.resume_at(answer, now)?;
        if let Some(log) = &self.services().inputs {
            log.record(machine.run_id(), &Input::Answer(answer.clone()), now);
        }
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
        let step =
            crate::driver::feed(&mut machine, self.services().inputs.as_ref(), Input::Cancel)
                .ok_or(ResumeError::NotPaused(run_id))?;
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
        sink: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let Resumed {
            machine,
            step,
            last_seq,
            save_chat,
            store,
        } = resumed;
        let mut emitter = Emitter::resuming(machine.run_id(), last_seq, sink);
        self.drive_saved(machine, Some(step), store, save_chat, &mut emitter, cancel)
            .await
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
        let paused: crate::machine::PausedRun =
            serde_json::from_value(value).map_err(CorruptRun::from)?;
        let save_chat = store
            .run(run_id)
            .await?
            .map(|run| run.save_chat)
            .unwrap_or(true);
        let policy = self
            .policy_for(&paused_context(&paused))
            .map_err(CorruptRun::from)?;
        let machine = crate::machine::RunMachine::restore(
            paused.state,
            policy,
            self.settings().clone(),
            self.catalog(),
            self.services().counter.clone(),
        )
        .map_err(CorruptRun::from)?;
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
    paused.state.context().clone()
}
