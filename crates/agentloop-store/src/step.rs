//! One step of a run, written in one transaction: a reader sees all of it or none of it, and the
//! step's events are emitted only once it is stored.

use agentloop_core::protocol::Role;
use agentloop_core::{StepRecord, StoreError};
use chrono::{DateTime, Utc};

use crate::columns::{millis, now};
use crate::db::Db;
use crate::messages::MessageRow;
use crate::outputs::SharedOutputs;
use crate::{durable, events, locks, messages, records, runs};

/// Whether a step moves its session's `updated_at`, and to when: a step that brings a user's
/// message (the question, a steering message) to when the newest of them arrived; one that ends
/// or pauses its run with messages to now. The steps between (replies, tool results) leave it:
/// the session row and its two indexes on `updated_at` would otherwise be written again in every
/// step, a third of the pages a step writes. The question arrived before its run began, and the
/// beginning of a run on a new session set `updated_at` already: the question's step then writes
/// nothing there.
fn session_touch(step: &StepRecord) -> Option<DateTime<Utc>> {
    if step.messages.is_empty() {
        return None;
    }
    if step.end.is_some() {
        return Some(now());
    }
    step.messages
        .iter()
        .filter(|message| message.message.role == Role::User)
        .map(|message| message.created_at)
        .max()
}

pub(crate) async fn save(db: &Db, step: &StepRecord) -> Result<(), StoreError> {
    // Encoded first, so that nothing but the database runs while the transaction holds locks.
    // A large tool output in both a message and a record is kept once (see `outputs`).
    let mut shared = SharedOutputs::default();
    let message_rows = step
        .messages
        .iter()
        .map(|message| MessageRow::encode(db, message, step.run_id, &mut shared))
        .collect::<Result<Vec<_>, _>>()?;
    let record_rows = records::encode(db, &step.records, &mut shared)?;
    let event_rows = events::encode(&step.events)?;
    let checkpoint = step.checkpoint.as_ref().map(durable::encode).transpose()?;
    let run_id = step.run_id.to_string();
    let session_id = step.session_id.to_string();

    let mut tx = db.begin().await?;
    // The run first: a step of an unknown run fails with NotFound before anything is written.
    let progress = runs::Progress {
        progress: &step.progress,
        end: step.end.as_ref(),
        head: checkpoint
            .as_ref()
            .map(|checkpoint| (checkpoint.head, checkpoint.last_seq)),
        owner: step.owner.as_deref(),
    };
    runs::record_progress(db, &mut tx, &run_id, progress).await?;
    if let Some(checkpoint) = &checkpoint {
        durable::write_checkpoint(
            db,
            &mut tx,
            &run_id,
            checkpoint.input.as_deref(),
            &checkpoint.turn,
        )
        .await?;
    }
    shared.insert(db, &mut tx, &run_id).await?;
    if !message_rows.is_empty() {
        messages::insert(db, &mut tx, &message_rows).await?;
    }
    if let Some(touched_at) = session_touch(step) {
        // Never backwards, should another process's clock be behind ours; and a row not moved
        // is not written at all.
        db.query("UPDATE sessions SET updated_at = $2 WHERE id = $1 AND updated_at < $2")
            .bind(session_id.as_str())
            .bind(millis(touched_at))
            .execute(&mut tx)
            .await?;
    }
    records::upsert(db, &mut tx, &run_id, &record_rows).await?;
    // On PostgreSQL, inserting events also notifies the followers of every instance, when the
    // step commits (a trigger: migration 10).
    events::insert(db, &mut tx, &run_id, &event_rows).await?;
    match &step.end {
        Some(end) if end.status.is_final() => {
            locks::release(db, &mut tx, &session_id, &run_id).await?;
        }
        // A paused run keeps its session until it resumes or is cancelled.
        Some(_) => locks::hold(db, &mut tx, &session_id, &run_id).await?,
        None => {}
    }
    tx.commit().await
}
