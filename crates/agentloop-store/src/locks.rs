//! One run at a time per session: a lease in the session's row, taken and renewed by single
//! conditional UPDATEs so that two processes cannot both win.

use std::time::Duration;

use agentloop_core::{SessionLock, StoreError};
use uuid::Uuid;

use crate::columns::{millis, now};
use crate::db::{Db, Tx, changed};
use crate::sql::Query;

/// A take fails, then the holder releases before we read who holds it: try again, a few times.
const ATTEMPTS: usize = 3;

/// Takes the session for `run_id` in `tx` unless another run holds it (a holder whose lease
/// ran out has lost it). A session without a row is the run's: a run that does not save its
/// chat, on a session nobody else can join.
pub(crate) async fn take(
    db: &Db,
    tx: &mut Tx<'_>,
    session_id: &str,
    run_id: &str,
    lease: Duration,
) -> Result<SessionLock, StoreError> {
    for _ in 0..ATTEMPTS {
        let now = millis(now());
        let taken = db
            .query(
                "UPDATE sessions SET active_run_id = $2, lock_expires_at = $3 \
                 WHERE id = $1 AND (active_run_id IS NULL OR active_run_id = $2 \
                     OR lock_expires_at IS NULL OR lock_expires_at <= $4)",
            )
            .bind(session_id)
            .bind(run_id)
            .bind(expiry(now, lease))
            .bind(now)
            .execute(&mut *tx)
            .await?;
        if changed(&taken) {
            return Ok(SessionLock::Acquired);
        }
        let holder = db
            .query("SELECT active_run_id FROM sessions WHERE id = $1")
            .bind(session_id)
            .fetch_optional(&mut *tx)
            .await?;
        let Some(holder) = holder else {
            return Ok(SessionLock::Acquired);
        };
        if let Some(holder) = db
            .cells(&holder, "sessions")
            .optional_uuid("active_run_id")?
        {
            return Ok(SessionLock::Busy { run_id: holder });
        }
    }
    Err(StoreError::query(format!(
        "session {session_id} kept changing hands while run {run_id} tried to take it"
    )))
}

pub(crate) async fn renew(
    db: &Db,
    session_id: Uuid,
    run_id: Uuid,
    lease: Duration,
) -> Result<(), StoreError> {
    let renewed = db
        .query("UPDATE sessions SET lock_expires_at = $3 WHERE id = $1 AND active_run_id = $2")
        .bind(session_id.to_string())
        .bind(run_id.to_string())
        .bind(expiry(millis(now()), lease))
        .execute(db)
        .await?;
    if !changed(&renewed) {
        // Not an error: the run has no session row, or its lease expired and another run took
        // the session; that run's own writes are what counts from now on.
        tracing::debug!(%session_id, %run_id, "session lock not renewed: not held by this run");
    }
    Ok(())
}

/// What a step does to its run's session lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockAfterStep {
    /// The run ended: the session is free for the next run.
    Release,
    /// The run paused: it keeps the session with no expiry.
    Hold,
}

/// The one statement on the session of a step that moves its `updated_at` forward to
/// `touched_at` (never backwards) and/or releases or holds its lock (if `run_id` still holds
/// it); none when the step does neither. One statement, also when it does both: no two
/// statements of a step write the same row (see `one_statement`).
pub(crate) fn after_step<'p>(
    db: &Db,
    session_id: &'p str,
    run_id: &'p str,
    touched_at: Option<i64>,
    lock: Option<LockAfterStep>,
) -> Option<Query<'p>> {
    let query = match (touched_at, lock) {
        (None, None) => return None,
        // A row not moved is not written at all.
        (Some(touched_at), None) => db
            .query("UPDATE sessions SET updated_at = $2 WHERE id = $1 AND updated_at < $2")
            .bind(session_id)
            .bind(touched_at),
        (None, Some(LockAfterStep::Release)) => release_query(db, session_id, run_id),
        (None, Some(LockAfterStep::Hold)) => hold_query(db, session_id, run_id),
        (Some(touched_at), Some(lock)) => {
            // Each SET reads the row as it was: the lock's columns change only where the run
            // holds it, `updated_at` only forward.
            let expiry = match lock {
                LockAfterStep::Release => None,
                LockAfterStep::Hold => Some(i64::MAX),
            };
            db.query(
                "UPDATE sessions SET \
                     updated_at = CASE WHEN updated_at < $2 THEN $2 ELSE updated_at END, \
                     lock_expires_at = CASE WHEN active_run_id = $3 THEN $4 \
                         ELSE lock_expires_at END, \
                     active_run_id = CASE WHEN active_run_id = $3 AND $5 = 1 THEN NULL \
                         ELSE active_run_id END \
                 WHERE id = $1 AND (updated_at < $2 OR active_run_id = $3)",
            )
            .bind(session_id)
            .bind(touched_at)
            .bind(run_id)
            .bind(expiry)
            .bind(i64::from(lock == LockAfterStep::Release))
        }
    };
    Some(query)
}

/// Releases the session if `run_id` still holds it: in the last step of the run, or alone.
pub(crate) fn release_query<'p>(db: &Db, session_id: &'p str, run_id: &'p str) -> Query<'p> {
    db.query(
        "UPDATE sessions SET active_run_id = NULL, lock_expires_at = NULL \
         WHERE id = $1 AND active_run_id = $2",
    )
    .bind(session_id)
    .bind(run_id)
}

/// Keeps the session for a paused run with no expiry: a human may answer tomorrow.
pub(crate) fn hold_query<'p>(db: &Db, session_id: &'p str, run_id: &'p str) -> Query<'p> {
    db.query("UPDATE sessions SET lock_expires_at = $3 WHERE id = $1 AND active_run_id = $2")
        .bind(session_id)
        .bind(run_id)
        .bind(i64::MAX)
}

pub(crate) fn expiry(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
}
