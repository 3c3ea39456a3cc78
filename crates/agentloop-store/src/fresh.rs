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
use crate::db::Db;
#[cfg(feature = "postgres")]
use crate::db::Engine;
#[cfg(feature = "postgres")]
use crate::one_statement;
use crate::step::StepRows;
use crate::{locks, runs, sessions};

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
    let rows = StepRows::encode(db, step)?;
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
    let run_row = runs::start_query(db, run, rows.head(), &step.progress);
    // Whether the rows fit one statement: PostgreSQL's concern only.
    #[cfg_attr(not(feature = "postgres"), allow(unused_variables))]
    let (rest, in_order) = rows.queries(db, &run_id);
    let begun = RunBegin::Begun {
        history: Vec::new(),
        checkpoint_saved: start.first_step_saves_input(),
    };

    #[cfg(feature = "postgres")]
    if let Engine::Postgres(pool) = &db.engine
        && rows.shared.is_empty()
        && rows.attachments.is_empty()
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
    rows.shared.insert(db, &mut tx, &run_id).await?;
    rows.attachments.insert(db, &mut tx).await?;
    for query in rest {
        query.execute(&mut tx).await?;
    }
    tx.commit().await?;
    Ok(begun)
}
