//! The event log of each run, for replay and for following a run from another process.

use agentloop_core::StoreError;
use agentloop_core::protocol::Event;
use uuid::Uuid;

use crate::batch::{rows_per_statement, values_sql};
use crate::columns::{count, millis, now, to_json};
use crate::db::Db;
use crate::sql::Query;

const WIDTH: usize = 5;

/// An event as its row holds it: the whole event is the payload, `type` is there to query by.
pub(crate) struct EventRow {
    seq: i64,
    kind: &'static str,
    payload: String,
}

pub(crate) fn encode(events: &[Event]) -> Result<Vec<EventRow>, StoreError> {
    events
        .iter()
        .map(|event| {
            Ok(EventRow {
                seq: count(event.seq),
                kind: event.kind.type_name(),
                payload: to_json(event, "an event")?,
            })
        })
        .collect()
}

/// The statements that store a step's events. An event already stored under the same `seq`
/// stays as it is, so that a step saved twice (a retry after a lost acknowledgement) changes
/// nothing.
pub(crate) fn insert_queries<'p>(db: &Db, run_id: &'p str, rows: &'p [EventRow]) -> Vec<Query<'p>> {
    let created_at = millis(now());
    let head = "INSERT INTO run_events (run_id, seq, type, payload, created_at)";
    let tail = "ON CONFLICT (run_id, seq) DO NOTHING";
    rows.chunks(rows_per_statement(WIDTH))
        .map(|chunk| {
            let mut query = db.query(&values_sql(head, WIDTH, chunk.len(), tail));
            for row in chunk {
                query = query
                    .bind(run_id)
                    .bind(row.seq)
                    .bind(row.kind)
                    .bind(row.payload.as_str())
                    .bind(created_at);
            }
            query
        })
        .collect()
}

pub(crate) async fn after(db: &Db, run_id: Uuid, after_seq: u64) -> Result<Vec<Event>, StoreError> {
    let rows = db
        .query("SELECT payload FROM run_events WHERE run_id = $1 AND seq > $2 ORDER BY seq")
        .bind(run_id.to_string())
        .bind(count(after_seq))
        .fetch_all(db)
        .await?;
    rows.iter()
        .map(|row| db.cells(row, "run_events").json("payload"))
        .collect()
}
