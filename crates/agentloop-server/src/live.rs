//! Runs in progress on this server, and the clients that follow them. Runs outlive the HTTP
//! connection that started them: any number of clients follow a run, leave, and come back
//! (`Last-Event-ID`) without a gap or a repeat.
//!
//! What a run holds in memory is bounded. Every event reaches the store (a step is saved before
//! its events are sent; live text is saved with the next step), so a run keeps in memory only
//! what its followers have not read yet, and of what the store does not have yet (the text of
//! the LLM call in progress) the newest [`RECENT_BYTES`]. A follower more than
//! [`MAX_BACKLOG_BYTES`] behind is dropped: its stream ends after what it has already been
//! given, and the client reattaches from its last event (as EventSource does by itself). Events
//! no longer in memory are read from the store a page at a time; text not saved yet (of the LLM
//! call in progress) comes once its step is saved. A run that ended and is saved holds no event
//! at all.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use agentloop_core::{Agent, EventSink, Resumed, RunOutcome, RunRequest, Store, protocol::Event};
use axum::http::StatusCode;
use futures::{FutureExt, Stream};
use tokio::sync::watch;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use uuid::Uuid;

use crate::daily::DailyLimit;
use crate::{error::ApiError, sse};

mod linger;
mod log;

use linger::{Lingering, REAP_EVERY};
pub(crate) use log::event_bytes;
use log::{Log, Read};

/// How long a finished run stays registered (for a cancel to be told it came too late, and
/// for clients that reattach, who read its events from the store).
const LINGER: Duration = Duration::from_secs(60);
/// How long a finished run keeps its outcome (the answer and the messages: as large as the
/// answer twice) for a request still to ask for it, beyond the requests already waiting for it.
/// A `stream: false` request asks as the run starts.
const OUTCOME_KEPT: Duration = Duration::from_secs(1);
/// The most a run keeps of the newest events the store does not have yet (live text) when no
/// follower needs them.
const RECENT_BYTES: usize = 256 * 1024;
/// How far behind the newest event a follower may be before it is dropped.
pub const MAX_BACKLOG_BYTES: usize = 4 * 1024 * 1024;
/// The most a follower copies out of memory at a time.
const BATCH_BYTES: usize = 64 * 1024;

/// Events held in memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    pub events: usize,
    /// Estimated: each event's size plus its text and fields.
    pub bytes: usize,
}

/// One run in progress (or just finished).
pub struct LiveRun {
    pub id: Uuid,
    pub user_id: String,
    pub session_id: Uuid,
    /// The seq of the last event before this process took the run over (a resumed run's
    /// earlier events are in the store); the ones after it are sent from here.
    pub base_seq: u64,
    cancel: CancellationToken,
    /// Where events that left memory are read again. Without one, nothing leaves memory.
    store: Option<Arc<dyn Store>>,
    log: Mutex<Log>,
    /// Set at the end; kept while requests wait for it, and [`OUTCOME_KEPT`] at least.
    ended: watch::Sender<Option<Arc<RunOutcome>>>,
    progress: watch::Sender<Progress>,
}

#[derive(Clone, Copy, Default)]
struct Progress {
    /// The seq of the newest event.
    last_seq: u64,
    finished: bool,
}

