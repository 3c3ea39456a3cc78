//! The runs of a server: admitted under the per-user limits, driven each in a task of its own,
//! kept a while after they end, stopped on shutdown.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use agentloop_core::{Agent, EventSink, Resumed, RunOutcome, RunRequest, StartError};
use axum::http::StatusCode;
use futures::FutureExt;
use tokio_util::task::TaskTracker;
use uuid::Uuid;

use super::follower::{Reader, Started};
use super::linger::{Lingering, REAP_EVERY};
use super::run::LiveRun;
use super::{Held, lock};
use crate::daily::DailyLimit;
use crate::error::ApiError;

/// A run being driven: counted as active until dropped.
pub(super) struct Active {
    pub(super) registry: Arc<LiveRuns>,
    pub(super) user: String,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.registry.ended(&self.user);
    }
}

/// What [`LiveRuns::start_once`] did.
pub enum Start {
    Started(Started),
    /// The run's id is another run's already (here, or in the store): nothing was begun.
    Taken,
}

/// How a run comes to be registered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admit {
    /// A new run: under the per-user limit, and only with an id no registered run has.
    New,
    /// A paused run that got its answer: under the per-user limit.
    Again,
    /// A run adopted from an instance that stopped: admitted when it began.
    Adopted,
}

/// The runs of this server.
pub struct LiveRuns {
    runs: Mutex<HashMap<Uuid, Arc<LiveRun>>>,
    /// Runs admitted and not finished yet, per user: kept as runs are admitted and end, so
    /// that neither admitting a run nor counting them walks every run (ended ones linger in
    /// `runs` for a minute).
    active: Mutex<HashMap<String, usize>>,
    tasks: TaskTracker,
    /// Finished runs, let go after a while.
    pub(super) lingering: Lingering,
    max_per_user: usize,
    daily: DailyLimit,
}

impl LiveRuns {
    pub fn new(max_per_user: usize) -> Arc<Self> {
        Self::with_daily_limit(max_per_user, DailyLimit::default())
    }

    /// Also refuses new runs of a user whose runs of the day spent `daily`.
    pub fn with_daily_limit(max_per_user: usize, daily: DailyLimit) -> Arc<Self> {
        Arc::new(Self {
            runs: Mutex::new(HashMap::new()),
            active: Mutex::new(HashMap::new()),
            tasks: TaskTracker::new(),
            lingering: Lingering::default(),
            max_per_user,
            daily,
        })
    }

    /// Begins `request` for `user` and drives it in a task of its own. Refused before the run
    /// exists: when the user's runs of the day spent the daily limit (429 `budget_exceeded`),
    /// when the user already has as many runs in progress as allowed (429), when the run
    /// cannot begin (its session is busy, unknown or another user's; the store fails), and
    /// when its id is another run's (409 `run_exists`; [`LiveRuns::start_once`] tells it apart).
    pub async fn start(
        self: &Arc<Self>,
        agent: &Agent,
        request: RunRequest,
        user: &str,
        reader: Reader,
    ) -> Result<Started, ApiError> {
        match self.start_once(agent, request, user, reader).await? {
            Start::Started(started) => Ok(started),
            Start::Taken => Err(ApiError::conflict(
                "run_exists",
                "a run with this id exists already",
            )),
        }
    }

    /// Like [`LiveRuns::start`], for a request that names its run: a run with that id begun
    /// already (registered here, or in the store) is not begun again, and its request is told
    /// so ([`Start::Taken`]) to follow that run instead.
    pub async fn start_once(
        self: &Arc<Self>,
        agent: &Agent,
        mut request: RunRequest,
        user: &str,
        reader: Reader,
    ) -> Result<Start, ApiError> {
        self.daily
            .admit(
                agent.store().map(|store| store.as_ref()),
                user,
                chrono::Utc::now(),
            )
            .await?;
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        let session_id = request.new_session_id();
        let Some(run) = self.admit(agent, run_id, session_id, 0, user, Admit::New)? else {
            return Ok(Start::Taken);
        };
        let started = Started::for_reader(run, reader);
        let begun = match agent.begin(request).await {
            Ok(begun) => begun,
            Err(error) => {
                // Begun by another instance meanwhile: the store refused the second one.
                let taken = matches!(error, StartError::Store(_))
                    && match agent.store() {
                        Some(store) => matches!(store.run(run_id).await, Ok(Some(_))),
                        None => false,
                    };
                let error = match taken {
                    true => ApiError::conflict("run_exists", "a run with this id exists already"),
                    false => error.into(),
                };
                self.discard(&started.run, &error);
                return if taken { Ok(Start::Taken) } else { Err(error) };
            }
        };
        started.run.began();
        let agent = agent.clone();
        self.spawn(
            started.run.clone(),
            async move |live: Arc<LiveRun>, sink| {
                agent.run_begun(begun, sink, live.cancel.clone()).await
            },
        );
        Ok(Start::Started(started))
    }

