//! Saving a run's steps: each step is stored, then its events are emitted ("saved, then
//! emitted"). A step the store refuses is retried with backoff for a bounded time; if the store
//! stays away, the step's events are never sent (a client is never told of what is not stored)
//! and the run ends `failed` with `store_unavailable`. That ending is sent at once and saved
//! when the store comes back, so the run does not stay `running` with its session held.

use std::{sync::Arc, time::Duration};

use agentloop_protocol::Event;
use uuid::Uuid;

use crate::{
    emitter::Emitter,
    machine::{MachineChanges, RunMachine, RunOutcome, Step},
    store::{Checkpoint, RunEnd, SESSION_LEASE, StepRecord, Store, StoreError},
    telemetry::Telemetry,
};

/// The first wait before a step is saved again; it doubles up to [`MAX_BACKOFF`].
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// Where a run's steps are saved.
#[derive(Clone)]
pub struct Persistence {
    pub store: Arc<dyn Store>,
    /// False when the run must leave no trace in its session (`save_chat: false`).
    pub save_messages: bool,
    /// How long a step the store refuses is tried again before the run ends failed
    /// (`[agent] store_retry_s`).
    pub retry: std::time::Duration,
    /// The instance that works on the run: its steps are refused once another adopted it.
    pub owner: Option<String>,
    /// Whether the run's input was saved already (a run that resumes).
    pub input_saved: bool,
    /// Set when the run's history came from its session (that many dialogue messages): the
    /// store reads it again for a run that goes on, rather than keep a copy.
    pub history_window: Option<usize>,
    /// Cancelled when the instance hands its runs over ([`crate::Agent::hand_over`]).
    pub handover: tokio_util::sync::CancellationToken,
}

/// Saves each step, then emits its events.
pub(crate) struct StepWriter {
    persistence: Option<Persistence>,
    /// Live text events already sent, waiting to be saved with the next step.
    deltas: Vec<Event>,
    telemetry: Arc<dyn Telemetry>,
    /// Set once the store stayed away longer than the retry period: what could not be saved,
    /// with only the events clients did receive.
    lost: Option<StepRecord>,
    /// Set once another instance took the run over: every later step is refused at once,
    /// without asking the store again.
    disowned: Option<StoreError>,
}

impl StepWriter {
    pub(crate) fn new(persistence: Option<Persistence>, telemetry: Arc<dyn Telemetry>) -> Self {
        Self {
            persistence,
            deltas: Vec::new(),
            telemetry,
            lost: None,
            disowned: None,
        }
    }

    /// Keeps a live event (already sent) to save it with the next step.
    pub(crate) fn keep_delta(&mut self, event: &Event) {
        if self.persistence.is_some() {
            self.deltas.push(event.clone());
        }
    }

    /// Takes what the machine changed, saves it, then sends its events. When the store cannot
    /// take the step within the retry period, nothing of it is sent and the error is returned:
    /// the caller ends the run with [`Input::StoreLost`](crate::machine::Input::StoreLost), whose step is then sent
    /// whether or not it can be saved (the client must learn how its run ended).
    /// `ended`: how the run ended, when this step is its end.
    pub(crate) async fn commit(
        &mut self,
        machine: &mut RunMachine,
        emitter: &mut Emitter,
        ended: Option<&RunOutcome>,
    ) -> Result<(), StoreError> {
        if let Some(error) = &self.disowned {
            return Err(error.clone());
        }
        let sent_before = emitter.last_seq();
        let (changes, events) = take_numbered(machine, emitter, self.telemetry.as_ref());
        let Some(persistence) = &self.persistence else {
            send(emitter, events);
            return Ok(());
        };
        let mut record = step_record(persistence, machine, ended, changes, emitter.last_seq())?;
        record.events = std::mem::take(&mut self.deltas);
        if let Some(mut lost) = self.lost.take() {
            // The run's failure after the store went away: sent now, saved when it can be,
            // together with what the earlier steps could not save.
            let kept: Vec<Uuid> = ended
                .map(|outcome| outcome.messages.iter().map(|m| m.id).collect())
                .unwrap_or_default();
            lost.messages.retain(|message| kept.contains(&message.id));
            merge(&mut lost, record);
            lost.events.extend(events.iter().cloned());
            send(emitter, events);
            let store = persistence.store.clone();
            let retry = persistence.retry;
            if let Err(error) = save_with_retry(store.as_ref(), &lost, retry).await {
                tracing::warn!(run_id = %lost.run_id, %error,
                    "cannot save the end of a run whose store went away; trying again in the background");
                tokio::spawn(save_late(store, lost));
            }
            return Ok(());
        }
        // The step's events go into the record, and out of it to be sent once it is saved.
        let fresh = record.events.len();
        record.events.extend(events);
        match save_with_retry(persistence.store.as_ref(), &record, persistence.retry).await {
            Ok(()) => {
                if let Some(persistence) = &mut self.persistence {
                    persistence.input_saved = true;
                }
                emitter.saved();
                send(emitter, record.events.split_off(fresh));
                Ok(())
            }
            // Another instance works on the run now: nothing more is written or sent here.
            Err(error @ StoreError::NotOwner(_)) => {
                tracing::warn!(run_id = %record.run_id, %error, "the run went on elsewhere; this instance stops working on it");
                emitter.rewind(sent_before);
                self.disowned = Some(error.clone());
                Err(error)
            }
            Err(error) => {
                // Nothing of this step reaches a client; what was sent live stays in the record.
                emitter.rewind(sent_before);
                record.events.retain(|event| event.seq <= sent_before);
                record.end = None;
                self.lost = Some(record);
                Err(error)
            }
        }
    }
}

