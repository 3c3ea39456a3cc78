//! What makes runs outlive their process: each step's checkpoint, the instances that own runs
//! and show signs of life, adoption of the runs of an instance that stopped, and cancel
//! requests that reach a run's owner wherever it is.

use std::time::Duration;

use agentloop_core::protocol::{RunStatus, SessionMessage};
use agentloop_core::{Checkpoint, Instance, OrphanRun, SavedRun, StoreError};
use uuid::Uuid;

use crate::columns::{millis, now, to_json};
use crate::db::{Db, Tx, changed};
use crate::sql::Query;
use crate::{attachments, messages, records};

/// What a checkpoint adds besides its head (which goes with the run's row): the run's input
/// with its first step, and the messages of a run that does not keep them in a session.
pub(crate) fn checkpoint_queries<'p>(
    db: &Db,
    run_id: &'p str,
    input: Option<&'p str>,
    turn: &'p [(i64, String)],
) -> Vec<Query<'p>> {
    let input = input.map(|input| {
        db.query("INSERT INTO run_inputs (run_id, input) VALUES ($1, $2)")
            .bind(run_id)
            .bind(input)
    });
    let turn = turn.iter().map(|(position, message)| {
        db.query("INSERT INTO run_turn (run_id, position, message) VALUES ($1, $2, $3)")
            .bind(run_id)
            .bind(*position)
            .bind(message.as_str())
    });
    input.into_iter().chain(turn).collect()
}

/// Writes [`checkpoint_queries`].
pub(crate) async fn write_checkpoint(
    db: &Db,
    tx: &mut Tx<'_>,
    run_id: &str,
    input: Option<&str>,
    turn: &[(i64, String)],
) -> Result<(), StoreError> {
    for query in checkpoint_queries(db, run_id, input, turn) {
        query.execute(&mut *tx).await?;
    }
    Ok(())
}

/// The checkpoint's parts encoded before the transaction opens.
pub(crate) struct EncodedCheckpoint<'c> {
    pub input: Option<String>,
    /// JSON text already ([`Checkpoint::head`]).
    pub head: &'c str,
    pub last_seq: u64,
    /// (position, message) of the run's own messages; positions continue after `turn_before`.
    pub turn: Vec<(i64, String)>,
}