    /// Forgets a run that was admitted but never began; requests that follow it get `error`.
    fn discard(&self, run: &Arc<LiveRun>, error: &ApiError) {
        run.refused(error);
        {
            let mut runs = self.lock_runs();
            if runs
                .get(&run.id)
                .is_some_and(|current| Arc::ptr_eq(current, run))
            {
                runs.remove(&run.id);
            }
        }
        self.ended(&run.user_id);
    }

    /// Drives a paused run that got its answer, like a new run (same limits).
    pub fn resume(
        self: &Arc<Self>,
        agent: &Agent,
        resumed: Resumed,
        user: &str,
        reader: Reader,
    ) -> Result<Started, ApiError> {
        self.go_on(agent, resumed, user, true, reader)
    }

    /// Drives a run adopted from an instance that stopped. The per-user limit does not apply:
    /// the run was admitted when it began.
    pub fn adopt(
        self: &Arc<Self>,
        agent: &Agent,
        resumed: Resumed,
    ) -> Result<Arc<LiveRun>, ApiError> {
        let user = resumed.user_id().to_string();
        let started = self.go_on(agent, resumed, &user, false, Reader::Outcome)?;
        Ok(started.run.clone())
    }

    fn go_on(
        self: &Arc<Self>,
        agent: &Agent,
        resumed: Resumed,
        user: &str,
        limited: bool,
        reader: Reader,
    ) -> Result<Started, ApiError> {
        let admit = match limited {
            true => Admit::Again,
            false => Admit::Adopted,
        };
        let run = self
            .admit(
                agent,
                resumed.run_id(),
                resumed.session_id(),
                resumed.last_seq(),
                user,
                admit,
            )?
            .ok_or_else(|| ApiError::internal("a resumed run was not registered"))?;
        run.began();
        let started = Started::for_reader(run, reader);
        let agent = agent.clone();
        self.spawn(
            started.run.clone(),
            async move |live: Arc<LiveRun>, sink| {
                agent.run_resumed(resumed, sink, live.cancel.clone()).await
            },
        );
        Ok(started)
    }

