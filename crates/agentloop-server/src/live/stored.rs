//! Following a run through the store: a run that is not live here (another instance runs it,
//! or it ended a while ago), and the events a live run no longer holds in memory. What is read
//! from the store is kept a page at a time, so a slow client holds at most a page of a long
//! run.

use std::{sync::Arc, time::Duration};

use agentloop_core::{
    Store,
    protocol::{Event, RunStatus},
};
use futures::{Stream, StreamExt};
use tokio::sync::broadcast::error::RecvError;
use uuid::Uuid;

use super::MAX_BACKLOG_BYTES;
use super::log::event_bytes;

/// How often the store is asked for events not saved yet, when it gives no news of runs.
pub(super) const STORE_POLL: Duration = Duration::from_millis(500);
/// How often it is asked anyway when it gives news (for news that went missing).
const STORE_POLL_WITH_NEWS: Duration = Duration::from_secs(3);
/// The most a client keeps of what it read from the store at a time: as much as a live run
/// may hold for it. A run with more is read again from where the client got to.
const STORE_PAGE_BYTES: usize = MAX_BACKLOG_BYTES;
/// A run elsewhere that emitted nothing for this long is presumed lost (its process died).
const STORE_PATIENCE: Duration = Duration::from_secs(600);

/// The events of a run known only to the store, with `seq > after`: what is saved, then what
/// gets saved while the run goes on.
pub fn from_store(
    store: Arc<dyn Store>,
    run_id: Uuid,
    after: u64,
) -> impl Stream<Item = Event> + Send {
    let state = Polling {
        news: store.run_news(),
        store,
        after,
        last_news: tokio::time::Instant::now(),
        wait: false,
    };
    let batches = futures::stream::unfold(state, move |mut state| async move {
        if state.wait {
            state.wait_for_news(run_id).await;
        }
        let events = match state.store.events(run_id, state.after).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%run_id, %error, "cannot read the events of a run");
                return None;
            }
        };
        let read = events.len();
        let events = first_page(events);
        // A page that left events behind is followed at once.
        state.wait = events.len() == read;
        if let Some(last) = events.last() {
            state.after = last.seq;
            state.last_news = tokio::time::Instant::now();
            return Some((futures::stream::iter(events), state));
        }
        let running = matches!(
            state.store.run(run_id).await,
            Ok(Some(run)) if run.status == RunStatus::Running
        );
        if !running || state.last_news.elapsed() > STORE_PATIENCE {
            return None;
        }
        Some((futures::stream::iter(Vec::new()), state))
    });
    batches.flatten()
}

/// Where a client following a run through the store stands.
struct Polling {
    store: Arc<dyn Store>,
    /// News of runs from the store, when it gives them: a step of this run wakes the follower
    /// at once (from another instance too, on PostgreSQL).
    news: Option<tokio::sync::broadcast::Receiver<Uuid>>,
    after: u64,
    last_news: tokio::time::Instant,
    /// Whether to wait before asking the store again.
    wait: bool,
}

impl Polling {
    /// Until the store says `run_id` saved a step (or it may have said so unheard), at most
    /// [`STORE_POLL_WITH_NEWS`]; without news, [`STORE_POLL`].
    async fn wait_for_news(&mut self, run_id: Uuid) {
        let Some(news) = &mut self.news else {
            tokio::time::sleep(STORE_POLL).await;
            return;
        };
        let deadline = tokio::time::Instant::now() + STORE_POLL_WITH_NEWS;
        loop {
            match tokio::time::timeout_at(deadline, news.recv()).await {
                Ok(Ok(id)) if id != run_id => continue,
                // This run, news missed, or time to look anyway.
                Ok(Ok(_)) | Ok(Err(RecvError::Lagged(_))) | Err(_) => return,
                Ok(Err(RecvError::Closed)) => {
                    self.news = None;
                    return;
                }
            }
        }
    }
}

/// The first events of `events`, up to [`STORE_PAGE_BYTES`] (at least one); the rest is let
/// go, to be read again when the client gets there.
pub(super) fn first_page(mut events: Vec<Event>) -> Vec<Event> {
    let mut bytes = 0;
    let end = events
        .iter()
        .position(|event| {
            bytes += event_bytes(event);
            bytes > STORE_PAGE_BYTES
        })
        .map_or(events.len(), |over| over.max(1));
    events.truncate(end);
    events.shrink_to_fit();
    events
}
