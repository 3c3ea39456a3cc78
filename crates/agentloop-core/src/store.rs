//! Memory: what a store must keep so that sessions survive restarts and runs can be followed,
//! replayed and resumed. Implemented on SQL databases by `agentloop-store`.

use std::{sync::Arc, time::Duration};

use agentloop_protocol::{
    Event, FinalizeReason, RunInfo, RunStatus, SessionInfo, SessionMessage, ToolExecutionRecord,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use uuid::Uuid;

use crate::machine::{RunFailure, RunProgress};

/// How long a run holds its session without renewing; renewed at a third of it while it works,
/// so a crashed process frees its sessions within this time.
pub const SESSION_LEASE: Duration = Duration::from_secs(90);

/// The cause of a [`StoreError`] (a database driver's error), kept for its chain
/// ([`std::error::Error::source`]) and shared so that the error stays `Clone`.
pub type ErrorSource = Arc<dyn std::error::Error + Send + Sync>;

/// Why a store operation failed. The message says what to check or fix; the cause, when the
/// database gave one, is the error's `source()`.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The database cannot be reached or opened, or cannot take a write for now; the message
    /// says which and how to fix it.
    #[error("{message}")]
    Unavailable {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// A query failed.
    #[error("store query failed: {message}")]
    Query {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    /// What was stored cannot be read back (a newer schema, a corrupted row).
    #[error("stored data cannot be read: {message}")]
    Corrupt {
        message: String,
        #[source]
        source: Option<ErrorSource>,
    },
    #[error("{0} not found")]
    NotFound(String),
    /// The run belongs to another instance now (it was adopted while this one was silent): this
    /// instance must stop working on it without writing anything more.
    #[error("{0}")]
    NotOwner(String),
}

impl StoreError {
    pub fn unavailable(message: impl Into<String>) -> Self {
        StoreError::Unavailable {
            message: message.into(),
            source: None,
        }
    }

    pub fn query(message: impl Into<String>) -> Self {
        StoreError::Query {
            message: message.into(),
            source: None,
        }
    }

    pub fn corrupt(message: impl Into<String>) -> Self {
        StoreError::Corrupt {
            message: message.into(),
            source: None,
        }
    }

    /// The same error, caused by `cause`.
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        match &mut self {
            StoreError::Unavailable { source, .. }
            | StoreError::Query { source, .. }
            | StoreError::Corrupt { source, .. } => *source = Some(Arc::new(cause)),
            StoreError::NotFound(_) | StoreError::NotOwner(_) => {}
        }
        self
    }

    /// What went wrong, without the prefix of its kind.
    pub fn message(&self) -> &str {
        match self {
            StoreError::Unavailable { message, .. }
            | StoreError::Query { message, .. }
            | StoreError::Corrupt { message, .. }
            | StoreError::NotFound(message)
            | StoreError::NotOwner(message) => message,
        }
    }

    /// Whether trying again later may succeed (the database is down or unreachable), as
    /// opposed to a statement it refuses or data it cannot read.
    pub fn is_transient(&self) -> bool {
        matches!(self, StoreError::Unavailable { .. })
    }
}

/// Equal when of the same kind with the same message; the causes are not compared.
impl PartialEq for StoreError {
    fn eq(&self, other: &Self) -> bool {
        std::mem::discriminant(self) == std::mem::discriminant(other)
            && self.message() == other.message()
    }
}

/// A session to create.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSession {
    pub id: Uuid,
    pub user_id: String,
    pub title: String,
}

/// A run that begins.
#[derive(Debug, Clone, PartialEq)]
pub struct NewRun {
    pub id: Uuid,
    pub session_id: Uuid,
    pub user_id: String,
    pub query: String,
    pub model: Option<String>,
    /// When false, the run's messages are not added to the session.
    pub save_chat: bool,
    /// The run's context (entity, workflow, read-only), as JSON.
    pub context: Value,
    pub started_at: DateTime<Utc>,
    /// The instance that works on the run ([`Instance`]); `None` for a run no instance answers
    /// for (it is never adopted, only resumed by hand).
    pub owner: Option<String>,
    /// The run's span as a W3C `traceparent` (with a tracer): a run that goes on after a pause
    /// or a restart continues this trace.
    pub traceparent: Option<String>,
}

