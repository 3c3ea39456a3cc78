//! Numbering a run's events and handing them to whoever listens.

use std::sync::Arc;

use agentloop_protocol::{Event, EventKind};
use uuid::Uuid;

/// Where a run's events go: a channel, a broadcast, a store. Must not block.
pub trait EventSink: Send + Sync {
    fn emit(&self, event: Event);

    /// The store has every event of the run up to `last_seq`: the step that ends with it was
    /// saved. A sink that keeps events for its readers may rely on the store for those.
    fn saved(&self, _last_seq: u64) {}
}

impl EventSink for tokio::sync::mpsc::UnboundedSender<Event> {
    fn emit(&self, event: Event) {
        // A receiver that went away is a consumer that stopped listening; the run goes on.
        let _ = self.send(event);
    }
}

/// A sink for events that are only numbered, not sent (see [`Emitter::numbering`]).
struct Nowhere;

impl EventSink for Nowhere {
    fn emit(&self, _event: Event) {}
}

/// Numbers a run's events and hands them to the sink.
pub struct Emitter {
    run_id: Uuid,
    last_seq: u64,
    sink: Arc<dyn EventSink>,
}

impl Emitter {
    pub fn new(run_id: Uuid, sink: Arc<dyn EventSink>) -> Self {
        Self::resuming(run_id, 0, sink)
    }

    /// Numbers events that are sent later, by another emitter ([`Emitter::send_saved`]).
    pub(crate) fn numbering(run_id: Uuid) -> Self {
        Self::new(run_id, Arc::new(Nowhere))
    }

    /// Continues a run whose events up to `last_seq` were already emitted.
    pub fn resuming(run_id: Uuid, last_seq: u64, sink: Arc<dyn EventSink>) -> Self {
        Self {
            run_id,
            last_seq,
            sink,
        }
    }

    pub fn emit(&mut self, kind: EventKind) {
        let event = self.number(kind);
        self.send(event);
    }

    /// Gives the event its place in the run, without sending it yet.
    pub fn number(&mut self, kind: EventKind) -> Event {
        self.last_seq += 1;
        Event {
            run_id: self.run_id,
            seq: self.last_seq,
            parent_run_id: None,
            kind,
        }
    }

    /// Where this emitter's events go.
    pub fn sink(&self) -> Arc<dyn EventSink> {
        self.sink.clone()
    }

    pub fn send(&self, event: Event) {
        self.sink.emit(event);
    }

    /// Tells the sink that the store has every event up to the last one numbered: called before
    /// a saved step's events are sent, so that a sink need not keep what the store has.
    pub(crate) fn saved(&self) {
        self.sink.saved(self.last_seq);
    }

    /// Gives an event of a sub-agent's run its place in this run's stream; it keeps its own
    /// `run_id`, and names this run as its parent.
    pub fn adopt(&mut self, mut event: Event) -> Event {
        self.last_seq += 1;
        event.seq = self.last_seq;
        event.parent_run_id = Some(self.run_id);
        event
    }

    /// Sends the saved events of a step numbered before this emitter existed (a run's first
    /// step, saved with its beginning), telling the sink first that the store has them; the
    /// next event comes after them.
    pub(crate) fn send_saved(&mut self, events: Vec<Event>) {
        if let Some(last) = events.iter().map(|event| event.seq).max() {
            self.last_seq = self.last_seq.max(last);
        }
        self.saved();
        for event in events {
            self.send(event);
        }
    }

    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// Takes back the places given to events after `last_seq` that were never sent.
    pub(crate) fn rewind(&mut self, last_seq: u64) {
        self.last_seq = last_seq.min(self.last_seq);
    }
}