/// The record of a run's first step, made before the run is saved (to be saved with its
/// beginning): what `machine` changed, its events numbered from 1.
pub(crate) fn first_record(
    persistence: &Persistence,
    machine: &mut RunMachine,
    step: &Step,
    telemetry: &dyn Telemetry,
) -> Result<StepRecord, StoreError> {
    let mut numbering = Emitter::numbering(machine.run_id());
    let (changes, events) = take_numbered(machine, &mut numbering, telemetry);
    let mut record = step_record(
        persistence,
        machine,
        step.ended(),
        changes,
        numbering.last_seq(),
    )?;
    record.events = events;
    Ok(record)
}

/// What `machine` changed since its changes were last taken, its tool records reported to
/// `telemetry`, and its events numbered by `emitter` (not sent).
fn take_numbered(
    machine: &mut RunMachine,
    emitter: &mut Emitter,
    telemetry: &dyn Telemetry,
) -> (MachineChanges, Vec<Event>) {
    let mut changes = machine.take_changes();
    for record in &changes.records {
        telemetry.tool_call(machine.run_id(), record);
    }
    let events = std::mem::take(&mut changes.events)
        .into_iter()
        .map(|kind| emitter.number(kind))
        .collect();
    (changes, events)
}

/// What `machine` changed in a step (`ended`: the run's end, when it is one), as the store saves it (without events): its messages (or
/// its turn, for a run that saves no chat), tool records, counters, end, and the checkpoint the
/// run goes on from, `last_seq` being its last event.
fn step_record(
    persistence: &Persistence,
    machine: &mut RunMachine,
    ended: Option<&RunOutcome>,
    changes: MachineChanges,
    last_seq: u64,
) -> Result<StepRecord, StoreError> {
    let end = ended.map(|outcome| RunEnd {
        status: outcome.status,
        answer_message_id: outcome.message_id,
        output: outcome.output.clone(),
        failure: outcome.failure.clone(),
        finalize_reason: outcome.finalize_reason,
        finished_at: crate::clock::now(),
    });
    // What the run needs to go on from this step. A state that cannot be written could
    // never resume: not saving the step at all is the honest failure.
    let head = machine.checkpoint_head().map_err(|error| {
        StoreError::corrupt(format!("the state of the run cannot be written: {error}"))
    })?;
    let input =
        (!persistence.input_saved).then(|| machine.state().fixed_input(persistence.history_window));
    let (messages, turn) = if persistence.save_messages {
        (changes.messages, Vec::new())
    } else {
        (Vec::new(), changes.messages)
    };
    let checkpoint = Checkpoint {
        input,
        head,
        last_seq,
        turn,
    };
    Ok(StepRecord {
        run_id: machine.run_id(),
        session_id: machine.input().session_id,
        messages,
        records: changes.records,
        events: Vec::new(),
        progress: changes.progress,
        end,
        checkpoint: Some(checkpoint),
        owner: persistence.owner.clone(),
    })
}

fn send(emitter: &Emitter, events: Vec<Event>) {
    for event in events {
        emitter.send(event);
    }
}

/// Adds `later` to `earlier`: messages, records and events in order, `later`'s counters and end.
fn merge(earlier: &mut StepRecord, later: StepRecord) {
    earlier.checkpoint = match (earlier.checkpoint.take(), later.checkpoint) {
        (Some(mut first), Some(last)) => {
            first.input = first.input.or(last.input);
            first.head = last.head;
            first.last_seq = last.last_seq;
            first.turn.extend(last.turn);
            Some(first)
        }
        (first, last) => last.or(first),
    };
    earlier.messages.extend(later.messages);
    earlier.records.extend(later.records);
    earlier.events.extend(later.events);
    earlier.progress = later.progress;
    earlier.end = later.end;
}

/// Saves `record`, trying again with backoff while the store is unavailable, for at most
/// `period`. A query the store refuses for another reason is not retried.
async fn save_with_retry(
    store: &dyn Store,
    record: &StepRecord,
    period: Duration,
) -> Result<(), StoreError> {
    let deadline = tokio::time::Instant::now() + period;
    let mut backoff = FIRST_BACKOFF;
    loop {
        let error = match store.save_step(record).await {
            Ok(()) => return Ok(()),
            Err(error) => error,
        };
        let now = tokio::time::Instant::now();
        if !error.is_transient() || now >= deadline {
            return Err(error);
        }
        tracing::warn!(run_id = %record.run_id, %error, "cannot save a step; trying again");
        tokio::time::sleep(backoff.min(deadline - now)).await;
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

/// Keeps trying to save the failed end of a run for as long as its session lease would hold
/// it, so that a store that comes back finds the run ended and its session free.
async fn save_late(store: Arc<dyn Store>, record: StepRecord) {
    match save_with_retry(store.as_ref(), &record, SESSION_LEASE).await {
        Ok(()) => tracing::info!(run_id = %record.run_id, "saved the failed end of the run"),
        Err(error) => tracing::error!(run_id = %record.run_id, %error,
            "gave up saving the end of the run; it stays `running` in the store"),
    }
}