/// A run's beginning, written at once by [`Store::begin_run`]: its session found (or created),
/// taken for the run, its history read, and the run recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct RunStart {
    pub run: NewRun,
    /// What to do when the run's session does not exist.
    pub if_missing: MissingSession,
    /// How long the session is the run's before its lease must be renewed.
    pub lease: Duration,
    /// Read the history the run sees ([`Store::history`] with this many dialogue messages).
    pub history: Option<usize>,
    /// What the run starts from and its state before its first step (seq 0), saved with its
    /// row: a run whose process stops before its first step is saved is started again from it
    /// by the instance that adopts it. A store that cannot write it with the row leaves it out
    /// (the trait's default does); such a run then ends failed when adopted.
    pub checkpoint: Option<Checkpoint>,
    /// The run's first step, saved in the same commit as its beginning (a run on a new session,
    /// whose first step does not depend on a history read from the store). Its checkpoint
    /// replaces [`RunStart::checkpoint`]. Written only when the run begins; its events are
    /// emitted once `begin_run` returns.
    pub first_step: Option<StepRecord>,
    /// The session's id was made for this run (the request named none): it cannot exist yet,
    /// so a store may create it (as `if_missing` says) without looking it up first.
    pub session_is_new: bool,
    /// The run answers the session's last question again (the AI SDK's regenerate): the last
    /// exchange is marked superseded by the run ([`Store::supersede_messages`]) once the
    /// session is taken, before the history is read, so that neither the model nor a listing
    /// sees it twice.
    pub supersede: Option<Supersede>,
}

/// Which of a session's exchanges a run replaces ([`RunStart::supersede`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Supersede {
    /// The run whose exchange is replaced, with every later one; when `None`, or when it has
    /// no current message in the session, the session's last run that saves its chat.
    pub from_run: Option<Uuid>,
}

impl RunStart {
    /// Whether the first step given with the run saves what the run starts from.
    pub fn first_step_saves_input(&self) -> bool {
        self.first_step
            .as_ref()
            .and_then(|step| step.checkpoint.as_ref())
            .is_some_and(|checkpoint| checkpoint.input.is_some())
    }
}

/// What a run does when its session does not exist.
#[derive(Debug, Clone, PartialEq)]
pub enum MissingSession {
    /// The run was meant for an existing session: it is refused.
    Refuse,
    /// The session is created with it (a run that saves its chat).
    Create(NewSession),
    /// The run goes on without a session row (it saves nothing to the session).
    Ignore,
}

/// How [`Store::begin_run`] went.
#[derive(Debug, Clone, PartialEq)]
pub enum RunBegin {
    /// The run is recorded and holds its session; with the history it asked for, and whether
    /// the checkpoint of its beginning ([`RunStart::checkpoint`]) was saved with it.
    Begun {
        history: Vec<SessionMessage>,
        checkpoint_saved: bool,
    },
    /// No such session for the run's user (missing, or another user's): nothing was written.
    SessionNotFound,
    /// Another run holds the session: nothing was written.
    SessionBusy { run_id: Uuid },
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub struct RunEnd {
    pub status: RunStatus,
    pub answer_message_id: Option<Uuid>,
    pub failure: Option<RunFailure>,
    pub finalize_reason: Option<FinalizeReason>,
    pub finished_at: DateTime<Utc>,
    /// The typed answer (runs with an output schema).
    pub output: Option<serde_json::Value>,
}

/// Everything one step of a run changed, written at once before its events are emitted.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StepRecord {
    pub run_id: Uuid,
    pub session_id: Uuid,
    /// New messages of the session, in order (empty when the run does not save the chat).
    pub messages: Vec<SessionMessage>,
    /// Tool calls that ended in this step (a record may be written again, the last wins).
    pub records: Vec<ToolExecutionRecord>,
    pub events: Vec<Event>,
    pub progress: RunProgress,
    /// Set on the last step: the run's final status, and the session is released; or the run
    /// pauses (`awaiting_input`), keeping its session until it resumes.
    pub end: Option<RunEnd>,
    /// What the run needs to go on from this step (after a pause, a crash or a handover).
    pub checkpoint: Option<Checkpoint>,
    /// The instance that writes the step: when set, the step is refused with
    /// [`StoreError::NotOwner`] unless the run still belongs to it.
    pub owner: Option<String>,
}

/// The run's state as of a step, in a form that does not grow with each step: the parts that
/// grow (its messages, its tool executions) are stored once, as the step's messages and records;
/// what the run started from is stored with its first step; the rest (`head`) replaces the head
/// of the step before.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Checkpoint {
    /// What the run started from (its question, history, settings): with the first step only.
    pub input: Option<Value>,
    /// The rest of the state, as JSON text (an object): phase, counters, the batch in
    /// progress, plan.
    pub head: String,
    /// The seq of the step's last event: a run that goes on numbers its events after it.
    pub last_seq: u64,
    /// New messages of a run that does not keep them in its session (`save_chat: false`),
    /// stored for the run alone; empty otherwise (the session's messages are the run's).
    pub turn: Vec<SessionMessage>,
}

