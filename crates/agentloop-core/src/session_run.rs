//! A run backed by a store: the session is created if new and held for the run (a second run
//! of the same session is refused, never interleaved), the history is read from it, the question
//! is saved before the first LLM call, and every step after.

use std::sync::Arc;

use agentloop_protocol::{ErrorCode, Event};
use futures::future::Either;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    agent::{Agent, RunRequest},
    driver::{DriveFrom, Driven, drive, drive_traced},
    emitter::{Emitter, EventSink},
    lease::LeaseRenewal,
    machine::{RunInput, RunMachine, RunOutcome, Step, first_checkpoint},
    policy::{DEFAULT_USER, UnknownWorkflow},
    step_writer::{Persistence, first_record},
    store::{
        Checkpoint, MissingSession, NewRun, NewSession, RunBegin, RunStart, SESSION_LEASE, Store,
        StoreError,
    },
    trace::RunTrace,
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
    /// What the run starts from (with its history, when read from the session): built once,
    /// at the beginning, and saved with it; or, for a run on a new session, its machine
    /// started already.
    beginning: Beginning,
    save_chat: bool,
    /// The dialogue messages of history read from the session, when it was.
    history_window: Option<usize>,
    store: Option<Arc<dyn Store>>,
    /// Holds the session until the run is driven (or this is dropped).
    hold: Option<SessionHold>,
    /// What the run starts from was saved with its beginning.
    input_saved: bool,
    trace: RunTrace,
}

impl BegunRun {
    pub fn run_id(&self) -> Uuid {
        self.input().run_id
    }

    pub fn session_id(&self) -> Uuid {
        self.input().session_id
    }

    fn input(&self) -> &RunInput {
        match &self.beginning {
            Beginning::Input(input) => input,
            Beginning::Started(started) => started.machine.input(),
        }
    }
}

/// Where a begun run starts.
enum Beginning {
    Input(Box<RunInput>),
    /// A run on a new session, whose first step does not depend on a history read from the
    /// store: its machine was started, and its first step saved with its beginning.
    Started(Box<Started>),
}

/// A run's machine, started, with its first step and that step's events (saved, not sent yet).
struct Started {
    machine: RunMachine,
    step: Step,
    events: Vec<Event>,
}