impl LiveRun {
    /// Asks the run to stop at its next safe point.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn is_finished(&self) -> bool {
        self.progress.borrow().finished
    }

    /// Waits for the end of the run; `None` when asked after the outcome was forgotten
    /// ([`OUTCOME_KEPT`] after the end at the earliest, once no request waits for it).
    pub async fn outcome(&self) -> Option<Arc<RunOutcome>> {
        let mut ended = self.ended.subscribe();
        loop {
            // The outcome is set before the run is marked finished.
            let finished = self.is_finished();
            if let Some(outcome) = ended.borrow_and_update().clone() {
                return Some(outcome);
            }
            if finished {
                return None;
            }
            ended.changed().await.ok()?;
        }
    }

    /// The run's events with `seq > after` (at least `base_seq`), then the ones still to come,
    /// ending with the run, or earlier when this follower falls too far behind.
    pub fn events(self: &Arc<Self>, after: u64) -> impl Stream<Item = Event> + Send + 'static {
        let next = after.max(self.base_seq).saturating_add(1);
        // Attached at once, not when the response is first polled: what the run emits until
        // then stays in memory for this follower.
        let id = self.lock_log().attach(next);
        self.follow(next, id)
    }

    /// The events from `next` on, for a follower attached as `id` (reading the store first
    /// when `None`).
    fn follow(
        self: &Arc<Self>,
        next: u64,
        id: Option<u64>,
    ) -> impl Stream<Item = Event> + Send + 'static + use<> {
        let follower = Follower {
            run: self.clone(),
            progress: self.progress.subscribe(),
            next,
            id,
        };
        let batches = futures::stream::unfold(follower, |mut follower| async move {
            let batch = follower.next_batch().await?;
            Some((futures::stream::iter(batch), follower))
        });
        futures::StreamExt::flatten(batches)
    }

    /// The events this run holds in memory.
    pub fn held(&self) -> Held {
        let log = self.lock_log();
        Held {
            events: log.events.len(),
            bytes: log.bytes,
        }
    }

    /// Clients reading this run from memory (or about to learn that it was released).
    pub fn followers(&self) -> usize {
        self.lock_log().followers.len()
    }

    /// Followers dropped so far for falling too far behind.
    pub fn dropped_followers(&self) -> usize {
        self.lock_log().dropped
    }

    fn lock_log(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// Records the end; then, once the store is known to have it (and with it every event:
    /// the driver saw the step with the last event saved, or the store says so), lets go of
    /// the events. A run that never started, or whose store went away, is not in
    /// the store (yet): its events stay for the followers.
    async fn finish(&self, outcome: RunOutcome, active: Active) {
        let status = outcome.status;
        self.ended.send_replace(Some(Arc::new(outcome)));
        self.progress.send_modify(|p| p.finished = true);
        drop(active);
        let Some(store) = &self.store else {
            return;
        };
        // The driver saw the step with the last event saved: the store has the end.
        {
            let mut log = self.lock_log();
            if log.saved_seq >= self.progress.borrow().last_seq {
                log.release();
                return;
            }
        }
        match store.run(self.id).await {
            Ok(Some(run)) if run.status == status => self.lock_log().release(),
            Ok(_) => {}
            Err(error) => {
                tracing::warn!(run_id = %self.id, %error, "cannot check that a finished run is saved; its events stay in memory until it is forgotten");
            }
        }
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

impl EventSink for LiveRun {
    fn emit(&self, event: Event) {
        let seq = event.seq;
        let dropped = self.lock_log().push(event);
        if dropped > 0 {
            tracing::info!(run_id = %self.id, seq, dropped, max_backlog_bytes = MAX_BACKLOG_BYTES,
                "followers too far behind are dropped; they reattach with Last-Event-ID");
        }
        self.progress.send_modify(|p| p.last_seq = seq);
    }

    fn saved(&self, last_seq: u64) {
        self.lock_log().saved(last_seq);
    }
}

/// Who reads a run started or resumed for a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reader {
    /// A stream of its events: followed from before it begins, so that memory keeps its first
    /// events for the request instead of leaving them to the store.
    Events,
    /// Its outcome, or nothing (the request is answered at once).
    Outcome,
}

impl Reader {
    pub fn events_if(stream: bool) -> Reader {
        if stream {
            Reader::Events
        } else {
            Reader::Outcome
        }
    }
}

/// A run started or resumed for a request, with the follower attached for it before it began
/// ([`Reader::Events`]); a follower not taken is let go.
pub struct Started {
    pub run: Arc<LiveRun>,
    reader: Reader,
    follower: Option<u64>,
}

impl Started {
    /// `run`, not begun yet, with a follower attached from its first event for a
    /// [`Reader::Events`].
    fn for_reader(run: Arc<LiveRun>, reader: Reader) -> Started {
        let follower = match reader {
            Reader::Events => run.lock_log().attach(run.base_seq + 1),
            Reader::Outcome => None,
        };
        Started {
            run,
            reader,
            follower,
        }
    }

    /// Whether the request reads the run's events ([`Reader::Events`]).
    pub fn reads_events(&self) -> bool {
        self.reader == Reader::Events
    }

    /// The run's events from its first here (`base_seq`) on.
    pub fn events(mut self) -> impl Stream<Item = Event> + Send + 'static + use<> {
        let next = self.run.base_seq + 1;
        let id = self
            .follower
            .take()
            .or_else(|| self.run.lock_log().attach(next));
        self.run.follow(next, id)
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        if let Some(id) = self.follower.take() {
            self.run.lock_log().detach(id);
        }
    }
}

/// A client following a run: from memory while memory has what it needs next, from the store
/// otherwise.
struct Follower {
    run: Arc<LiveRun>,
    progress: watch::Receiver<Progress>,
    /// The seq it sends next.
    next: u64,
    /// Its id while it reads from memory.
    id: Option<u64>,
}

impl Follower {
    /// The next events; `None` when the run ended and everything was sent, or when this
    /// follower was dropped.
    async fn next_batch(&mut self) -> Option<Vec<Event>> {
        loop {
            let Some(id) = self.id else {
                let attached = self.run.lock_log().attach(self.next);
                self.id = attached;
                if attached.is_some() {
                    continue;
                }
                match self.read_store().await {
                    Some(batch) if batch.is_empty() => continue,
                    other => return other,
                }
            };
            // Seen before reading, so an event that comes after the read wakes the wait.
            let finished = self.progress.borrow_and_update().finished;
            let read = self.run.lock_log().read(id);
            match read {
                Read::Events(events) => {
                    if let Some(last) = events.last() {
                        self.next = last.seq + 1;
                    }
                    return Some(events);
                }
                Read::Dropped => {
                    self.id = None;
                    tracing::debug!(run_id = %self.run.id, next = self.next, "a follower fell too far behind; its stream ends");
                    return None;
                }
                Read::Released => self.id = None,
                Read::CaughtUp if finished => return None,
                Read::CaughtUp => {
                    if self.progress.changed().await.is_err() {
                        return None;
                    }
                }
            }
        }
    }

