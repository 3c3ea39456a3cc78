//! Runs: their start, their counters as they go, and how they ended.

use agentloop_core::protocol::{RunInfo, RunStatus, Usage};
use agentloop_core::{NewRun, RunEnd, RunProgress, StoreError};
use sqlx::AnyConnection;
use sqlx::any::AnyRow;
use uuid::Uuid;

use crate::columns::{count, json_text, millis};
use crate::db::{Db, changed};

const COLUMNS: &str = "id, session_id, user_id, query, model, status, save_chat, iterations, \
    tools_used, prompt_tokens, completion_tokens, finalize_reason, answer_message_id, \
    error_code, error_message, started_at, finished_at";

pub(crate) async fn start(db: &Db, run: &NewRun) -> Result<(), StoreError> {
    db.query(
        "INSERT INTO runs (id, session_id, user_id, query, model, status, save_chat, context, \
             iterations, tools_used, prompt_tokens, completion_tokens, started_at) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 0, 0, 0, 0, $9)",
    )
    .bind(run.id.to_string())
    .bind(run.session_id.to_string())
    .bind(db.text(&run.user_id))
    .bind(db.text(&run.query))
    .bind(db.optional_text(run.model.as_deref()))
    .bind(RunStatus::Running.as_str())
    .bind(i64::from(run.save_chat))
    .bind(json_text(&run.context))
    .bind(millis(run.started_at))
    .execute(&db.pool)
    .await
    .map_err(|error| db.error(error))?;
    Ok(())
}

/// Writes the counters of a step, and with `end` how the run ended.
pub(crate) async fn record_progress(
    db: &Db,
    connection: &mut AnyConnection,
    run_id: &str,
    progress: &RunProgress,
    end: Option<&RunEnd>,
) -> Result<(), StoreError> {
    let counters = "iterations = $2, tools_used = $3, prompt_tokens = $4, completion_tokens = $5";
    let query = match end {
        // A step of a run that goes on: also the step after a pause.
        None => db.query(&format!(
            "UPDATE runs SET {counters}, status = 'running', snapshot = NULL WHERE id = $1"
        )),
        Some(_) => db.query(&format!(
            "UPDATE runs SET {counters}, status = $6, finished_at = $7, answer_message_id = $8, \
                 error_code = $9, error_message = $10, finalize_reason = $11, snapshot = $12 \
             WHERE id = $1"
        )),
    };
    let mut query = query
        .bind(run_id)
        .bind(i64::from(progress.iterations))
        .bind(i64::from(progress.tools_used))
        .bind(count(progress.usage.prompt_tokens))
        .bind(count(progress.usage.completion_tokens));
    if let Some(end) = end {
        let failure = end.failure.as_ref();
        let snapshot = end
            .snapshot
            .as_ref()
            .map(serde_json::to_string)
            .transpose()
            .map_err(|error| {
                StoreError::query(format!("cannot encode a run snapshot: {error}")).caused_by(error)
            })?;
        query = query
            .bind(end.status.as_str())
            .bind(end.status.is_final().then(|| millis(end.finished_at)))
            .bind(end.answer_message_id.map(|id| id.to_string()))
            .bind(failure.map(|failure| failure.code.as_str()))
            .bind(db.optional_text(failure.map(|failure| failure.message.as_str())))
            .bind(end.finalize_reason.map(|reason| reason.as_str()))
            .bind(snapshot);
    }
    let updated = query
        .execute(&mut *connection)
        .await
        .map_err(|error| db.error(error))?;
    match changed(&updated) {
        true => Ok(()),
        false => Err(StoreError::NotFound(format!(
            "run {run_id} (save_step before start_run?)"
        ))),
    }
}

/// Moves a paused run to `running`, for one caller only.
pub(crate) async fn claim_paused(db: &Db, id: Uuid) -> Result<bool, StoreError> {
    let claimed = db
        .query("UPDATE runs SET status = 'running' WHERE id = $1 AND status = 'awaiting_input'")
        .bind(id.to_string())
        .execute(&db.pool)
        .await
        .map_err(|error| db.error(error))?;
    Ok(crate::db::changed(&claimed))
}

/// The snapshot of a run that waits for input.
pub(crate) async fn paused(db: &Db, id: Uuid) -> Result<Option<serde_json::Value>, StoreError> {
    let row = db
        .query("SELECT snapshot FROM runs WHERE id = $1 AND status = 'awaiting_input'")
        .bind(id.to_string())
        .fetch_optional(&db.pool)
        .await
        .map_err(|error| db.error(error))?;
    let Some(row) = row else {
        return Ok(None);
    };
    let text: Option<String> = db.cells(&row, "runs").optional_text("snapshot")?;
    text.map(|text| {
        serde_json::from_str(&text).map_err(|error| {
            StoreError::corrupt(format!("runs.snapshot of run {id}: {error}")).caused_by(error)
        })
    })
    .transpose()
}

pub(crate) async fn get(db: &Db, id: Uuid) -> Result<Option<RunInfo>, StoreError> {
    let row = db
        .query(&format!("SELECT {COLUMNS} FROM runs WHERE id = $1"))
        .bind(id.to_string())
        .fetch_optional(&db.pool)
        .await
        .map_err(|error| db.error(error))?;
    row.as_ref().map(|row| decode(db, row)).transpose()
}

pub(crate) async fn of_session(db: &Db, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError> {
    let rows = db
        .query(&format!(
            "SELECT {COLUMNS} FROM runs WHERE session_id = $1 ORDER BY started_at, id"
        ))
        .bind(session_id.to_string())
        .fetch_all(&db.pool)
        .await
        .map_err(|error| db.error(error))?;
    rows.iter().map(|row| decode(db, row)).collect()
}

fn decode(db: &Db, row: &AnyRow) -> Result<RunInfo, StoreError> {
    let cells = db.cells(row, "runs");
    Ok(RunInfo {
        id: cells.uuid("id")?,
        session_id: cells.uuid("session_id")?,
        user_id: cells.free_text("user_id")?,
        query: cells.free_text("query")?,
        status: cells.name("status")?,
        model: cells.optional_free_text("model")?,
        iterations: cells.counter("iterations")?,
        tools_used: cells.counter("tools_used")?,
        usage: Usage {
            prompt_tokens: cells.counter("prompt_tokens")?,
            completion_tokens: cells.counter("completion_tokens")?,
            ..Usage::default()
        },
        finalize_reason: cells.optional_name("finalize_reason")?,
        answer_message_id: cells.optional_uuid("answer_message_id")?,
        error_code: cells.optional_name("error_code")?,
        error_message: cells.optional_free_text("error_message")?,
        save_chat: cells.flag("save_chat")?,
        started_at: cells.time("started_at")?,
        finished_at: cells.optional_time("finished_at")?,
    })
}
