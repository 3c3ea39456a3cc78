//! The full account of each tool call of a run.

use agentloop_core::StoreError;
use agentloop_core::protocol::ToolExecutionRecord;
use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::batch::{rows_per_statement, values_sql};
use crate::columns::{count, json_text, millis, to_json};
use crate::db::Db;

const COLUMNS: &str = "call_id, iteration, tool, arguments, started_at, duration_ms, status, \
    result, structured_result, error";
const WIDTH: usize = 11;

/// A record as its row holds it, encoded before the transaction opens.
pub(crate) struct RecordRow {
    call_id: String,
    iteration: i64,
    tool: String,
    arguments: String,
    started_at: i64,
    duration_ms: i64,
    status: &'static str,
    result: Option<String>,
    structured_result: Option<String>,
    error: Option<String>,
}

/// One row per call: PostgreSQL refuses an upsert that touches the same row twice, so a call
/// written twice in one step keeps its first place and its last fields here already.
pub(crate) fn encode(
    db: &Db,
    records: &[ToolExecutionRecord],
) -> Result<Vec<RecordRow>, StoreError> {
    let mut rows: Vec<RecordRow> = Vec::with_capacity(records.len());
    for record in records {
        let row = RecordRow {
            call_id: db.text(&record.call_id),
            iteration: i64::from(record.iteration),
            tool: db.text(&record.tool),
            arguments: json_text(&record.arguments),
            started_at: millis(record.started_at),
            duration_ms: count(record.duration_ms),
            status: record.status.as_str(),
            result: db.optional_text(record.result.as_deref()),
            structured_result: record
                .structured_result
                .as_ref()
                .map(|value| to_json(value, "a structured tool result"))
                .transpose()?,
            error: db.optional_text(record.error.as_deref()),
        };
        match rows
            .iter_mut()
            .find(|earlier| earlier.call_id == row.call_id)
        {
            Some(earlier) => *earlier = row,
            None => rows.push(row),
        }
    }
    Ok(rows)
}

/// A call written again replaces its fields but keeps its place: the conflict updates the row
/// in place, so its `position` stays.
pub(crate) async fn upsert(
    db: &Db,
    connection: &mut AnyConnection,
    run_id: &str,
    rows: &[RecordRow],
) -> Result<(), StoreError> {
    let head = format!("INSERT INTO tool_executions (run_id, {COLUMNS})");
    let tail = "ON CONFLICT (run_id, call_id) DO UPDATE SET iteration = excluded.iteration, \
        tool = excluded.tool, arguments = excluded.arguments, started_at = excluded.started_at, \
        duration_ms = excluded.duration_ms, status = excluded.status, result = excluded.result, \
        structured_result = excluded.structured_result, error = excluded.error";
    for chunk in rows.chunks(rows_per_statement(WIDTH)) {
        let mut query = db.query(&values_sql(&head, WIDTH, chunk.len(), tail));
        for row in chunk {
            query = query
                .bind(run_id)
                .bind(row.call_id.as_str())
                .bind(row.iteration)
                .bind(row.tool.as_str())
                .bind(row.arguments.as_str())
                .bind(row.started_at)
                .bind(row.duration_ms)
                .bind(row.status)
                .bind(row.result.as_deref())
                .bind(row.structured_result.as_deref())
                .bind(row.error.as_deref());
        }
        query
            .execute(&mut *connection)
            .await
            .map_err(|error| db.error(error))?;
    }
    Ok(())
}

pub(crate) async fn of_run(db: &Db, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError> {
    let rows = db
        .query(&format!(
            "SELECT {COLUMNS} FROM tool_executions WHERE run_id = $1 ORDER BY position"
        ))
        .bind(run_id.to_string())
        .fetch_all(&db.pool)
        .await
        .map_err(|error| db.error(error))?;
    rows.iter().map(|row| decode(db, row)).collect()
}

fn decode(db: &Db, row: &AnyRow) -> Result<ToolExecutionRecord, StoreError> {
    let cells = db.cells(row, "tool_executions");
    Ok(ToolExecutionRecord {
        call_id: cells.free_text("call_id")?,
        iteration: cells.counter("iteration")?,
        tool: cells.free_text("tool")?,
        arguments: cells.json("arguments")?,
        started_at: cells.time("started_at")?,
        duration_ms: cells.counter("duration_ms")?,
        status: cells.name("status")?,
        result: cells.optional_free_text("result")?,
        structured_result: cells.optional_json("structured_result")?,
        error: cells.optional_free_text("error")?,
    })
}
