//! A run on a session made for it, begun with its first step. The session cannot exist yet (its
//! id was just made), so nothing is looked up or taken: the user (unless known), the session
//! taken by the run, the run's row with the state its first step left, what it starts from, the
//! question and the first events are inserted, in one transaction on SQLite (6 statements where
//! the general beginning and its step took 10) and as the parts of one statement on PostgreSQL
//! (one round trip where they took 8: see `one_statement`).
//!
//! A first step that ends the run or records a tool call takes the general way (`begin`), which
//! writes the step as any other.

use agentloop_core::{MissingSession, RunBegin, RunStart, StepRecord, StoreError};

use crate::columns::{millis, now};
use crate::db::{Db, Engine};
use crate::messages::MessageRow;
use crate::outputs::SharedOutputs;
use crate::{durable, events, locks, messages, one_statement, runs, sessions};

/// The first step of `start`, when the run can begin the fresh way.
pub(crate) fn first_step(start: &RunStart) -> Option<&StepRecord> {
    let step = start.first_step.as_ref()?;
    let plain = step.end.is_none() && step.records.is_empty() && step.checkpoint.is_some();
    // A run meant for an existing session is refused by the general way when there is none.
    let creates = !matches!(start.if_missing, MissingSession::Refuse);
    (start.session_is_new && creates && plain).then_some(step)
}

pub(crate) async fn begin(
    db: &Db,
    start: &RunStart,
    step: &StepRecord,
) -> Result<RunBegin, StoreError> {
    let run = &start.run;
    // Encoded first, so that nothing but the database runs while the transaction holds locks.
    let checkpoint = step.checkpoint.as_ref().map(durable::encode).transpose()?;
    let mut shared = SharedOutputs::default();
    let message_rows = step
        .messages
        .iter()
        .map(|message| MessageRow::encode(db, message, step.run_id, &mut shared))
        .collect::<Result<Vec<_>, _>>()?;
    let event_rows = events::encode(&step.events)?;
    let run_id = run.id.to_string();
    let created_at = now();
    let expires_at = locks::expiry(millis(created_at), start.lease);

    // In the order the foreign keys need on SQLite, which checks each statement as it runs.
    let session_rows = match &start.if_missing {
        MissingSession::Create(session) => {
            let held_by = Some((run_id.as_str(), expires_at));
            Vec::from(sessions::insert_queries(db, session, created_at, held_by))
        }
        MissingSession::Refuse | MissingSession::Ignore => Vec::new(),
    };
    let head = checkpoint
        .as_ref()
        .map(|checkpoint| (checkpoint.head, checkpoint.last_seq));
    let run_row = runs::start_query(db, run, head, &step.progress);
    let mut rest = Vec::new();
    if let Some(checkpoint) = &checkpoint {
        rest.extend(durable::checkpoint_queries(
            db,
            &run_id,
            checkpoint.input.as_deref(),
            &checkpoint.turn,
        ));
    }
    let message_inserts = messages::insert_queries(db, &message_rows);
    // Numbered rows keep their order within one statement only (see `one_statement`).
    let in_order = message_inserts.len() <= 1
        && checkpoint
            .as_ref()
            .is_none_or(|checkpoint| checkpoint.turn.len() <= 1);
    rest.extend(message_inserts);
    rest.extend(events::insert_queries(db, &run_id, &event_rows));
    let begun = RunBegin::Begun {
        history: Vec::new(),
        checkpoint_saved: start.first_step_saves_input(),
    };

    if let Engine::Postgres(pool) = &db.engine
        && shared.is_empty()
        && in_order
        && one_statement::fits(&run_row, session_rows.iter().chain(&rest))
    {
        // PostgreSQL checks the foreign keys once the whole statement ran.
        let parts = session_rows.into_iter().chain(rest).collect();
        one_statement::run(db, pool, run_row, parts, &run_id).await?;
        return Ok(begun);
    }
    let mut tx = db.begin().await?;
    for query in session_rows {
        query.execute(&mut tx).await?;
    }
    run_row.execute(&mut tx).await?;
    shared.insert(db, &mut tx, &run_id).await?;
    for query in rest {
        query.execute(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(begun)
}
