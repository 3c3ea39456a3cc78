//! The full account of each tool call of a run.

use std::borrow::Cow;

use crate::sql::Row;
use agentloop_core::StoreError;
use agentloop_core::protocol::ToolExecutionRecord;
use serde_json::Value;
use uuid::Uuid;

use crate::batch::{rows_per_statement, values_sql};
use crate::columns::{Cells, count, json_text, millis, to_json};
use crate::db::Db;
use crate::outputs::{SharedOutputs, Stored};
use crate::sql::Query;

const COLUMNS: &str = "call_id, iteration, tool, arguments, started_at, duration_ms, status, \
    result, result_hash, structured_result, structured_is_result, error, cost_usd, logs";
const WIDTH: usize = 15;

/// The columns of `t` (tool_executions) and the shared text its `result_hash` names, if any.
const SELECT: &str = "SELECT t.call_id, t.iteration, t.tool, t.arguments, t.started_at, \
    t.duration_ms, t.status, t.result, t.result_hash, t.structured_result, \
    t.structured_is_result, t.error, t.cost_usd, t.logs, o.text AS shared_result \
    FROM tool_executions t \
    LEFT JOIN tool_outputs o ON o.run_id = t.run_id AND o.hash = t.result_hash";

/// A record as its row holds it, encoded before the transaction opens.
pub(crate) struct RecordRow<'r> {
    call_id: Cow<'r, str>,
    iteration: i64,
    tool: Cow<'r, str>,
    arguments: String,
    started_at: i64,
    duration_ms: i64,
    status: &'static str,
    result: Option<Cow<'r, str>>,
    /// Set when the result is in `tool_outputs` (and `result` is NULL).
    result_hash: Option<String>,
    structured_result: Option<String>,
    /// 1 when the structured result is the JSON parse of the result (and is not stored).
    structured_is_result: i64,
    error: Option<Cow<'r, str>>,
    /// What the tool reported the call cost, in USD.
    cost_usd: Option<f64>,
    /// What its MCP server logged while it ran (JSON), NULL when nothing.
    logs: Option<String>,
}

/// One row per call: PostgreSQL refuses an upsert that touches the same row twice, so a call
/// written twice in one step keeps its first place and its last fields here already.
/// A large result goes to `shared`.
pub(crate) fn encode<'r>(
    db: &Db,
    records: &'r [ToolExecutionRecord],
    shared: &mut SharedOutputs<'r>,
) -> Result<Vec<RecordRow<'r>>, StoreError> {
    let mut rows: Vec<RecordRow<'r>> = Vec::with_capacity(records.len());
    for record in records {
        let (result, result_hash) = match record.result.as_deref() {
            None => (None, None),
            Some(result) => match shared.keep(db, result) {
                Stored::Inline(text) => (Some(text), None),
                Stored::Shared(hash) => (None, Some(hash)),
            },
        };
        let structured = match &record.structured_result {
            None => None,
            Some(value) => Some(to_json(value, "a structured tool result")?),
        };
        let structured_is_result = match (&structured, record.result.as_deref()) {
            (Some(json), Some(result)) => parses_to(result, json),
            _ => false,
        };
        let row = RecordRow {
            call_id: db.text(&record.call_id),
            iteration: i64::from(record.iteration),
            tool: db.text(&record.tool),
            arguments: json_text(&record.arguments),
            started_at: millis(record.started_at),
            duration_ms: count(record.duration_ms),
            status: record.status.as_str(),
            result,
            result_hash,
            structured_result: if structured_is_result {
                None
            } else {
                structured
            },
            structured_is_result: i64::from(structured_is_result),
            error: db.optional_text(record.error.as_deref()),
            cost_usd: record.cost_usd,
            logs: if record.logs.is_empty() {
                None
            } else {
                Some(to_json(&record.logs, "a tool call's logs")?)
            },
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

/// The statements that write a step's tool records: a call saved again (its result after its
/// start) replaces its row.
pub(crate) fn upsert_queries<'p>(
    db: &Db,
    run_id: &'p str,
    rows: &'p [RecordRow<'p>],
) -> Vec<Query<'p>> {
    let head = format!("INSERT INTO tool_executions (run_id, {COLUMNS})");
    let tail = "ON CONFLICT (run_id, call_id) DO UPDATE SET iteration = excluded.iteration, \
        tool = excluded.tool, arguments = excluded.arguments, started_at = excluded.started_at, \
        duration_ms = excluded.duration_ms, status = excluded.status, result = excluded.result, \
        result_hash = excluded.result_hash, structured_result = excluded.structured_result, \
        structured_is_result = excluded.structured_is_result, error = excluded.error, \
        cost_usd = excluded.cost_usd, logs = excluded.logs";
    rows.chunks(rows_per_statement(WIDTH))
        .map(|chunk| {
            let mut query = db.query(&values_sql(&head, WIDTH, chunk.len(), tail));
            for row in chunk {
                query = query
                    .bind(run_id)
                    .bind(row.call_id.as_ref())
                    .bind(row.iteration)
                    .bind(row.tool.as_ref())
                    .bind(row.arguments.as_str())
                    .bind(row.started_at)
                    .bind(row.duration_ms)
                    .bind(row.status)
                    .bind(row.result.as_deref())
                    .bind(row.result_hash.as_deref())
                    .bind(row.structured_result.as_deref())
                    .bind(row.structured_is_result)
                    .bind(row.error.as_deref())
                    .bind(row.cost_usd)
                    .bind(row.logs.as_deref());
            }
            query
        })
        .collect()
}

