//! Runs in progress on this server: each keeps its events in memory while it lives, so any
//! number of clients can follow it, leave, and come back (`Last-Event-ID`) without a gap; runs
//! outlive the HTTP connection that started them.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use agentloop_core::{Agent, EventSink, Resumed, RunOutcome, RunRequest, protocol::Event};
use axum::http::StatusCode;
use futures::Stream;
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use uuid::Uuid;

use crate::error::ApiError;

/// How long a finished run stays in memory for clients that reattach right away; later they
/// read its events from the store.
const LINGER: Duration = Duration::from_secs(60);

/// One run in progress (or just finished).
pub struct LiveRun {
    pub id: Uuid,
    pub user_id: String,
    pub session_id: Uuid,
    /// The seq of the last event before this process took the run over (a resumed run's
    /// earlier events are in the store); the log holds the ones after it.
    pub base_seq: u64,
    cancel: CancellationToken,
    log: Mutex<Vec<Event>>,
    /// Events emitted so far; and the outcome, once the run ended.
    progress: watch::Sender<Progress>,
}

#[derive(Clone, Default)]
struct Progress {
    events: usize,
    outcome: Option<Arc<RunOutcome>>,
}

impl LiveRun {
    /// Asks the run to stop at its next safe point.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn is_finished(&self) -> bool {
        self.progress.borrow().outcome.is_some()
    }

    /// Waits for the end of the run.
    pub async fn outcome(&self) -> Option<Arc<RunOutcome>> {
        let mut progress = self.progress.subscribe();
        let done = progress.wait_for(|p| p.outcome.is_some()).await.ok()?;
        done.outcome.clone()
    }

    /// The run's events with `seq > after` (at least `base_seq`) that this process saw, then
    /// the ones still to come, ending with the run.
    pub fn events(self: &Arc<Self>, after: u64) -> impl Stream<Item = Event> + Send + 'static {
        let start = after.saturating_sub(self.base_seq) as usize;
        let state = (self.clone(), self.progress.subscribe(), start);
        let batches = futures::stream::unfold(state, |(run, mut progress, next)| async move {
            loop {
                let (batch, ended) = {
                    let log = run.lock_log();
                    // seq base + n is at index n - 1: the log has no gaps.
                    let batch = log.get(next..).map(<[Event]>::to_vec).unwrap_or_default();
                    (batch, progress.borrow_and_update().outcome.is_some())
                };
                if !batch.is_empty() {
                    let next = next + batch.len();
                    return Some((futures::stream::iter(batch), (run, progress, next)));
                }
                if ended || progress.changed().await.is_err() {
                    return None;
                }
            }
        });
        futures::StreamExt::flatten(batches)
    }

    fn lock_log(&self) -> MutexGuard<'_, Vec<Event>> {
        // Only pushes happen under the lock; a poisoned log is still a valid log.
        self.log
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn finish(&self, outcome: RunOutcome) {
        let outcome = Arc::new(outcome);
        self.progress.send_modify(|p| p.outcome = Some(outcome));
    }
}

impl EventSink for LiveRun {
    fn emit(&self, event: Event) {
        let events = {
            let mut log = self.lock_log();
            log.push(event);
            log.len()
        };
        self.progress.send_modify(|p| p.events = events);
    }
}

/// The runs of this server.
pub struct LiveRuns {
    runs: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    tasks: TaskTracker,
    max_per_user: usize,
}

impl LiveRuns {
    pub fn new(max_per_user: usize) -> Arc<Self> {
        Arc::new(Self {
            runs: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            max_per_user,
        })
    }

    /// Begins `request` for `user` and drives it in a task of its own. Refused before the run
    /// exists: when the user already has as many runs in progress as allowed (429), and when
    /// the run cannot begin (its session is busy, unknown or another user's; the store fails).
    pub async fn start(
        self: &Arc<Self>,
        agent: &Agent,
        mut request: RunRequest,
        user: &str,
    ) -> Result<Arc<LiveRun>, ApiError> {
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        let session_id = *request.session_id.get_or_insert_with(Uuid::now_v7);
        let run = self.admit(run_id, session_id, 0, user)?;
        let begun = match agent.begin(request).await {
            Ok(begun) => begun,
            Err(error) => {
                self.discard(&run);
                return Err(error.into());
            }
        };
        let agent = agent.clone();
        self.spawn(run.clone(), async move |live: Arc<LiveRun>, sink| {
            agent.run_begun(begun, sink, live.cancel.clone()).await
        });
        Ok(run)
    }