/// Where and how a run's steps are saved.
pub(crate) struct Saving {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) save_chat: bool,
    pub(crate) history_window: Option<usize>,
    /// What the run starts from is in the store already (saved with its beginning, or by an
    /// earlier step): its first step does not send it again.
    pub(crate) input_saved: bool,
    pub(crate) trace: RunTrace,
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
    /// its history and records the run. A run on a new session (the request names none) is
    /// started at once, and its first step saved with its beginning, in the same commit.
    /// Nothing is emitted yet.
    pub async fn begin(&self, mut request: RunRequest) -> Result<BegunRun, StartError> {
        // A session the request does not name (or made for it) is new: no history to read.
        let session_id = request.new_session_id();
        let new_session = request.session_is_new && !request.existing_session;
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        self.policy_for(&request.context)?;
        let Some(store) = self.store().cloned() else {
            let trace = self.start_trace(
                run_id,
                session_id,
                request.model.as_deref(),
                request.traceparent.as_deref(),
            );
            let save_chat = request.save_chat;
            let input = self.run_input(request);
            return Ok(BegunRun {
                beginning: Beginning::Input(Box::new(input)),
                save_chat,
                history_window: None,
                store: None,
                hold: None,
                input_saved: false,
                trace,
            });
        };
        let user_id = request
            .context
            .user_id
            .get_or_insert_with(|| DEFAULT_USER.to_string())
            .clone();
        // Started before the run is saved, so that the run is saved with it: after a restart,
        // the run goes on in this trace.
        let trace = self.start_trace(
            run_id,
            session_id,
            request.model.as_deref(),
            request.traceparent.as_deref(),
        );
        let (existing_session, save_chat, include_history, supersede) = (
            request.existing_session,
            request.save_chat,
            request.include_history,
            request.supersede,
        );
        let history_window = include_history.then(|| self.settings().history_messages);
        // The workflow was checked above.
        let input = self.run_input(request);
        // Saved with the run's row: should this process stop before the run's first step is
        // saved, the instance that adopts the run starts it from here.
        let (input, first) = match new_session {
            // Its first step is saved with its beginning instead.
            true => (input, None),
            false => {
                let (input, first) = first_checkpoint(input, history_window);
                (input, Some(first))
            }
        };
        let checkpoint = match first {
            None => None,
            Some(Ok((fixed, head))) => Some(Checkpoint {
                input: Some(fixed),
                head,
                last_seq: 0,
                turn: Vec::new(),
            }),
            Some(Err(error)) => {
                tracing::warn!(%run_id, %error, "the run's beginning cannot be written; it is saved from its first step");
                None
            }
        };
        let mut start = RunStart {
            run: NewRun {
                id: run_id,
                session_id,
                user_id: user_id.clone(),
                query: input.query.clone(),
                model: input.model.clone(),
                save_chat,
                context: json!({
                    "entity_id": input.context.entity_id,
                    "workflow": input.context.workflow,
                    "read_only": input.context.read_only,
                }),
                started_at: input.started_at,
                owner: self.instance_id().map(str::to_string),
                traceparent: trace.traceparent(),
            },
            if_missing: if existing_session {
                MissingSession::Refuse
            } else if save_chat {
                MissingSession::Create(NewSession {
                    id: session_id,
                    user_id,
                    title: title(&input.query),
                })
            } else {
                MissingSession::Ignore
            },
            lease: SESSION_LEASE,
            history: history_window,
            checkpoint,
            first_step: None,
            session_is_new: new_session,
            supersede,
        };
        // On a new session the machine starts now, and its first step (the question, usually
        // with the first LLM call asked for) is saved in the same commit as the run's beginning.
        let mut beginning = match new_session {
            true => {
                let started = self.start_new(input, &store, save_chat, history_window);
                match started {
                    Ok((started, record)) => {
                        start.first_step = Some(record);
                        Beginning::Started(Box::new(started))
                    }
                    Err(error) => {
                        let error = StartError::Store(error);
                        trace.refused(error.code().as_str(), &error.to_string());
                        return Err(error);
                    }
                }
            }
            false => Beginning::Input(Box::new(input)),
        };
        let begun = match store.begin_run(&start).await {
            Ok(RunBegin::Begun {
                history,
                checkpoint_saved,
            }) => Ok((history, checkpoint_saved)),
            Ok(RunBegin::SessionNotFound) => Err(StartError::SessionNotFound(session_id)),
            Ok(RunBegin::SessionBusy { run_id: holder }) => Err(StartError::SessionBusy {
                session_id,
                run_id: holder,
            }),
            Err(error) => Err(StartError::Store(error)),
        };
        let (history, input_saved) = match begun {
            Ok(begun) => begun,
            Err(error) => {
                trace.refused(error.code().as_str(), &error.to_string());
                return Err(error);
            }
        };
        // From here on, dropping the begun run gives the session back.
        let hold = SessionHold {
            store: store.clone(),
            session_id,
            run_id,
        };
        if include_history && let Beginning::Input(input) = &mut beginning {
            input.history = history.into_iter().map(|stored| stored.message).collect();
        }
        Ok(BegunRun {
            beginning,
            save_chat,
            history_window: start.history,
            store: Some(store),
            hold: Some(hold),
            input_saved,
            trace,
        })
    }

    /// Starts the machine of a run on a new session: its first step, and that step's record to
    /// save with the run's beginning.
    fn start_new(
        &self,
        input: RunInput,
        store: &Arc<dyn Store>,
        save_chat: bool,
        history_window: Option<usize>,
    ) -> Result<(Started, crate::store::StepRecord), StoreError> {
        let persistence = self.persistence(store.clone(), save_chat, history_window, false);
        let mut machine = self.machine_for(input);
        let step = crate::driver::start(&mut machine, self.services());
        let telemetry = self.services().telemetry.as_ref();
        let record = first_record(&persistence, &mut machine, &step, telemetry)?;
        let events = record.events.clone();
        Ok((
            Started {
                machine,
                step,
                events,
            },
            record,
        ))
    }

    /// Drives a begun run to its end, saving each step (with a store) and sending its events
    /// to `sink`.
    pub async fn run_begun(
        &self,
        begun: BegunRun,
        sink: Arc<dyn EventSink>,
        cancel: CancellationToken,
    ) -> RunOutcome {
        let mut emitter;
        // Made in a block of its own: what it borrows or moves on (the machine, half a
        // kilobyte) then takes no room in this future while the run is driven.
        let drive = {
            let BegunRun {
                beginning,
                save_chat,
                history_window,
                store,
                hold,
                input_saved,
                trace,
            } = begun;
            let (machine, from, events) = match beginning {
                Beginning::Input(input) => (self.machine_for(*input), DriveFrom::Start, Vec::new()),
                Beginning::Started(started) => {
                    let Started {
                        machine,
                        step,
                        events,
                    } = *started;
                    (machine, DriveFrom::Saved(step), events)
                }
            };
            emitter = Emitter::new(machine.run_id(), sink);
            // The first step's events, saved with the run's beginning.
            if !events.is_empty() {
                emitter.send_saved(events);
            }
            match store {
                None => {
                    let run = Driven::new(machine, self.services_traced(trace), None);
                    Either::Left(drive_traced(run, from, &mut emitter, cancel))
                }
                Some(store) => {
                    if let Some(hold) = hold {
                        hold.keep();
                    }
                    let saving = Saving {
                        store,
                        save_chat,
                        history_window,
                        input_saved,
                        trace,
                    };
                    Either::Right(self.drive_saved(machine, from, saving, &mut emitter, cancel))
                }
            }
        };
        drive.await
    }

    /// Drives `machine` (from `from`) with its steps saved in `store`, renewing its session
    /// lease while it works. Not an `async fn`: see [`drive`].
    pub(crate) fn drive_saved(
        &self,
        machine: RunMachine,
        from: DriveFrom,
        saving: Saving,
        emitter: &mut Emitter,
        cancel: CancellationToken,
    ) -> impl Future<Output = RunOutcome> + Send {
        let Saving {
            store,
            save_chat,
            history_window,
            input_saved,
            trace,
        } = saving;
        let lease =
            LeaseRenewal::in_store(store.clone(), machine.input().session_id, machine.run_id());
        let persistence = Some(self.persistence(store, save_chat, history_window, input_saved));
        let mut run = Driven::new(machine, self.services_traced(trace), persistence);
        run.lease = Some(lease);
        drive_traced(run, from, emitter, cancel)
    }

    /// Where and how a run's steps are saved.
    fn persistence(
        &self,
        store: Arc<dyn Store>,
        save_chat: bool,
        history_window: Option<usize>,
        input_saved: bool,
    ) -> Persistence {
        Persistence {
            store,
            save_messages: save_chat,
            history_window,
            retry: self.settings().store_retry(),
            owner: self.instance_id().map(str::to_string),
            input_saved,
            handover: self.handover_signal(),
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
                let session_id = *request.session_id.get_or_insert_with(Uuid::now_v7);
                let trace = self.start_trace(
                    run_id,
                    session_id,
                    request.model.as_deref(),
                    request.traceparent.as_deref(),
                );
                let machine = self.prepare(request);
                let services = self.services_traced(trace);
                drive(machine, services, &mut emitter, cancel, None).await
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
            let mut input = agent.run_input(unstarted);
            input.refused = Some(crate::machine::RunFailure {
                code: error.code(),
                message: error.to_string(),
            });
            let machine = agent.machine_for(input);
            let services = agent.services().clone();
            drive(machine, services, emitter, CancellationToken::new(), None).await
        }
    }
}

/// A session's title: its first question, on one line, shortened.
fn title(query: &str) -> String {
    crate::machine::one_line(query, 80)
}
