//! One run in progress (or just finished): what it emitted that followers still need, its end,
//! and how to stop it.

use std::sync::{Arc, Mutex, MutexGuard};

use agentloop_core::{
    EventSink, RunOutcome, Store,
    protocol::{Event, RunStatus},
};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use super::log::Log;
use super::{Held, MAX_BACKLOG_BYTES, lock};
use crate::error::ApiError;

/// One run in progress (or just finished).
pub struct LiveRun {
    pub id: Uuid,
    pub user_id: String,
    pub session_id: Uuid,
    /// The seq of the last event before this process took the run over (a resumed run's
    /// earlier events are in the store); the ones after it are sent from here.
    pub base_seq: u64,
    pub(super) cancel: CancellationToken,
    /// Where events that left memory are read again. Without one, nothing leaves memory.
    pub(super) store: Option<Arc<dyn Store>>,
    pub(super) log: Mutex<Log>,
    /// Set at the end; kept while requests wait for it, and `OUTCOME_KEPT` at least.
    pub(super) ended: watch::Sender<Option<Arc<RunOutcome>>>,
    pub(super) progress: watch::Sender<Progress>,
    /// Whether the run began: a request that follows it from its start (the same request
    /// again) waits for this, and is refused as the run was.
    pub(super) beginning: watch::Sender<Beginning>,
}

/// Where a registered run stands with its beginning.
#[derive(Debug, Clone)]
pub(super) enum Beginning {
    /// Admitted, its beginning in the store not done yet.
    Pending,
    Begun,
    /// It never began, for this reason; it is unregistered.
    Refused(ApiError),
}

#[derive(Clone, Copy, Default)]
pub(super) struct Progress {
    /// The seq of the newest event.
    pub(super) last_seq: u64,
    pub(super) finished: bool,
}

impl LiveRun {
    /// A run not begun yet, whose events after `base_seq` are sent from here.
    pub(super) fn new(
        id: Uuid,
        user_id: &str,
        session_id: Uuid,
        base_seq: u64,
        store: Option<Arc<dyn Store>>,
    ) -> LiveRun {
        LiveRun {
            id,
            user_id: user_id.to_string(),
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
            beginning: watch::Sender::new(Beginning::Pending),
        }
    }

    /// Waits until the run began; its refusal when it never did.
    pub async fn begun(&self) -> Result<(), ApiError> {
        let mut beginning = self.beginning.subscribe();
        let outcome = beginning
            .wait_for(|state| !matches!(state, Beginning::Pending))
            .await;
        match outcome.as_deref() {
            Ok(Beginning::Refused(error)) => Err(error.clone()),
            Ok(_) => Ok(()),
            // The sender lives in `self`: not while borrowed.
            Err(_) => Err(ApiError::internal("a run's beginning was lost")),
        }
    }

    /// The run began: followers waiting for it go on.
    pub(super) fn began(&self) {
        self.beginning.send_replace(Beginning::Begun);
    }

    /// The run never began, for `error`: followers waiting for its beginning get `error`, and
    /// the ones attached already learn that nothing comes.
    pub(super) fn refused(&self, error: &ApiError) {
        self.beginning
            .send_replace(Beginning::Refused(error.clone()));
        self.progress.send_modify(|p| p.finished = true);
    }

    /// Asks the run to stop at its next safe point.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    pub fn is_finished(&self) -> bool {
        self.progress.borrow().finished
    }

    /// Waits for the end of the run; `None` when asked after the outcome was forgotten
    /// (`OUTCOME_KEPT` after the end at the earliest, once no request waits for it).
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

    pub(super) fn lock_log(&self) -> MutexGuard<'_, Log> {
        lock(&self.log)
    }

    /// Records the end: requests waiting for the outcome get it, followers learn that nothing
    /// more comes. Returns how it ended.
    pub(super) fn end(&self, outcome: RunOutcome) -> RunStatus {
        let status = outcome.status;
        self.ended.send_replace(Some(Arc::new(outcome)));
        self.progress.send_modify(|p| p.finished = true);
        status
    }

    /// Once the store is known to have the end, `status` (and with it every event: the driver saw the
    /// step with the last event saved, or the store says so), lets go of the events. A run
    /// that never started, or whose store went away, is not in the store (yet): its events
    /// stay for the followers.
    pub(super) async fn release_if_saved(&self, status: RunStatus) {
        let Some(store) = &self.store else {
            return;
        };
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
