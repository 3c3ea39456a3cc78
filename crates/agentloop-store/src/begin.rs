//! A run's beginning in one transaction: its session found (or created), taken for the run, the
//! exchange a regenerated answer replaces marked superseded, its history read and its row
//! written, and for a run on a new session its first step too. One
//! commit where the steps one by one took four, and nothing half done when one of them fails.

use agentloop_core::{MissingSession, RunBegin, RunStart, SessionLock, StoreError};

use crate::columns::{millis, now};
use crate::db::Db;
use crate::{attachments, durable, fresh, locks, messages, runs, sessions, step};

pub(crate) async fn begin(db: &Db, start: &RunStart) -> Result<RunBegin, StoreError> {
    if let Some(step) = fresh::first_step(start) {
        match fresh::begin(db, start, step).await {
            // Another run made the session meanwhile: the general way finds it, and its lock.
            Err(error) if session_taken(&error) => {}
            begun => return begun,
        }
    }
    match looked_up(db, start).await {
        // Two runs found the session missing and both inserted it: the second now finds it.
        Err(error) if session_taken(&error) => looked_up(db, start).await,
        begun => begun,
    }
}

/// Whether the session's row was refused because it exists (`errors::is_session_taken`).
fn session_taken(error: &StoreError) -> bool {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    return crate::errors::is_session_taken(error);
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    {
        let _ = error;
        false
    }
}

/// The general way: the session looked up (and its lock taken), or made when missing.
async fn looked_up(db: &Db, start: &RunStart) -> Result<RunBegin, StoreError> {
    let run = &start.run;
    // Encoded first, so that nothing but the database runs while the transaction holds locks.
    // A first step's checkpoint replaces the one of the beginning.
    let checkpoint = match &start.first_step {
        Some(_) => None,
        None => start.checkpoint.as_ref().map(durable::encode).transpose()?,
    };
    let session_id = run.session_id.to_string();
    let run_id = run.id.to_string();
    let mut tx = db.begin().await?;
    let session = db
        .query("SELECT user_id FROM sessions WHERE id = $1")
        .bind(session_id.as_str())
        .fetch_optional(&mut tx)
        .await?;
    // An early return drops `tx`, which rolls it back: a refused run writes nothing.
    let history = match session {
        Some(session) => {
            if db.cells(&session, "sessions").free_text("user_id")? != run.user_id {
                return Ok(RunBegin::SessionNotFound);
            }
            let lock = locks::take(db, &mut tx, &session_id, &run_id, start.lease).await?;
            if let SessionLock::Busy { run_id } = lock {
                return Ok(RunBegin::SessionBusy { run_id });
            }
            // Before the history is read: the run does not see the exchange it replaces.
            if let Some(supersede) = start.supersede {
                messages::supersede(db, &mut tx, run.session_id, supersede.from_run, run.id)
                    .await?;
            }
            match start.history {
                Some(limit) => {
                    let mut history =
                        messages::history(db, &mut tx, run.session_id, limit, None).await?;
                    attachments::fill(db, &mut tx, &mut history).await?;
                    history
                }
                None => Vec::new(),
            }
        }
        None => {
            match &start.if_missing {
                MissingSession::Refuse => return Ok(RunBegin::SessionNotFound),
                MissingSession::Create(new) => {
                    let created_at = now();
                    let expires_at = locks::expiry(millis(created_at), start.lease);
                    let held_by = Some((run_id.as_str(), expires_at));
                    sessions::insert(db, &mut tx, new, created_at, held_by).await?;
                }
                // No row to take: nobody else can join a session that is not saved.
                MissingSession::Ignore => {}
            }
            // A new session has no history.
            Vec::new()
        }
    };
    let head = checkpoint
        .as_ref()
        .map(|checkpoint| (checkpoint.head, checkpoint.last_seq));
    runs::start(db, &mut tx, run, head).await?;
    if let Some(checkpoint) = &checkpoint {
        durable::write_checkpoint(db, &mut tx, &run_id, checkpoint.input.as_deref(), &[]).await?;
    }
    if let Some(first) = &start.first_step {
        step::write(db, first, Some(&mut tx)).await?;
    }
    tx.commit().await?;
    Ok(RunBegin::Begun {
        history,
        checkpoint_saved: checkpoint.is_some() || start.first_step_saves_input(),
    })
}