    /// A page of events from the store; empty when they are not saved yet (after a wait, to be
    /// asked again); `None` when the run ended and all was sent, or the store fails.
    async fn read_store(&mut self) -> Option<Vec<Event>> {
        let Progress { last_seq, finished } = *self.progress.borrow_and_update();
        if finished && self.next > last_seq {
            return None;
        }
        // Without a store nothing leaves memory, so nothing is missing there.
        let store = self.run.store.clone()?;
        let events = match store.events(self.run.id, self.next - 1).await {
            Ok(events) => sse::first_page(events),
            Err(error) => {
                tracing::warn!(run_id = %self.run.id, %error, "cannot read the events of a run");
                return None;
            }
        };
        if let Some(last) = events.last() {
            self.next = last.seq + 1;
            return Some(events);
        }
        if finished {
            // Its end is not saved (its store went away): the client comes back for it.
            return None;
        }
        // Live text is saved with the step after it.
        tokio::time::sleep(sse::STORE_POLL).await;
        Some(Vec::new())
    }
}

impl Drop for Follower {
    fn drop(&mut self) {
        if let Some(id) = self.id.take() {
            self.run.lock_log().detach(id);
        }
    }
}

/// A run being driven: counted as active until dropped.
struct Active {
    registry: Arc<LiveRuns>,
    user: String,
}

impl Drop for Active {
    fn drop(&mut self) {
        self.registry.ended(&self.user);
    }
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
    lingering: Lingering,
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
    /// when the user already has as many runs in progress as allowed (429), and when
    /// the run cannot begin (its session is busy, unknown or another user's; the store fails).
    pub async fn start(
        self: &Arc<Self>,
        agent: &Agent,
        mut request: RunRequest,
        user: &str,
        reader: Reader,
    ) -> Result<Started, ApiError> {
        self.daily
            .admit(
                agent.store().map(|store| store.as_ref()),
                user,
                chrono::Utc::now(),
            )
            .await?;
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        let session_id = request.new_session_id();
        let run = self.admit(agent, run_id, session_id, 0, user, true)?;
        let started = Started::for_reader(run, reader);
        let begun = match agent.begin(request).await {
            Ok(begun) => begun,
            Err(error) => {
                self.discard(&started.run);
                return Err(error.into());
            }
        };
        let agent = agent.clone();
        self.spawn(
            started.run.clone(),
            async move |live: Arc<LiveRun>, sink| {
                agent.run_begun(begun, sink, live.cancel.clone()).await
            },
        );
        Ok(started)
    }

    /// Forgets a run that was admitted but never began.
    fn discard(&self, run: &Arc<LiveRun>) {
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
        let run = self.admit(
            agent,
            resumed.run_id(),
            resumed.session_id(),
            resumed.last_seq(),
            user,
            limited,
        )?;
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
    /// in progress as allowed.
    fn admit(
        &self,
        agent: &Agent,
        run_id: Uuid,
        session_id: Uuid,
        base_seq: u64,
        user: &str,
        limited: bool,
    ) -> Result<Arc<LiveRun>, ApiError> {
        if self.is_shutting_down() {
            return Err(ApiError::unavailable(
                "the server is shutting down; send the request again in a moment",
            ));
        }
        let store = agent.store().cloned();
        let run = Arc::new(LiveRun {
            id: run_id,
            user_id: user.to_string(),
            session_id,
            base_seq,
            cancel: CancellationToken::new(),
            log: Mutex::new(Log::new(base_seq, store.is_some())),
            store,
            ended: watch::Sender::new(None),
            progress: watch::Sender::new(Progress {
                last_seq: base_seq,
                finished: false,
            }),
        });
        {
            let mut runs = self.lock_runs();
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
            runs.insert(run_id, run.clone());
            *active_per_user.entry(user.to_owned()).or_default() += 1;
        }
        Ok(run)
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
    fn task<F, Fut>(
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
            run.finish(outcome, active).await;
            registry.linger(run);
        })
    }

    /// Keeps a finished run registered a while ([`LINGER`]), its outcome a moment.
    fn linger(self: &Arc<Self>, run: Arc<LiveRun>) {
        if self.lingering.push(run, tokio::time::Instant::now()) {
            // Not tracked: shutdown need not wait for it.
            tokio::spawn(reap(Arc::downgrade(self)));
        }
    }

    /// Unregisters runs that finished [`LINGER`] ago.
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

    fn lock_runs(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<LiveRun>>> {
        lock(&self.runs)
    }
}

/// Every lock here is held for a few steps that leave the data valid, so a poisoned one is
/// still good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
