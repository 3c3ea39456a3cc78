//! Runs that go on from the store: a paused run given its answer, a run left behind by another
//! instance and adopted, a run whose state cannot be read ended `failed`. Each is restored from
//! its last saved step and driven like a run that begins (`session_run`).

use std::sync::Arc;

use agentloop_protocol::{ErrorCode, ResumeReason};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    agent::Agent,
    driver::DriveFrom,
    emitter::{Emitter, EventSink},
    machine::{
        Handled, Input, InvalidAnswer, OtherStateVersion, RunOutcome, RunState, UnreadableState,
    },
    policy::{DEFAULT_USER, UnknownWorkflow},
    session_run::Saving,
    store::{Store, StoreError},
    trace::RunTrace,
};

/// Why a saved run cannot go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ResumeError {
    #[error("the agent has no store: only runs saved in a store can pause and resume")]
    NoStore,
    #[error("run {0} not found")]
    NotFound(Uuid),
    #[error("run {0} is not waiting for input")]
    NotPaused(Uuid),
    /// The run ended, or another instance that is alive works on it (or took it first).
    #[error(
        "run {0} is not left behind: it ended, or an instance that is alive works on it (an \
         owner that stopped is known to be gone once it has been silent for the run lease)"
    )]
    NotAdoptable(Uuid),
    /// The answer does not fit what the run waits for; the run stays paused.
    #[error(transparent)]
    InvalidAnswer(#[from] InvalidAnswer),
    #[error("the saved run cannot be read: {0}")]
    Corrupt(#[from] CorruptRun),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a stored run cannot go on.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CorruptRun {
    #[error(transparent)]
    Unreadable(#[from] UnreadableState),
    /// Its workflow is no longer configured.
    #[error(transparent)]
    UnknownWorkflow(#[from] UnknownWorkflow),
    /// The process that ran it stopped before its first step was saved.
    #[error("the run stopped before its first step was saved: there is nothing to go on from")]
    NoCheckpoint,
}

impl From<OtherStateVersion> for CorruptRun {
    fn from(error: OtherStateVersion) -> Self {
        CorruptRun::Unreadable(error.into())
    }
}

/// A saved run, restored and given what makes it go on (an answer, a cancellation, a
/// resumption), ready to be driven.
pub struct Resumed {
    machine: crate::machine::RunMachine,
    step: crate::machine::Step,
    last_seq: u64,
    save_chat: bool,
    store: Arc<dyn Store>,
    trace: RunTrace,
}

impl Resumed {
    pub fn run_id(&self) -> Uuid {
        self.machine.run_id()
    }

    pub fn session_id(&self) -> Uuid {
        self.machine.input().session_id
    }

    /// Who the run is for.
    pub fn user_id(&self) -> &str {
        self.machine
            .input()
            .context
            .user_id
            .as_deref()
            .unwrap_or(DEFAULT_USER)
    }

    /// The seq of the last saved event; the run's next events follow it.
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }
}

/// A saved run as the store gave it back.
struct Restored {
    machine: crate::machine::RunMachine,
    status: agentloop_protocol::RunStatus,
    last_seq: u64,
    save_chat: bool,
    store: Arc<dyn Store>,
    /// The run's saved trace context (a W3C `traceparent`).
    traceparent: Option<String>,
}

impl Agent {
    /// Restores the paused run `run_id` from the store and applies `answer` (approvals or
    /// denials, or an answer to a question). Nothing runs yet: drive it with
    /// [`Agent::run_resumed`]. An answer that does not fit leaves the run paused.
    pub async fn resume(
        &self,
        run_id: Uuid,
        answer: &crate::machine::InputAnswer,
    ) -> Result<Resumed, ResumeError> {
        let mut restored = self.restore_paused(run_id).await?;
        // Through the machine's one way in, so that the input log sees the answer.
        let step = match crate::driver::feed(
            &mut restored.machine,
            self.services().inputs.as_ref(),
            Input::Answer(answer.clone()),
        ) {
            Handled::Next(step) => step,
            Handled::AnswerRefused(refused) => return Err(refused.into()),
            _ => return Err(InvalidAnswer::NotWaiting.into()),
        };
        self.claim(&restored, run_id).await?;
        Ok(restored.with_step(self, step))
    }

    /// Cancels the paused run `run_id`: its waiting calls are skipped and it ends `cancelled`.
    pub async fn cancel_paused(&self, run_id: Uuid) -> Result<Resumed, ResumeError> {
        let mut restored = self.restore_paused(run_id).await?;
        let step = crate::driver::feed(
            &mut restored.machine,
            self.services().inputs.as_ref(),
            Input::Cancel,
        )
        .step()
        .ok_or(ResumeError::NotPaused(run_id))?;
        self.claim(&restored, run_id).await?;
        Ok(restored.with_step(self, step))
    }

    /// Takes over the run `run_id`, left in progress by an instance that stopped or has been
    /// silent for longer than `silent_for` (a crash, a deploy, a handover), and makes it go on
    /// from its last saved step: `run_resumed` marks the seam, an LLM call under way is made
    /// again, and tool calls that may have been running are run again only when their tool is
    /// read-only or idempotent (see the `durability` module). Exactly one caller wins a run,
    /// however many try at once. Drive it with [`Agent::run_resumed`].
    pub async fn adopt(
        &self,
        run_id: Uuid,
        reason: ResumeReason,
        silent_for: std::time::Duration,
    ) -> Result<Resumed, ResumeError> {
        let store = self.store().cloned().ok_or(ResumeError::NoStore)?;
        let instance = self.instance_id().unwrap_or("library").to_string();
        if !store.adopt_run(run_id, &instance, silent_for).await? {
            return Err(ResumeError::NotAdoptable(run_id));
        }
        let mut restored = self.restore(run_id).await?;
        if restored.status != agentloop_protocol::RunStatus::Running {
            return Err(ResumeError::NotAdoptable(run_id));
        }
        // A run whose process stopped before its first step was saved starts from its beginning.
        let step = if restored.machine.not_started() {
            crate::driver::start(&mut restored.machine, self.services())
        } else {
            let input = Input::Resume { reason, instance };
            crate::driver::feed(
                &mut restored.machine,
                self.services().inputs.as_ref(),
                input,
            )
            .step()
            .ok_or(ResumeError::NotAdoptable(run_id))?
        };
        Ok(restored.with_step(self, step))
    }

    /// Drives a resumed run to its end (or its next pause), saving each step and sending its
    /// events, numbered after the ones saved before, to `sink`.
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
            trace,
        } = resumed;
        let mut emitter = Emitter::resuming(machine.run_id(), last_seq, sink);
        let saving = Saving {
            store,
            save_chat,
            history_window: None,
            // A run that goes on from the store has its input there.
            input_saved: true,
            trace,
        };
        self.drive_saved(machine, DriveFrom::Step(step), saving, &mut emitter, cancel)
            .await
    }

    async fn restore_paused(&self, run_id: Uuid) -> Result<Restored, ResumeError> {
        let restored = self.restore(run_id).await?;
        if restored.status != agentloop_protocol::RunStatus::AwaitingInput
            || !restored.machine.awaits_input()
        {
            return Err(ResumeError::NotPaused(run_id));
        }
        Ok(restored)
    }

    /// The run as its last saved step left it.
    async fn restore(&self, run_id: Uuid) -> Result<Restored, ResumeError> {
        let store = self.store().cloned().ok_or(ResumeError::NoStore)?;
        let saved = store
            .saved_run(run_id)
            .await?
            .ok_or(ResumeError::NotFound(run_id))?;
        let (Some(mut input), Some(head)) = (saved.input, saved.head) else {
            return Err(CorruptRun::NoCheckpoint.into());
        };
        // A history read from the session is read again, as it was when the run began.
        if let Some(window) = input
            .get("history_window")
            .and_then(serde_json::Value::as_u64)
        {
            let window = usize::try_from(window).unwrap_or(usize::MAX);
            let history: Vec<agentloop_protocol::ChatMessage> = store
                .history_before_run(saved.session_id, window, run_id)
                .await?
                .into_iter()
                .map(|stored| stored.message)
                .collect();
            input["history"] = serde_json::to_value(history)
                .map_err(|error| CorruptRun::Unreadable(UnreadableState::Json(error)))?;
        }
        let state = RunState::from_parts(input, head, saved.turn, saved.records)
            .map_err(CorruptRun::from)?;
        let policy = self.policy_for(state.context()).map_err(CorruptRun::from)?;
        let machine = crate::machine::RunMachine::restore(
            state,
            policy,
            self.settings().clone(),
            self.catalog(),
            self.services().counter.clone(),
        );
        Ok(Restored {
            machine,
            status: saved.status,
            last_seq: saved.last_seq,
            save_chat: saved.save_chat,
            store,
            traceparent: saved.traceparent,
        })
    }

    /// Takes the paused run for this instance, or says it no longer waits (someone else
    /// resumed it).
    async fn claim(&self, restored: &Restored, run_id: Uuid) -> Result<(), ResumeError> {
        if restored
            .store
            .claim_paused_run(run_id, self.instance_id())
            .await?
        {
            Ok(())
        } else {
            Err(ResumeError::NotPaused(run_id))
        }
    }
}

