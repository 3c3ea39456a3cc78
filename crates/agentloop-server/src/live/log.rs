//! A run's events in memory: the ones its followers have not read yet, and the newest ones the
//! store does not have yet, bounded in bytes (see the module above).

use std::collections::{HashMap, VecDeque};

use agentloop_core::protocol::{Event, EventKind};
use serde::Serialize;

use super::{BATCH_BYTES, MAX_BACKLOG_BYTES, RECENT_BYTES};

/// A run's events in memory: the ones a follower has not read yet, and the newest ones not
/// saved yet.
pub(super) struct Log {
    /// In seq order, without gaps.
    pub(super) events: VecDeque<HeldEvent>,
    pub(super) bytes: usize,
    /// The seq of the next event to come.
    pub(super) next_seq: u64,
    /// The seq of the last event the store has: the step that ended with it was saved.
    pub(super) saved_seq: u64,
    /// Followers reading from memory, by id: the seq each reads next.
    pub(super) followers: HashMap<u64, u64>,
    pub(super) next_follower: u64,
    /// Followers dropped so far.
    pub(super) dropped: usize,
    /// Whether events may leave memory (the run has a store to read them from).
    pub(super) bounded: bool,
    /// The run ended and is saved: nothing is held, followers read the store.
    pub(super) released: bool,
}

pub(super) struct HeldEvent {
    pub(super) event: Event,
    pub(super) bytes: usize,
}

/// What a follower reading from memory gets.
pub(super) enum Read {
    Events(Vec<Event>),
    /// Nothing new yet.
    CaughtUp,
    /// It fell too far behind.
    Dropped,
    /// Memory no longer has the run: read the store.
    Released,
}

impl Log {
    pub(super) fn new(base_seq: u64, bounded: bool) -> Log {
        Log {
            events: VecDeque::new(),
            bytes: 0,
            next_seq: base_seq + 1,
            saved_seq: base_seq,
            followers: HashMap::new(),
            next_follower: 0,
            dropped: 0,
            bounded,
            released: false,
        }
    }

    /// Adds the newest event; returns how many followers were dropped to make room. An event
    /// the store has and no follower needs is not held (a run answered as a whole, with
    /// nobody following it, holds nothing).
    pub(super) fn push(&mut self, event: Event) -> usize {
        self.next_seq = event.seq + 1;
        let unneeded = event.seq <= self.saved_seq && event.seq < self.needed();
        if self.released || (self.bounded && unneeded) {
            return 0;
        }
        let bytes = event_bytes(&event);
        self.bytes += bytes;
        self.events.push_back(HeldEvent { event, bytes });
        if !self.bounded {
            return 0;
        }
        let dropped = self.drop_laggards();
        self.trim();
        dropped
    }

    /// Drops the followers furthest behind until what is held fits [`MAX_BACKLOG_BYTES`]. The
    /// newest event stays whatever its size: the followers that still have to read it are
    /// not behind.
    pub(super) fn drop_laggards(&mut self) -> usize {
        let newest = self.next_seq - 1;
        let mut dropped = 0;
        while self.bytes > MAX_BACKLOG_BYTES {
            let laggard = self
                .followers
                .iter()
                .filter(|(_, next)| **next < newest)
                .min_by_key(|(_, next)| **next)
                .map(|(id, _)| *id);
            let Some(laggard) = laggard else {
                break;
            };
            self.followers.remove(&laggard);
            dropped += 1;
            self.dropped += 1;
            self.trim();
        }
        dropped
    }

    /// The store has every event up to `last_seq`: those no follower needs leave memory.
    pub(super) fn saved(&mut self, last_seq: u64) {
        self.saved_seq = self.saved_seq.max(last_seq);
        self.trim();
    }

    /// The first seq a follower still has to read (`u64::MAX` without followers).
    fn needed(&self) -> u64 {
        self.followers.values().min().copied().unwrap_or(u64::MAX)
    }

    /// Whether the event `seq`, the oldest held, stays: a follower needs it, or the store does
    /// not have it yet and what is held fits [`RECENT_BYTES`].
    fn holds(&self, seq: u64, needed: u64) -> bool {
        seq >= needed || (seq > self.saved_seq && self.bytes <= RECENT_BYTES)
    }

    /// Lets go of the oldest events that no follower needs and the store has, and of the oldest
    /// not saved yet beyond [`RECENT_BYTES`].
    pub(super) fn trim(&mut self) {
        if !self.bounded {
            return;
        }
        let needed = self.needed();
        while let Some(oldest) = self.events.front() {
            if self.holds(oldest.event.seq, needed) {
                break;
            }
            self.bytes -= oldest.bytes;
            self.events.pop_front();
        }
    }

    /// Registers a follower that reads from `next` on, when memory has it.
    pub(super) fn attach(&mut self, next: u64) -> Option<u64> {
        let first = self
            .events
            .front()
            .map_or(self.next_seq, |held| held.event.seq);
        if self.released || next < first {
            return None;
        }
        let id = self.next_follower;
        self.next_follower += 1;
        self.followers.insert(id, next);
        Some(id)
    }

    pub(super) fn detach(&mut self, id: u64) {
        if self.followers.remove(&id).is_some() {
            self.trim();
        }
    }

    /// The next events of follower `id`, at most [`BATCH_BYTES`] (at least one event).
    pub(super) fn read(&mut self, id: u64) -> Read {
        let Some(next) = self.followers.get(&id).copied() else {
            return Read::Dropped;
        };
        if self.released {
            self.followers.remove(&id);
            return Read::Released;
        }
        let start = self.events.partition_point(|held| held.event.seq < next);
        let mut batch = Vec::new();
        let mut bytes = 0;
        for held in self.events.range(start..) {
            if !batch.is_empty() && bytes + held.bytes > BATCH_BYTES {
                break;
            }
            bytes += held.bytes;
            batch.push(held.event.clone());
        }
        let Some(last) = batch.last() else {
            return Read::CaughtUp;
        };
        self.followers.insert(id, last.seq + 1);
        self.trim();
        Read::Events(batch)
    }

    /// Lets go of every event. The followers stay registered until they learn it, so one
    /// dropped before still learns that it was.
    pub(super) fn release(&mut self) {
        self.events = VecDeque::new();
        self.bytes = 0;
        self.released = true;
    }
}

/// An event's size in memory, roughly: the struct, its text, and its other fields as JSON.
pub(super) fn event_bytes(event: &Event) -> usize {
    let fields = match &event.kind {
        EventKind::AssistantDelta { text } => text.len(),
        EventKind::FinalResponse { delta } => delta.len(),
        kind => json_len(kind),
    };
    std::mem::size_of::<Event>() + fields
}

pub(super) fn json_len(value: &impl Serialize) -> usize {
    struct Counter(usize);
    impl std::io::Write for Counter {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0 += bytes.len();
            Ok(bytes.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    // Counting cannot fail; a value that cannot be serialised counts what it wrote.
    let _ = serde_json::to_writer(&mut counter, value);
    counter.0
}
