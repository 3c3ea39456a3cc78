//! A [`Store`] in front of a real one that can be told to fail: saves of steps that end a run,
//! or every save, answer `StoreError::Unavailable` as a database that went away would, until
//! the store is healed. Everything else goes to the real store.

use std::sync::{
    Arc,
    atomic::{AtomicBool, AtomicUsize, Ordering},
};
use std::time::Duration;

use agentloop_core::{
    Instance, NewRun, NewSession, OrphanRun, SavedRun, SessionCursor, SessionLock, StepRecord,
    Store, StoreError,
    protocol::{Event, RunInfo, SessionInfo, SessionMessage, ToolExecutionRecord},
};
use async_trait::async_trait;
use uuid::Uuid;

/// Which saves fail.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// None: the real store answers.
    Healthy,
    /// Steps that end a run (or pause it).
    FinalSteps,
    /// Every step.
    AllSteps,
    /// Every step, refused as written by an instance that no longer owns the run (another one
    /// adopted it).
    Disowned,
}

pub struct FaultyStore {
    inner: Arc<dyn Store>,
    fault: std::sync::Mutex<Fault>,
    /// Saves refused so far.
    refused: AtomicUsize,
    /// Set by the first refused save, for tests that wait for it.
    tripped: AtomicBool,
}

impl FaultyStore {
    pub fn new(inner: Arc<dyn Store>) -> Arc<FaultyStore> {
        Arc::new(FaultyStore {
            inner,
            fault: std::sync::Mutex::new(Fault::Healthy),
            refused: AtomicUsize::new(0),
            tripped: AtomicBool::new(false),
        })
    }

    pub fn set(&self, fault: Fault) {
        *self
            .fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = fault;
    }

    pub fn heal(&self) {
        self.set(Fault::Healthy);
    }

    /// Saves refused so far.
    pub fn refused(&self) -> usize {
        self.refused.load(Ordering::SeqCst)
    }

    /// Waits (at most `limit`) until a save was refused; false if none was.
    pub async fn wait_tripped(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        while !self.tripped.load(Ordering::SeqCst) {
            if tokio::time::Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        true
    }

    fn fault(&self) -> Fault {
        *self
            .fault
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn refuses(&self, step: &StepRecord) -> bool {
        let fault = self.fault();
        let refused = match fault {
            Fault::Healthy => false,
            Fault::FinalSteps => step.end.is_some(),
            Fault::AllSteps | Fault::Disowned => true,
        };
        if refused {
            self.refused.fetch_add(1, Ordering::SeqCst);
            self.tripped.store(true, Ordering::SeqCst);
        }
        refused
    }
}

#[async_trait]
impl Store for FaultyStore {
    async fn create_session(&self, session: &NewSession) -> Result<SessionInfo, StoreError> {
        self.inner.create_session(session).await
    }

    async fn session(&self, id: Uuid) -> Result<Option<SessionInfo>, StoreError> {
        self.inner.session(id).await
    }

    async fn list_sessions_after(
        &self,
        user_id: Option<&str>,
        after: Option<SessionCursor>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        self.inner.list_sessions_after(user_id, after, limit).await
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        self.inner.delete_session(id).await
    }

    async fn messages(&self, session_id: Uuid) -> Result<Vec<SessionMessage>, StoreError> {
        self.inner.messages(session_id).await
    }

    async fn messages_with_superseded(
        &self,
        session_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.inner.messages_with_superseded(session_id).await
    }

    async fn supersede_messages(
        &self,
        session_id: Uuid,
        from_run: Option<Uuid>,
        by_run: Uuid,
    ) -> Result<u64, StoreError> {
        self.inner
            .supersede_messages(session_id, from_run, by_run)
            .await
    }

    async fn message(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<SessionMessage>, StoreError> {
        self.inner.message(session_id, id).await
    }

    async fn history(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.inner.history(session_id, dialogue_messages).await
    }

    async fn history_before_run(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
        run_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.inner
            .history_before_run(session_id, dialogue_messages, run_id)
            .await
    }

    fn run_news(&self) -> Option<tokio::sync::broadcast::Receiver<Uuid>> {
        self.inner.run_news()
    }

    async fn lock_session(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<SessionLock, StoreError> {
        self.inner.lock_session(session_id, run_id, lease).await
    }

    async fn renew_session_lock(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.inner
            .renew_session_lock(session_id, run_id, lease)
            .await
    }

    async fn unlock_session(&self, session_id: Uuid, run_id: Uuid) -> Result<(), StoreError> {
        self.inner.unlock_session(session_id, run_id).await
    }

    async fn start_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.inner.start_run(run).await
    }

    async fn save_step(&self, step: &StepRecord) -> Result<(), StoreError> {
        if self.refuses(step) {
            if self.fault() == Fault::Disowned {
                return Err(StoreError::NotOwner(format!(
                    "run {} was adopted by another instance (injected by FaultyStore)",
                    step.run_id
                )));
            }
            return Err(StoreError::unavailable(
                "lost the database (injected by FaultyStore)".to_string(),
            ));
        }
        self.inner.save_step(step).await
    }

    async fn saved_run(&self, id: Uuid) -> Result<Option<SavedRun>, StoreError> {
        self.inner.saved_run(id).await
    }

    async fn claim_paused_run(&self, id: Uuid, owner: Option<&str>) -> Result<bool, StoreError> {
        self.inner.claim_paused_run(id, owner).await
    }

    async fn register_instance(&self, instance: &Instance) -> Result<(), StoreError> {
        self.inner.register_instance(instance).await
    }

    async fn heartbeat(&self, instance_id: &str) -> Result<(), StoreError> {
        self.inner.heartbeat(instance_id).await
    }

    async fn retire_instance(&self, instance_id: &str) -> Result<(), StoreError> {
        self.inner.retire_instance(instance_id).await
    }

    async fn orphaned_runs(
        &self,
        silent_for: Duration,
        limit: u32,
    ) -> Result<Vec<OrphanRun>, StoreError> {
        self.inner.orphaned_runs(silent_for, limit).await
    }

    async fn adopt_run(
        &self,
        run_id: Uuid,
        to: &str,
        silent_for: Duration,
    ) -> Result<bool, StoreError> {
        self.inner.adopt_run(run_id, to, silent_for).await
    }

    async fn request_cancel(&self, run_id: Uuid) -> Result<bool, StoreError> {
        self.inner.request_cancel(run_id).await
    }

    async fn cancel_requests(&self, owner: &str) -> Result<Vec<Uuid>, StoreError> {
        self.inner.cancel_requests(owner).await
    }

    async fn run(&self, id: Uuid) -> Result<Option<RunInfo>, StoreError> {
        self.inner.run(id).await
    }

    async fn user_usage_since(
        &self,
        user_id: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<agentloop_core::protocol::Usage, StoreError> {
        self.inner.user_usage_since(user_id, since).await
    }

    async fn session_runs(&self, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError> {
        self.inner.session_runs(session_id).await
    }

    async fn tool_executions(&self, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError> {
        self.inner.tool_executions(run_id).await
    }

    async fn tool_execution(
        &self,
        run_id: Uuid,
        call_id: &str,
    ) -> Result<Option<ToolExecutionRecord>, StoreError> {
        self.inner.tool_execution(run_id, call_id).await
    }

    async fn events(&self, run_id: Uuid, after_seq: u64) -> Result<Vec<Event>, StoreError> {
        self.inner.events(run_id, after_seq).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }
}
