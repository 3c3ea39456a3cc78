//! One run at a time per session: a lease in the session's row, taken and renewed by single
//! conditional UPDATEs so that two processes cannot both win.

use std::time::Duration;

use agentloop_core::{SessionLock, StoreError};
use uuid::Uuid;

use crate::columns::{millis, now};
use crate::db::{Db, Tx, changed};

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

/// Releases the session if `run_id` still holds it, inside the transaction of the last step.
pub(crate) async fn release(
    db: &Db,
    tx: &mut Tx<'_>,
    session_id: &str,
    run_id: &str,
) -> Result<(), StoreError> {
    db.query(
        "UPDATE sessions SET active_run_id = NULL, lock_expires_at = NULL \
         WHERE id = $1 AND active_run_id = $2",
    )
    .bind(session_id)
    .bind(run_id)
    .execute(&mut *tx)
    .await?;
    Ok(())
}

/// Keeps the session for a paused run with no expiry: a human may answer tomorrow.
pub(crate) async fn hold(
    db: &Db,
    tx: &mut Tx<'_>,
    session_id: &str,
    run_id: &str,
) -> Result<(), StoreError> {
    db.query("UPDATE sessions SET lock_expires_at = $3 WHERE id = $1 AND active_run_id = $2")
        .bind(session_id)
        .bind(run_id)
        .bind(i64::MAX)
        .execute(&mut *tx)
        .await?;
    Ok(())
}

pub(crate) fn expiry(now: i64, lease: Duration) -> i64 {
    now.saturating_add(i64::try_from(lease.as_millis()).unwrap_or(i64::MAX))
}
