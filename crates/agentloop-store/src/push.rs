//! The outbox of push notifications (migration 16): targets of runs, and notifications queued
//! once per target and state change, claimed by one instance at a time (a compare-and-set on
//! `claimed_until`), sent, retried or given up.

use agentloop_core::{PushDelivery, PushTarget, StoreError};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::columns::{millis, now};
use crate::db::{Db, changed};
use crate::sql::Row;

const SELECT_TARGET: &str = "SELECT run_id, id, user_id, url, token, auth_scheme, \
     auth_credentials, after_seq FROM a2a_push_targets";

fn seq(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

fn target_of(db: &Db, row: &Row) -> Result<PushTarget, StoreError> {
    let cells = db.cells(row, "a2a_push_targets");
    Ok(PushTarget {
        run_id: cells.uuid("run_id")?,
        id: cells.free_text("id")?,
        user_id: cells.free_text("user_id")?,
        url: cells.free_text("url")?,
        token: cells.optional_free_text("token")?,
        auth_scheme: cells.optional_free_text("auth_scheme")?,
        auth_credentials: cells.optional_free_text("auth_credentials")?,
        after_seq: cells.counter("after_seq")?,
    })
}

pub(crate) async fn put_target(db: &Db, target: &PushTarget) -> Result<(), StoreError> {
    let mut tx = db.begin().await?;
    let run_id = target.run_id.to_string();
    db.query("DELETE FROM a2a_push_targets WHERE run_id = $1 AND id = $2")
        .bind(run_id.as_str())
        .bind(db.text(&target.id))
        .execute(&mut tx)
        .await?;
    db.query(
        "INSERT INTO a2a_push_targets (run_id, id, user_id, url, token, auth_scheme, \
         auth_credentials, after_seq, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
    )
    .bind(run_id.as_str())
    .bind(db.text(&target.id))
    .bind(db.text(&target.user_id))
    .bind(db.text(&target.url))
    .bind(db.optional_text(target.token.as_deref()))
    .bind(db.optional_text(target.auth_scheme.as_deref()))
    .bind(db.optional_text(target.auth_credentials.as_deref()))
    .bind(seq(target.after_seq))
    .bind(millis(now()))
    .execute(&mut tx)
    .await?;
    tx.commit().await
}

pub(crate) async fn targets(db: &Db, run_id: Uuid) -> Result<Vec<PushTarget>, StoreError> {
    let rows = db
        .query(&format!(
            "{SELECT_TARGET} WHERE run_id = $1 ORDER BY created_at, id"
        ))
        .bind(run_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| target_of(db, row)).collect()
}

pub(crate) async fn delete_target(db: &Db, run_id: Uuid, id: &str) -> Result<bool, StoreError> {
    let mut tx = db.begin().await?;
    let run_id = run_id.to_string();
    db.query("DELETE FROM a2a_push_outbox WHERE run_id = $1 AND target_id = $2")
        .bind(run_id.as_str())
        .bind(db.text(id))
        .execute(&mut tx)
        .await?;
    let deleted = db
        .query("DELETE FROM a2a_push_targets WHERE run_id = $1 AND id = $2")
        .bind(run_id.as_str())
        .bind(db.text(id))
        .execute(&mut tx)
        .await?;
    tx.commit().await?;
    Ok(changed(&deleted))
}

pub(crate) async fn open_targets(db: &Db) -> Result<Vec<PushTarget>, StoreError> {
    let rows = db
        .query(&format!("{SELECT_TARGET} WHERE finished = 0"))
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| target_of(db, row)).collect()
}

pub(crate) async fn queue(
    db: &Db,
    run_id: Uuid,
    target_id: &str,
    pushes: &[(u64, String)],
    finished: bool,
) -> Result<(), StoreError> {
    let mut tx = db.begin().await?;
    let run_id = run_id.to_string();
    let due = millis(now());
    for (event_seq, payload) in pushes {
        db.query(
            "INSERT INTO a2a_push_outbox (run_id, target_id, seq, payload, due_at) \
             VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING",
        )
        .bind(run_id.as_str())
        .bind(db.text(target_id))
        .bind(seq(*event_seq))
        .bind(db.text(payload))
        .bind(due)
        .execute(&mut tx)
        .await?;
    }
    if finished {
        db.query("UPDATE a2a_push_targets SET finished = 1 WHERE run_id = $1 AND id = $2")
            .bind(run_id.as_str())
            .bind(db.text(target_id))
            .execute(&mut tx)
            .await?;
    }
    tx.commit().await
}