impl Restored {
    /// `agent` starts the span of the run's next stretch, in the trace it was saved with.
    fn with_step(self, agent: &Agent, step: crate::machine::Step) -> Resumed {
        let run_id = self.machine.run_id();
        let session_id = self.machine.input().session_id;
        let model = self.machine.input().model.as_deref();
        let trace = agent.start_trace(run_id, session_id, model, self.traceparent.as_deref());
        Resumed {
            trace,
            machine: self.machine,
            step,
            last_seq: self.last_seq,
            save_chat: self.save_chat,
            store: self.store,
        }
    }
}

impl Agent {
    /// Ends `run_id` failed, in the store, when it cannot go on (its saved state cannot be
    /// read): an `error` and a `done` event after its last saved one, and its session freed.
    pub(crate) async fn end_unrecoverable(
        &self,
        run_id: Uuid,
        message: &str,
    ) -> Result<(), StoreError> {
        let Some(store) = self.store() else {
            return Ok(());
        };
        let Some(run) = store.run(run_id).await? else {
            return Err(StoreError::NotFound(format!("run {run_id}")));
        };
        let last_seq = store
            .events(run_id, 0)
            .await?
            .last()
            .map_or(0, |event| event.seq);
        let failure = crate::machine::RunFailure {
            code: ErrorCode::InternalError,
            message: format!("the run cannot go on: {message}"),
        };
        let kinds = [
            agentloop_protocol::EventKind::Error {
                code: failure.code,
                message: failure.message.clone(),
            },
            agentloop_protocol::EventKind::Done {
                status: agentloop_protocol::RunStatus::Failed,
                iterations: run.iterations,
                tools_used: run.tools_used,
                message_id: None,
                usage: run.usage,
                should_refresh: false,
                output: None,
            },
        ];
        let events = (last_seq + 1..)
            .zip(kinds)
            .map(|(seq, kind)| agentloop_protocol::Event {
                run_id,
                seq,
                parent_run_id: None,
                kind,
            })
            .collect();
        let step = crate::store::StepRecord {
            run_id,
            session_id: run.session_id,
            events,
            progress: crate::machine::RunProgress {
                iterations: run.iterations,
                tools_used: run.tools_used,
                usage: run.usage,
            },
            end: Some(crate::store::RunEnd {
                output: None,
                status: agentloop_protocol::RunStatus::Failed,
                answer_message_id: None,
                failure: Some(failure),
                finalize_reason: None,
                finished_at: crate::clock::now(),
            }),
            owner: self.instance_id().map(str::to_string),
            ..Default::default()
        };
        store.save_step(&step).await
    }
}
