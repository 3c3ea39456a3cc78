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
//!
//! The parts: the registry of the server's runs ([`registry`]), one run and its end ([`run`]),
//! its events in memory ([`log`]), the clients that follow it ([`follower`]), the runs that
//! are read from the store ([`stored`]), and the finished runs let go after a while
//! ([`linger`]).

use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

mod follower;
mod linger;
mod log;
mod registry;
mod run;
mod stored;

pub use follower::{Reader, Started};
pub use registry::{LiveRuns, Start};
pub use run::LiveRun;
pub use stored::from_store;

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

/// Every lock here is held for a few steps that leave the data valid, so a poisoned one is
/// still good.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