/// A run as its last saved step left it: enough to go on from there.
#[derive(Debug, Clone, PartialEq)]
pub struct SavedRun {
    pub session_id: Uuid,
    pub status: RunStatus,
    pub save_chat: bool,
    pub owner: Option<String>,
    /// What the run started from; `None` when it was saved before it took a step.
    pub input: Option<Value>,
    /// The head of its last step; `None` when it was saved before it took a step.
    pub head: Option<Value>,
    pub last_seq: u64,
    /// Its messages in order, whether its session keeps them or not.
    pub turn: Vec<SessionMessage>,
    /// Its tool executions, in the order they were recorded, each with its whole output.
    pub records: Vec<ToolExecutionRecord>,
    /// The trace context it was saved with ([`NewRun::traceparent`]).
    pub traceparent: Option<String>,
}

/// A process that works on runs: a server, or a CLI running one run in a terminal. It shows
/// signs of life (`heartbeat`); runs of a server that stops doing so are adopted by another
/// (or by the same program started again).
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// Unique for each start of a process.
    pub id: String,
    pub kind: InstanceKind,
    /// For people: host and process id.
    pub name: String,
}

/// What kind of process an [`Instance`] is: only a server's runs are adopted by servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InstanceKind {
    Server,
    Cli,
}

impl InstanceKind {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceKind::Server => "server",
            InstanceKind::Cli => "cli",
        }
    }
}

/// A run whose owner stopped: it may be adopted.
#[derive(Debug, Clone, PartialEq)]
pub struct OrphanRun {
    pub run_id: Uuid,
    /// The instance that owned it.
    pub owner: String,
    /// Whether that instance said it stopped (a handover), rather than fell silent.
    pub handed_over: bool,
}

/// A place in the listing of sessions (most recently updated first, the id breaking ties):
/// right after the session it was taken from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionCursor {
    pub updated_at: DateTime<Utc>,
    pub id: Uuid,
}

impl SessionCursor {
    /// The place right after `session`.
    pub fn after(session: &SessionInfo) -> SessionCursor {
        SessionCursor {
            updated_at: session.updated_at,
            id: session.id,
        }
    }
}

/// Whether a run got the session for itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionLock {
    Acquired,
    /// Another run holds it.
    Busy {
        run_id: Uuid,
    },
}

/// Where sessions, messages, runs, tool executions and events live.
#[async_trait]
pub trait Store: Send + Sync {
    /// Creates the session (and its user, if new).
    async fn create_session(&self, session: &NewSession) -> Result<SessionInfo, StoreError>;

    async fn session(&self, id: Uuid) -> Result<Option<SessionInfo>, StoreError>;

