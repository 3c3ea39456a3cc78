//! One step of a run, written in one transaction: a reader sees all of it or none of it, and the
//! step's events are emitted only once it is stored. On PostgreSQL most steps are one statement
//! (see `one_statement`): one round trip instead of one per statement.

use agentloop_core::protocol::Role;
use agentloop_core::{StepRecord, StoreError};
use chrono::{DateTime, Utc};

use crate::attachments::StepAttachments;
use crate::columns::{millis, now};
#[cfg(feature = "postgres")]
use crate::db::Engine;
use crate::db::{Db, Tx, changed};
use crate::durable::EncodedCheckpoint;
use crate::events::EventRow;
use crate::locks::LockAfterStep;
use crate::messages::MessageRow;
#[cfg(feature = "postgres")]
use crate::one_statement;
use crate::outputs::SharedOutputs;
use crate::records::RecordRow;
use crate::sql::Query;
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
    write(db, step, None).await
}

/// Writes `step` in `within`, a transaction the caller commits (a run's beginning that brings
/// its first step); in a transaction of its own (or one statement) without.
pub(crate) async fn write<'d>(
    db: &'d Db,
    step: &StepRecord,
    within: Option<&mut Tx<'d>>,
) -> Result<(), StoreError> {
    let rows = StepRows::encode(db, step)?;
    let run_id = step.run_id.to_string();
    let session_id = step.session_id.to_string();

    // The run's row first: a step of an unknown run, or of a run adopted by another instance,
    // changes no row there and writes nothing else.
    let progress = runs::progress_query(
        db,
        &run_id,
        runs::Progress {
            progress: &step.progress,
            end: step.end.as_ref(),
            head: rows.head(),
            owner: step.owner.as_deref(),
        },
    );
    // Whether the rows fit one statement: PostgreSQL's concern only.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    let (mut rest, in_order) = rows.queries(db, &run_id);
    let lock = step.end.as_ref().map(|end| match end.status.is_final() {
        true => LockAfterStep::Release,
        // A paused run keeps its session until it resumes or is cancelled.
        false => LockAfterStep::Hold,
    });
    let touched_at = session_touch(step).map(millis);
    rest.extend(locks::after_step(
        db,
        &session_id,
        &run_id,
        touched_at,
        lock,
    ));

    #[cfg(feature = "postgres")]
    if let Engine::Postgres(pool) = &db.engine
        && rows.shared.is_empty()
        && rows.attachments.is_empty()
        && in_order
        && one_statement::fits(&progress, &rest)
    {
        return match within {
            Some(tx) => one_statement::run_within(tx, progress, rest).await,
            None => one_statement::run(db, pool, progress, rest, &run_id).await,
        };
    }
    let mut own = None;
    let tx = match within {
        Some(tx) => tx,
        None => own.insert(db.begin().await?),
    };
    if !changed(&progress.execute(&mut *tx).await?) {
        return Err(runs::not_written(db, &mut *tx, &run_id).await);
    }
    rows.shared.insert(db, tx, &run_id).await?;
    rows.attachments.insert(db, tx).await?;
    for query in rest {
        query.execute(&mut *tx).await?;
    }
    match own {
        Some(tx) => tx.commit().await,
        None => Ok(()),
    }
}

/// A step's rows, encoded before a transaction opens, so that nothing but the database runs
/// while it holds locks. A large tool output in both a message and a record is kept once (see
/// `outputs`).
pub(crate) struct StepRows<'s> {
    pub(crate) shared: SharedOutputs<'s>,
    /// The bytes of the messages' attachments (see `attachments`).
    pub(crate) attachments: StepAttachments<'s>,
    messages: Vec<MessageRow<'s>>,
    records: Vec<RecordRow<'s>>,
    events: Vec<EventRow>,
    checkpoint: Option<EncodedCheckpoint<'s>>,
}

impl<'s> StepRows<'s> {
    pub(crate) fn encode(db: &Db, step: &'s StepRecord) -> Result<Self, StoreError> {
        let mut shared = SharedOutputs::default();
        let mut attachments = StepAttachments::default();
        let messages = step
            .messages
            .iter()
            .map(|message| {
                MessageRow::encode(db, message, step.run_id, &mut shared, &mut attachments)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let records = records::encode(db, &step.records, &mut shared)?;
        Ok(Self {
            shared,
            attachments,
            messages,
            records,
            events: events::encode(&step.events)?,
            checkpoint: step.checkpoint.as_ref().map(durable::encode).transpose()?,
        })
    }

    /// The head of the step's checkpoint, and the seq it was taken at.
    pub(crate) fn head(&self) -> Option<(&str, u64)> {
        self.checkpoint
            .as_ref()
            .map(|checkpoint| (checkpoint.head, checkpoint.last_seq))
    }

    /// The statements that insert the rows (what the run starts from and its turn, messages,
    /// tool records, events), and whether they keep their order as the parts of one statement:
    /// numbered rows (messages, tool records) keep it within one statement only, since the
    /// parts of one statement run in no set order.
    pub(crate) fn queries<'p>(&'p self, db: &Db, run_id: &'p str) -> (Vec<Query<'p>>, bool) {
        let mut queries = Vec::new();
        if let Some(checkpoint) = &self.checkpoint {
            queries.extend(durable::checkpoint_queries(
                db,
                run_id,
                checkpoint.input.as_deref(),
                &checkpoint.turn,
            ));
        }
        let message_inserts = messages::insert_queries(db, &self.messages);
        let record_upserts = records::upsert_queries(db, run_id, &self.records);
        let in_order = message_inserts.len() <= 1 && record_upserts.len() <= 1;
        queries.extend(message_inserts);
        queries.extend(record_upserts);
        // On PostgreSQL, inserting events also notifies the followers of every instance, when
        // the step commits (a trigger: migration 10).
        queries.extend(events::insert_queries(db, run_id, &self.events));
        (queries, in_order)
    }
}
