//! The clients that follow a run: from memory while memory has what they need next, from the
//! store otherwise; and the follower a streaming request attaches before its run begins.

use std::sync::Arc;

use agentloop_core::protocol::Event;
use futures::Stream;
use tokio::sync::watch;

use super::log::Read;
use super::run::{LiveRun, Progress};
use super::stored::{STORE_POLL, first_page};

impl LiveRun {
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
    pub(super) fn for_reader(run: Arc<LiveRun>, reader: Reader) -> Started {
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
            Ok(events) => first_page(events),
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
        tokio::time::sleep(STORE_POLL).await;
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