pub(crate) async fn of_run(db: &Db, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError> {
    let rows = db
        .query(&format!("{SELECT} WHERE t.run_id = $1 ORDER BY t.position"))
        .bind(run_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| decode(db, row)).collect()
}

pub(crate) async fn of_call(
    db: &Db,
    run_id: Uuid,
    call_id: &str,
) -> Result<Option<ToolExecutionRecord>, StoreError> {
    let row = db
        .query(&format!("{SELECT} WHERE t.run_id = $1 AND t.call_id = $2"))
        .bind(run_id.to_string())
        .bind(db.text(call_id))
        .fetch_optional(db)
        .await?;
    row.as_ref().map(|row| decode(db, row)).transpose()
}

/// Whether reading `result` as JSON gives back exactly the value whose JSON is `json`: the
/// same value, written the same way (serde_json's maps compare equal whatever their order, so
/// the texts are compared), so that parsing it again on reading is lossless.
fn parses_to(result: &str, json: &str) -> bool {
    serde_json::from_str::<Value>(result)
        .ok()
        .and_then(|parsed| serde_json::to_string(&parsed).ok())
        .is_some_and(|text| text == json)
}

fn decode(db: &Db, row: &Row) -> Result<ToolExecutionRecord, StoreError> {
    let cells = db.cells(row, "tool_executions");
    let result = result(&cells)?;
    let structured_result = match (cells.flag("structured_is_result")?, &result) {
        (false, _) => cells.optional_json("structured_result")?,
        (true, Some(result)) => Some(serde_json::from_str(result).map_err(|error| {
            cells.corrupt(
                "structured_is_result",
                &format!("is set, but the result is not JSON ({error})"),
            )
        })?),
        (true, None) => {
            return Err(cells.corrupt("structured_is_result", "is set on a call without result"));
        }
    };
    Ok(ToolExecutionRecord {
        call_id: cells.free_text("call_id")?,
        iteration: cells.counter("iteration")?,
        tool: cells.free_text("tool")?,
        arguments: cells.json("arguments")?,
        started_at: cells.time("started_at")?,
        duration_ms: cells.counter("duration_ms")?,
        status: cells.name("status")?,
        result,
        structured_result,
        error: cells.optional_free_text("error")?,
        cost_usd: cells.optional_real("cost_usd")?,
        logs: cells.optional_json("logs")?.unwrap_or_default(),
    })
}

/// The result in the row, or the shared text its `result_hash` names.
fn result(cells: &Cells<'_>) -> Result<Option<String>, StoreError> {
    if cells.optional_text("result_hash")?.is_none() {
        return cells.optional_free_text("result");
    }
    match cells.optional_free_text("shared_result")? {
        Some(text) => Ok(Some(text)),
        None => Err(cells.corrupt(
            "result_hash",
            "names a tool output that tool_outputs does not hold",
        )),
    }
}