pub(crate) fn encode(checkpoint: &Checkpoint) -> Result<EncodedCheckpoint<'_>, StoreError> {
    let input = checkpoint
        .input
        .as_ref()
        .map(|input| to_json(input, "the input of a run"))
        .transpose()?;
    let turn = checkpoint
        .turn
        .iter()
        .map(|message| {
            // Positions in time order: the message's id is a time-ordered UUID, unique in the run.
            let position = i64::try_from(message.id.as_u128() >> 64).unwrap_or(i64::MAX);
            Ok((position, to_json(message, "a message of a run")?))
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(EncodedCheckpoint {
        input,
        head: &checkpoint.head,
        last_seq: checkpoint.last_seq,
        turn,
    })
}

pub(crate) async fn saved_run(db: &Db, id: Uuid) -> Result<Option<SavedRun>, StoreError> {
    let row = db
        .query(
            "SELECT r.session_id, r.status, r.save_chat, r.owner, r.state_head, r.state_seq, \
                 r.traceparent, i.input \
             FROM runs r LEFT JOIN run_inputs i ON i.run_id = r.id WHERE r.id = $1",
        )
        .bind(id.to_string())
        .fetch_optional(db)
        .await?;
    let Some(row) = row else {
        return Ok(None);
    };
    let cells = db.cells(&row, "runs");
    let session_id = cells.uuid("session_id")?;
    let status: RunStatus = cells.name("status")?;
    let save_chat = cells.flag("save_chat")?;
    let owner = cells.optional_text("owner")?;
    let head = cells.optional_json("state_head")?;
    let last_seq = cells
        .optional_integer("state_seq")?
        .map_or(0, |seq| u64::try_from(seq).unwrap_or_default());
    let input = cells.optional_json("input")?;
    let traceparent = cells.optional_text("traceparent")?;
    let mut turn = if save_chat {
        messages::of_run(db, session_id, id).await?
    } else {
        own_turn(db, id).await?
    };
    attachments::fill(db, db, &mut turn).await?;
    Ok(Some(SavedRun {
        session_id,
        status,
        save_chat,
        owner,
        input,
        head,
        last_seq,
        turn,
        records: records::of_run(db, id).await?,
        traceparent,
    }))
}

/// The messages of a run that does not keep them in its session.
async fn own_turn(db: &Db, run_id: Uuid) -> Result<Vec<SessionMessage>, StoreError> {
    let rows = db
        .query("SELECT message FROM run_turn WHERE run_id = $1 ORDER BY position")
        .bind(run_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| db.cells(row, "run_turn").json("message"))
        .collect()
}

pub(crate) async fn register(db: &Db, instance: &Instance) -> Result<(), StoreError> {
    let at = millis(now());
    db.query(
        "INSERT INTO instances (id, kind, name, started_at, heartbeat_at) \
         VALUES ($1, $2, $3, $4, $4)",
    )
    .bind(instance.id.as_str())
    .bind(instance.kind.as_str())
    .bind(db.text(&instance.name))
    .bind(at)
    .execute(db)
    .await?;
    Ok(())
}

pub(crate) async fn heartbeat(db: &Db, instance_id: &str) -> Result<(), StoreError> {
    let done = db
        .query("UPDATE instances SET heartbeat_at = $2 WHERE id = $1 AND stopped_at IS NULL")
        .bind(instance_id)
        .bind(millis(now()))
        .execute(db)
        .await?;
    match changed(&done) {
        true => Ok(()),
        false => Err(StoreError::NotFound(format!(
            "instance {instance_id} (not registered, or retired)"
        ))),
    }
}

pub(crate) async fn retire(db: &Db, instance_id: &str) -> Result<(), StoreError> {
    db.query("UPDATE instances SET stopped_at = $2 WHERE id = $1")
        .bind(instance_id)
        .bind(millis(now()))
        .execute(db)
        .await?;
    Ok(())
}

pub(crate) async fn orphaned(
    db: &Db,
    silent_for: Duration,
    limit: u32,
) -> Result<Vec<OrphanRun>, StoreError> {
    let cutoff = cutoff(silent_for);
    let rows = db
        .query(
            "SELECT r.id, r.owner, i.stopped_at FROM runs r JOIN instances i ON i.id = r.owner \
             WHERE r.status = 'running' AND i.kind = 'server' \
                 AND (i.stopped_at IS NOT NULL OR i.heartbeat_at < $1) \
             ORDER BY r.started_at LIMIT $2",
        )
        .bind(cutoff)
        .bind(i64::from(limit))
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| {
            let cells = db.cells(row, "runs");
            Ok(OrphanRun {
                run_id: cells.uuid("id")?,
                owner: cells.text("owner")?,
                handed_over: cells.optional_integer("stopped_at")?.is_some(),
            })
        })
        .collect()
}

/// A compare-and-set on the owner: of several instances that try at once, one wins (the
/// others find the owner alive: the winner).
pub(crate) async fn adopt(
    db: &Db,
    run_id: Uuid,
    to: &str,
    silent_for: Duration,
) -> Result<bool, StoreError> {
    let adopted = db
        .query(
            "UPDATE runs SET owner = $2 \
             WHERE id = $1 AND status = 'running' AND (owner IS NULL OR owner IN ( \
                 SELECT id FROM instances \
                 WHERE stopped_at IS NOT NULL OR heartbeat_at < $3))",
        )
        .bind(run_id.to_string())
        .bind(to)
        .bind(cutoff(silent_for))
        .execute(db)
        .await?;
    Ok(changed(&adopted))
}

/// The time before which an instance that showed no sign of life is taken for gone.
fn cutoff(silent_for: Duration) -> i64 {
    let silent_for = chrono::Duration::from_std(silent_for).unwrap_or(chrono::Duration::MAX);
    millis(now() - silent_for)
}

pub(crate) async fn request_cancel(db: &Db, run_id: Uuid) -> Result<bool, StoreError> {
    let asked = db
        .query("UPDATE runs SET cancel_requested = 1 WHERE id = $1 AND status = 'running'")
        .bind(run_id.to_string())
        .execute(db)
        .await?;
    Ok(changed(&asked))
}

pub(crate) async fn cancel_requests(db: &Db, owner: &str) -> Result<Vec<Uuid>, StoreError> {
    let rows = db
        .query(
            "SELECT id FROM runs WHERE owner = $1 AND status = 'running' AND cancel_requested = 1",
        )
        .bind(owner)
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| db.cells(row, "runs").uuid("id"))
        .collect()
}