    /// Sessions, most recently updated first (the id breaks ties, highest first); only
    /// `user_id`'s when given; with `after`, those that come after it in that order. Ask for
    /// one more than a page holds to know whether another page follows, and continue after the
    /// last session shown. Pages never repeat a session; a session updated while pages are read
    /// moves to the front, ahead of the pages to come.
    async fn list_sessions_after(
        &self,
        user_id: Option<&str>,
        after: Option<SessionCursor>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, StoreError>;

    /// The first `limit` sessions of [`Store::list_sessions_after`].
    async fn list_sessions(
        &self,
        user_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        self.list_sessions_after(user_id, None, limit).await
    }

    /// Deletes the session with its messages, runs, tool executions and events. False when
    /// there was no such session.
    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError>;

    /// The messages of a session, oldest first, as the conversation stands: those a regenerated
    /// answer replaced ([`SessionMessage::superseded_by_run`]) are left out.
    async fn messages(&self, session_id: Uuid) -> Result<Vec<SessionMessage>, StoreError>;

    /// All messages of a session, oldest first, the superseded ones included (each says which
    /// run replaced it).
    async fn messages_with_superseded(
        &self,
        session_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError>;

    /// Marks the session's current messages from the first one of `from_run` on (of the
    /// session's last run that saves its chat, other than `by_run`, when `from_run` is `None`
    /// or has none) superseded by `by_run`: they stay stored, but leave the history and the
    /// listing. The number marked.
    async fn supersede_messages(
        &self,
        session_id: Uuid,
        from_run: Option<Uuid>,
        by_run: Uuid,
    ) -> Result<u64, StoreError>;

    /// One message of a session (a run's answer); `None` when the session has no such message.
    async fn message(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<SessionMessage>, StoreError>;

    /// The history a new run sees: the last `dialogue_messages` questions and answers of the
    /// session with the tool calls and results between them, oldest first; traces and
    /// superseded messages excluded.
    async fn history(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
    ) -> Result<Vec<SessionMessage>, StoreError>;

    /// The history `run_id` saw when it began: [`Store::history`] as it was before the run's
    /// first message (a run that goes on after a crash reads its history again, rather than
    /// keep a copy of it).
    async fn history_before_run(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
        run_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError>;

    /// Takes the session for `run_id` unless another run holds it (a holder whose lease ran out
    /// has lost it).
    async fn lock_session(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<SessionLock, StoreError>;

    /// Extends the lease of a run that still works.
    async fn renew_session_lock(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<(), StoreError>;

    /// Gives the session up if `run_id` still holds it (a run that could not begin).
    async fn unlock_session(&self, session_id: Uuid, run_id: Uuid) -> Result<(), StoreError>;

    /// Records the start of a run (status `running`).
    async fn start_run(&self, run: &NewRun) -> Result<(), StoreError>;

    /// Begins a run: finds its session (or creates it, or refuses the run, as `start` says),
    /// takes it for the run, reads its history and records the run (status `running`). A
    /// store may do all of it at once (`SqlStore` does, in one transaction); this default does
    /// it step by step, and gives the session back when a later step fails.
    async fn begin_run(&self, start: &RunStart) -> Result<RunBegin, StoreError> {
        let run = &start.run;
        match self.session(run.session_id).await? {
            Some(session) if session.user_id != run.user_id => {
                return Ok(RunBegin::SessionNotFound);
            }
            Some(_) => {}
            None => match &start.if_missing {
                MissingSession::Refuse => return Ok(RunBegin::SessionNotFound),
                MissingSession::Create(session) => {
                    self.create_session(session).await?;
                }
                MissingSession::Ignore => {}
            },
        }
        match self
            .lock_session(run.session_id, run.id, start.lease)
            .await?
        {
            SessionLock::Acquired => {}
            SessionLock::Busy { run_id } => return Ok(RunBegin::SessionBusy { run_id }),
        }
        let begun = async {
            // Not undone when a later step fails (`SqlStore` does it all in one transaction).
            if let Some(supersede) = start.supersede {
                self.supersede_messages(run.session_id, supersede.from_run, run.id)
                    .await?;
            }
            let history = match start.history {
                Some(limit) => self.history(run.session_id, limit).await?,
                None => Vec::new(),
            };
            self.start_run(run).await?;
            if let Some(step) = &start.first_step {
                self.save_step(step).await?;
            }
            Ok(history)
        };
        match begun.await {
            Ok(history) => Ok(RunBegin::Begun {
                history,
                checkpoint_saved: start.first_step_saves_input(),
            }),
            Err(error) => {
                if let Err(unlock) = self.unlock_session(run.session_id, run.id).await {
                    tracing::warn!(session_id = %run.session_id, run_id = %run.id,
                        error = %unlock, "cannot give the session back");
                }
                Err(error)
            }
        }
    }

    /// Writes one step atomically; with `end`, also the final status, and releases the session
    /// (a paused run keeps it, and its snapshot is stored). A step without `end` marks the run
    /// `running` (again, for a run that resumes).
    async fn save_step(&self, step: &StepRecord) -> Result<(), StoreError>;

    /// The run as its last saved step left it (any status); `None` for an unknown run.
    async fn saved_run(&self, id: Uuid) -> Result<Option<SavedRun>, StoreError>;

    /// Takes a paused run to resume it, for `owner`: true for exactly one caller, however many
    /// try at once (in this process or another); false when the run no longer waits for input.
    async fn claim_paused_run(&self, id: Uuid, owner: Option<&str>) -> Result<bool, StoreError>;

    /// Records a process that works on runs, alive as of now.
    async fn register_instance(&self, instance: &Instance) -> Result<(), StoreError>;

    /// A sign of life of an instance: one write per instance, however many runs it has.
    async fn heartbeat(&self, instance_id: &str) -> Result<(), StoreError>;

    /// Says that an instance stopped: its runs in progress can be adopted at once.
    async fn retire_instance(&self, instance_id: &str) -> Result<(), StoreError>;

    /// Runs in progress (`running`) whose owner is a server that stopped or has been silent
    /// for longer than `silent_for`, oldest first, at most `limit`.
    async fn orphaned_runs(
        &self,
        silent_for: Duration,
        limit: u32,
    ) -> Result<Vec<OrphanRun>, StoreError>;

    /// Makes `to` the owner of a run in progress whose owner stopped or has been silent for
    /// longer than `silent_for` (or that has no owner): true for exactly one caller however
    /// many try at once; false when the run ended, its owner is alive, or another instance
    /// took it first.
    async fn adopt_run(
        &self,
        run_id: Uuid,
        to: &str,
        silent_for: Duration,
    ) -> Result<bool, StoreError>;

    /// Asks the owner of a run in progress to cancel it (it learns of it within a second):
    /// false when the run is not in progress.
    async fn request_cancel(&self, run_id: Uuid) -> Result<bool, StoreError>;

    /// The runs of `owner` whose cancellation was asked for.
    async fn cancel_requests(&self, owner: &str) -> Result<Vec<Uuid>, StoreError>;

    async fn run(&self, id: Uuid) -> Result<Option<RunInfo>, StoreError>;

    /// What `user_id`'s runs that started at or after `since` spent, summed: tokens, the cost
    /// known (`cost_usd`, null when none is) and whether every run's cost was complete (the
    /// per-user daily limit).
    async fn user_usage_since(
        &self,
        user_id: &str,
        since: DateTime<Utc>,
    ) -> Result<agentloop_protocol::Usage, StoreError>;

    /// Runs of a session, oldest first.
    async fn session_runs(&self, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError>;

    /// The tool executions of a run, in the order they were recorded, each with its whole
    /// output.
    async fn tool_executions(&self, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError>;

    /// One tool execution of a run, with its whole output; `None` when the run has no such call.
    async fn tool_execution(
        &self,
        run_id: Uuid,
        call_id: &str,
    ) -> Result<Option<ToolExecutionRecord>, StoreError>;

    /// The events of a run with `seq > after_seq`, in order.
    async fn events(&self, run_id: Uuid, after_seq: u64) -> Result<Vec<Event>, StoreError>;

    /// The media type and bytes of the attachment stored under `sha256` (lowercase hex), kept
    /// once for every message that carries it; `None` when the store holds no such bytes (a
    /// store that keeps none).
    async fn attachment(&self, sha256: &str) -> Result<Option<(String, Vec<u8>)>, StoreError> {
        let _ = sha256;
        Ok(None)
    }

    /// News of runs: the id of a run each time it saved a step (in this process, and with a
    /// shared database in every process on it), so that followers read new events at once.
    /// `None` when the store cannot tell; followers then ask it regularly. News can be missed
    /// (a follower that lags, a lost connection): it speeds following up, it is not a log.
    fn run_news(&self) -> Option<tokio::sync::broadcast::Receiver<Uuid>> {
        None
    }

    /// Whether the store answers a trivial query, failing within a couple of seconds when it
    /// does not (for health checks). No default: a store that cannot tell is not healthy.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// An API key as the store knows it: never the key itself, only what identifies it.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct ApiKeyInfo {
    /// Stable identifier, shown at creation and used to revoke (`key_...`).
    pub id: String,
    pub user_id: String,
    /// The first characters of the key, enough for a person to recognise it.
    pub prefix: String,
    pub created_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_at: Option<DateTime<Utc>>,
}

/// A key just created: the secret is shown once and never stored.
#[derive(Debug, Clone, PartialEq)]
pub struct NewApiKey {
    pub info: ApiKeyInfo,
    pub secret: String,
}

/// API keys of the HTTP server. Only a hash of each key is stored.
#[async_trait]
pub trait KeyStore: Send + Sync {
    /// Creates a key for `user_id` (and the user, if new).
    async fn create_api_key(&self, user_id: &str) -> Result<NewApiKey, StoreError>;

    /// The user a key belongs to; `None` for a key that is unknown or revoked.
    async fn authenticate(&self, secret: &str) -> Result<Option<String>, StoreError>;

    /// Revokes a key, named by its id or by the key itself; returns the key revoked, or `None`
    /// when there is no such active key.
    async fn revoke_api_key(&self, id_or_secret: &str) -> Result<Option<ApiKeyInfo>, StoreError>;

    /// Keys, newest first; only `user_id`'s when given.
    async fn list_api_keys(&self, user_id: Option<&str>) -> Result<Vec<ApiKeyInfo>, StoreError>;
}