    /// Registers a run for `user`, unless the server is stopping or the user has as many runs
    /// in progress as allowed. A new run whose id is registered already is not: `None`.
    fn admit(
        &self,
        agent: &Agent,
        run_id: Uuid,
        session_id: Uuid,
        base_seq: u64,
        user: &str,
        admit: Admit,
    ) -> Result<Option<Arc<LiveRun>>, ApiError> {
        let limited = admit != Admit::Adopted;
        if self.is_shutting_down() {
            return Err(ApiError::unavailable(
                "the server is shutting down; send the request again in a moment",
            ));
        }
        let store = agent.store().cloned();
        let run = Arc::new(LiveRun::new(run_id, user, session_id, base_seq, store));
        {
            let mut runs = self.lock_runs();
            // Checked and registered under one lock: of copies of one request, one begins.
            if admit == Admit::New && runs.contains_key(&run_id) {
                return Ok(None);
            }
            let mut active_per_user = lock(&self.active);
            let active = active_per_user.get(user).copied().unwrap_or(0);
            if limited && active >= self.max_per_user {
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
            // A run resumed replaces its entry of before the pause, if it still lingers.
            runs.insert(run_id, run.clone());
            *active_per_user.entry(user.to_owned()).or_default() += 1;
        }
        Ok(Some(run))
    }

    /// An admitted run has ended (or never began): it no longer counts as active.
    fn ended(&self, user: &str) {
        let mut active = lock(&self.active);
        if let Some(count) = active.get_mut(user) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                active.remove(user);
            }
        }
    }

    /// Runs `drive` for `run` in a tracked task, then keeps the ended run registered a little.
    fn spawn<F, Fut>(self: &Arc<Self>, run: Arc<LiveRun>, drive: F)
    where
        F: FnOnce(Arc<LiveRun>, Arc<dyn EventSink>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = RunOutcome> + Send + 'static,
    {
        self.tasks.spawn(self.task(run, drive));
    }

    /// What a run's task does: drives it, records its end, keeps it registered a little. Kept
    /// for as long as the run lasts, so it holds the driver's future once and little else.
    pub(super) fn task<F, Fut>(
        self: &Arc<Self>,
        run: Arc<LiveRun>,
        drive: F,
    ) -> impl std::future::Future<Output = ()> + Send + 'static + use<F, Fut>
    where
        F: FnOnce(Arc<LiveRun>, Arc<dyn EventSink>) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = RunOutcome> + Send + 'static,
    {
        let registry = self.clone();
        // Counted as ended once marked finished, or should the task end otherwise.
        let active = Active {
            registry: registry.clone(),
            user: run.user_id.clone(),
        };
        let sink: Arc<dyn EventSink> = run.clone();
        // Chained, not awaited in an `async` block: a block keeps the closure it calls, or the
        // future it awaits, twice in the task for as long as the run lasts (as it received it,
        // and as it polls it).
        drive(run.clone(), sink).then(move |outcome| async move {
            let status = run.end(outcome);
            drop(active);
            run.release_if_saved(status).await;
            registry.linger(run);
        })
    }

    /// Keeps a finished run registered a while ([`LINGER`](super::LINGER)), its outcome a moment.
    pub(super) fn linger(self: &Arc<Self>, run: Arc<LiveRun>) {
        if self.lingering.push(run, tokio::time::Instant::now()) {
            // Not tracked: shutdown need not wait for it.
            tokio::spawn(reap(Arc::downgrade(self)));
        }
    }

    /// Unregisters runs that finished [`LINGER`](super::LINGER) ago.
    fn unregister(&self, expired: Vec<Arc<LiveRun>>) {
        let mut runs = self.lock_runs();
        for run in expired {
            // A run that resumed meanwhile has a new entry under the same id.
            if runs
                .get(&run.id)
                .is_some_and(|current| Arc::ptr_eq(current, &run))
            {
                runs.remove(&run.id);
            }
        }
    }

    pub fn get(&self, run_id: Uuid) -> Option<Arc<LiveRun>> {
        self.lock_runs().get(&run_id).cloned()
    }

    /// Runs in progress.
    pub fn active(&self) -> usize {
        lock(&self.active).values().sum()
    }

    /// The events all runs hold in memory.
    pub fn held(&self) -> Held {
        let runs: Vec<Arc<LiveRun>> = self.lock_runs().values().cloned().collect();
        runs.iter()
            .map(|run| run.held())
            .fold(Held::default(), |sum, held| Held {
                events: sum.events + held.events,
                bytes: sum.bytes + held.bytes,
            })
    }

    /// Refuses new runs from now on, and stops the runs in progress: with `handover`, runs
    /// saved in a store are handed over (each stops at its next saved step, for another
    /// instance or the next start to adopt; [`Agent::hand_over`]); the others are cancelled
    /// at their next safe point.
    pub fn shutdown(&self, handover: Option<&Agent>) {
        self.tasks.close();
        if let Some(agent) = handover {
            agent.hand_over();
        }
        for run in self.lock_runs().values() {
            if handover.is_none() || run.store.is_none() {
                run.cancel();
            }
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

    pub(super) fn lock_runs(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<LiveRun>>> {
        lock(&self.runs)
    }
}

/// Lets finished runs go, while any lingers and the registry lives.
async fn reap(registry: std::sync::Weak<LiveRuns>) {
    loop {
        tokio::time::sleep(REAP_EVERY).await;
        let Some(registry) = registry.upgrade() else {
            return;
        };
        let reaped = registry.lingering.reap(tokio::time::Instant::now());
        registry.unregister(reaped.expired);
        if !reaped.more {
            return;
        }
    }
}