    /// Forgets a run that was admitted but never began.
    fn discard(&self, run: &Arc<LiveRun>) {
        let mut runs = self.lock_runs();
        if runs
            .get(&run.id)
            .is_some_and(|current| Arc::ptr_eq(current, run))
        {
            runs.remove(&run.id);
        }
    }

    /// Drives a paused run that got its answer, like a new run (same limits).
    pub fn resume(
        self: &Arc<Self>,
        agent: &Agent,
        resumed: Resumed,
        user: &str,
    ) -> Result<Arc<LiveRun>, ApiError> {
        let run = self.admit(
            resumed.run_id(),
            resumed.session_id(),
            resumed.last_seq(),
            user,
        )?;
        let agent = agent.clone();
        self.spawn(run.clone(), async move |live: Arc<LiveRun>, sink| {
            agent.run_resumed(resumed, sink, live.cancel.clone()).await
        });
        Ok(run)
    }

    /// Registers a run for `user`, unless the server is stopping or the user has as many runs
    /// in progress as allowed.
    fn admit(
        &self,
        run_id: Uuid,
        session_id: Uuid,
        base_seq: u64,
        user: &str,
    ) -> Result<Arc<LiveRun>, ApiError> {
        if self.is_shutting_down() {
            return Err(ApiError::unavailable(
                "the server is shutting down; send the request again in a moment",
            ));
        }
        let run = Arc::new(LiveRun {
            id: run_id,
            user_id: user.to_string(),
            session_id,
            base_seq,
            cancel: CancellationToken::new(),
            log: Mutex::new(Vec::new()),
            progress: watch::Sender::new(Progress::default()),
        });
        {
            let mut runs = self.lock_runs();
            let active = runs
                .values()
                .filter(|run| run.user_id == user && !run.is_finished())
                .count();
            if active >= self.max_per_user {
                let mut error = ApiError::new(
                    StatusCode::TOO_MANY_REQUESTS,
                    "too_many_runs",
                    format!(
                        "you already have {active} runs in progress (server.max_runs_per_user); \
                         wait for one to finish"
                    ),
                );
                error.retry_after = Some(5);
                return Err(error);
            }
            runs.insert(run_id, run.clone());
        }
        Ok(run)
    }

    /// Runs `drive` for `run` in a tracked task, then keeps the ended run in memory a little.
    fn spawn<F, Fut>(self: &Arc<Self>, run: Arc<LiveRun>, drive: F)
    where
        F: FnOnce(Arc<LiveRun>, Arc<dyn EventSink>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = RunOutcome> + Send + 'static,
    {
        let registry = self.clone();
        self.tasks.spawn(async move {
            let sink: Arc<dyn EventSink> = run.clone();
            let outcome = drive(run.clone(), sink).await;
            run.finish(outcome);
            // Kept a little for clients that reattach at once; not tracked: shutdown need not
            // wait for it.
            tokio::spawn(async move {
                tokio::time::sleep(LINGER).await;
                let mut runs = registry.lock_runs();
                // A run that resumed meanwhile has a new entry under the same id.
                if runs
                    .get(&run.id)
                    .is_some_and(|current| Arc::ptr_eq(current, &run))
                {
                    runs.remove(&run.id);
                }
            });
        });
    }

    pub fn get(&self, run_id: Uuid) -> Option<Arc<LiveRun>> {
        self.lock_runs().get(&run_id).cloned()
    }

    /// Runs in progress.
    pub fn active(&self) -> usize {
        self.lock_runs()
            .values()
            .filter(|run| !run.is_finished())
            .count()
    }

    /// Asks every run to stop at its next safe point, and refuses new ones from now on.
    pub fn shutdown(&self) {
        self.tasks.close();
        for run in self.lock_runs().values() {
            run.cancel();
        }
    }

    /// Waits (at most `grace`) for the runs to end and be saved; false when some did not.
    pub async fn wait_idle(&self, grace: Duration) -> bool {
        self.tasks.close();
        tokio::time::timeout(grace, self.tasks.wait()).await.is_ok()
    }

    pub fn is_shutting_down(&self) -> bool {
        self.tasks.is_closed()
    }

    fn lock_runs(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<LiveRun>>> {
        self.runs
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