pub(crate) async fn claim(
    db: &Db,
    owner: &str,
    at: DateTime<Utc>,
    until: DateTime<Utc>,
) -> Result<Option<PushDelivery>, StoreError> {
    // The oldest notification of its target not sent yet, due and not claimed (or claimed by
    // an instance whose claim ran out): a target's notifications go out in order.
    let candidate = db
        .query(
            "SELECT o.run_id, o.target_id, o.seq FROM a2a_push_outbox o \
             WHERE o.sent_at IS NULL AND o.failed_at IS NULL AND o.due_at <= $1 \
               AND (o.claimed_until IS NULL OR o.claimed_until < $1) \
               AND NOT EXISTS (SELECT 1 FROM a2a_push_outbox e \
                   WHERE e.run_id = o.run_id AND e.target_id = o.target_id AND e.seq < o.seq \
                     AND e.sent_at IS NULL AND e.failed_at IS NULL) \
             ORDER BY o.due_at LIMIT 1",
        )
        .bind(millis(at))
        .fetch_optional(db)
        .await?;
    let Some(candidate) = candidate else {
        return Ok(None);
    };
    let cells = db.cells(&candidate, "a2a_push_outbox");
    let run_id = cells.text("run_id")?;
    let target_id = cells.free_text("target_id")?;
    let event_seq = cells.integer("seq")?;
    let claimed = db
        .query(
            "UPDATE a2a_push_outbox SET claimed_by = $4, claimed_until = $5, \
                 attempts = attempts + 1 \
             WHERE run_id = $1 AND target_id = $2 AND seq = $3 AND sent_at IS NULL \
               AND (claimed_until IS NULL OR claimed_until < $6) \
             RETURNING payload, attempts",
        )
        .bind(run_id.as_str())
        .bind(db.text(&target_id))
        .bind(event_seq)
        .bind(owner)
        .bind(millis(until))
        .bind(millis(at))
        .fetch_optional(db)
        .await?;
    // Taken by another instance meanwhile: the next call finds another one.
    let Some(claimed) = claimed else {
        return Ok(None);
    };
    let cells = db.cells(&claimed, "a2a_push_outbox");
    let payload = cells.free_text("payload")?;
    let attempts: u32 = cells.counter("attempts")?;
    let target = db
        .query(&format!("{SELECT_TARGET} WHERE run_id = $1 AND id = $2"))
        .bind(run_id.as_str())
        .bind(db.text(&target_id))
        .fetch_optional(db)
        .await?;
    let Some(target) = target else {
        return Ok(None);
    };
    Ok(Some(PushDelivery {
        target: target_of(db, &target)?,
        seq: u64::try_from(event_seq).unwrap_or_default(),
        payload,
        attempts,
    }))
}

pub(crate) async fn sent(
    db: &Db,
    delivery: &PushDelivery,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    db.query(
        "UPDATE a2a_push_outbox SET sent_at = $4, claimed_by = NULL, claimed_until = NULL \
         WHERE run_id = $1 AND target_id = $2 AND seq = $3",
    )
    .bind(delivery.target.run_id.to_string())
    .bind(db.text(&delivery.target.id))
    .bind(seq(delivery.seq))
    .bind(millis(at))
    .execute(db)
    .await?;
    Ok(())
}

pub(crate) async fn failed(
    db: &Db,
    delivery: &PushDelivery,
    retry_at: Option<DateTime<Utc>>,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    let (due, failed_at) = match retry_at {
        Some(retry_at) => (millis(retry_at), None),
        None => (millis(at), Some(millis(at))),
    };
    db.query(
        "UPDATE a2a_push_outbox SET due_at = $4, failed_at = $5, claimed_by = NULL, \
             claimed_until = NULL \
         WHERE run_id = $1 AND target_id = $2 AND seq = $3",
    )
    .bind(delivery.target.run_id.to_string())
    .bind(db.text(&delivery.target.id))
    .bind(seq(delivery.seq))
    .bind(due)
    .bind(failed_at)
    .execute(db)
    .await?;
    Ok(())
}
