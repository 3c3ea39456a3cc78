//! Runs: their start, their counters as they go, and how they ended.

use crate::execute::On;
use crate::sql::{Query, Row};
use agentloop_core::protocol::{RunInfo, RunStatus, Usage};
use agentloop_core::{NewRun, RunEnd, RunProgress, StoreError};
use uuid::Uuid;

use crate::columns::{count, json_text, millis};
use crate::db::Db;

const COLUMNS: &str = "id, session_id, user_id, query, model, status, save_chat, iterations, \
    tools_used, prompt_tokens, completion_tokens, cost_usd, cost_complete, finalize_reason, \
    answer_message_id, error_code, error_message, output, started_at, finished_at, pruned_at";

/// Records `run`, with the head of its state at its start and that head's seq when it has one.
pub(crate) async fn start<'a, 'd: 'a>(
    db: &Db,
    on: impl Into<On<'a, 'd>>,
    run: &NewRun,
    head: Option<(&str, u64)>,
) -> Result<(), StoreError> {
    let nothing = RunProgress::default();
    start_query(db, run, head, &nothing).execute(on).await?;
    Ok(())
}

/// The statement of [`start`], with the counters of the run's first step when it is written
/// with it.
pub(crate) fn start_query<'p>(
    db: &Db,
    run: &'p NewRun,
    head: Option<(&'p str, u64)>,
    progress: &RunProgress,
) -> Query<'p> {
    let (head, seq) = head.unzip();
    let usage = &progress.usage;
    db.query(
        "INSERT INTO runs (id, session_id, user_id, query, model, status, save_chat, context, \
             iterations, tools_used, prompt_tokens, completion_tokens, started_at, owner, \
             traceparent, state_head, state_seq, cost_usd, cost_complete) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
             $18, $19)",
    )
    .bind(run.id.to_string())
    .bind(run.session_id.to_string())
    .bind(db.text(&run.user_id))
    .bind(db.text(&run.query))
    .bind(db.optional_text(run.model.as_deref()))
    .bind(RunStatus::Running.as_str())
    .bind(i64::from(run.save_chat))
    .bind(json_text(&run.context))
    .bind(i64::from(progress.iterations))
    .bind(i64::from(progress.tools_used))
    .bind(count(usage.prompt_tokens))
    .bind(count(usage.completion_tokens))
    .bind(millis(run.started_at))
    .bind(run.owner.as_deref())
    .bind(run.traceparent.as_deref())
    .bind(head)
    .bind(seq.map(count))
    .bind(usage.cost_usd)
    .bind(i64::from(usage.cost_complete))
}

/// What a step writes to its run's row.
pub(crate) struct Progress<'a> {
    pub progress: &'a RunProgress,
    pub end: Option<&'a RunEnd>,
    /// The head of the run's checkpoint, encoded, and the seq it was taken at.
    pub head: Option<(&'a str, u64)>,
    /// When set, the row is written only if the run still belongs to this instance.
    pub owner: Option<&'a str>,
}

/// The statement that writes the counters of a step, its checkpoint's head, and with `end` how
/// the run ended; it changes no row when the step may not be written (see [`not_written`]).
pub(crate) fn progress_query<'p>(db: &Db, run_id: &'p str, step: Progress<'p>) -> Query<'p> {
    let counters = "iterations = $2, tools_used = $3, prompt_tokens = $4, completion_tokens = $5, \
        state_head = COALESCE($6, state_head), state_seq = COALESCE($7, state_seq), \
        cost_usd = $9, cost_complete = $10";
    // A run adopted elsewhere is not written by its former owner.
    let fence = " AND (CAST($8 AS TEXT) IS NULL OR owner = $8)";
    let query = match step.end {
        // A step of a run that goes on leaves its status alone: `running` since it started,
        // or since a paused run was claimed again (`claim_paused`). Writing it would rewrite
        // the `runs_in_progress` index (its condition is on `status`) in every step: one page
        // of the step's few.
        None => db.query(&format!("UPDATE runs SET {counters} WHERE id = $1{fence}")),
        Some(_) => db.query(&format!(
            "UPDATE runs SET {counters}, status = $11, finished_at = $12, answer_message_id = $13, \
                 error_code = $14, error_message = $15, finalize_reason = $16, output = $17 \
             WHERE id = $1{fence}"
        )),
    };
    let (head, seq) = match step.head {
        Some((head, seq)) => (Some(head), Some(count(seq))),
        None => (None, None),
    };
    let progress = step.progress;
    let mut query = query
        .bind(run_id)
        .bind(i64::from(progress.iterations))
        .bind(i64::from(progress.tools_used))
        .bind(count(progress.usage.prompt_tokens))
        .bind(count(progress.usage.completion_tokens))
        .bind(head)
        .bind(seq)
        .bind(step.owner)
        .bind(progress.usage.cost_usd)
        .bind(i64::from(progress.usage.cost_complete));
    if let Some(end) = step.end {
        let failure = end.failure.as_ref();
        query = query
            .bind(end.status.as_str())
            .bind(end.status.is_final().then(|| millis(end.finished_at)))
            .bind(end.answer_message_id.map(|id| id.to_string()))
            .bind(failure.map(|failure| failure.code.as_str()))
            .bind(db.optional_text(failure.map(|failure| failure.message.as_str())))
            .bind(end.finalize_reason.map(|reason| reason.as_str()))
            .bind(end.output.as_ref().map(json_text));
    }
    query
}

/// Why a step's [`progress_query`] changed no row: its run is unknown, or it was adopted by
/// another instance. (Or the query that reads it failed.)
pub(crate) async fn not_written<'a, 'd: 'a>(
    db: &Db,
    on: impl Into<On<'a, 'd>>,
    run_id: &str,
) -> StoreError {
    let exists = db
        .query("SELECT owner FROM runs WHERE id = $1")
        .bind(run_id)
        .fetch_optional(on)
        .await;
    match exists {
        Err(error) => error,
        Ok(None) => StoreError::NotFound(format!("run {run_id} (save_step before start_run?)")),
        Ok(Some(_)) => StoreError::NotOwner(format!(
            "run {run_id} was adopted by another instance; this one stops working on it"
        )),
    }
}

/// Moves a paused run to `running`, for one caller only, which becomes its owner.
pub(crate) async fn claim_paused(
    db: &Db,
    id: Uuid,
    owner: Option<&str>,
) -> Result<bool, StoreError> {
    let claimed = db
        .query(
            "UPDATE runs SET status = 'running', owner = $2, cancel_requested = 0 \
             WHERE id = $1 AND status = 'awaiting_input'",
        )
        .bind(id.to_string())
        .bind(owner)
        .execute(db)
        .await?;
    Ok(crate::db::changed(&claimed))
}

pub(crate) async fn get(db: &Db, id: Uuid) -> Result<Option<RunInfo>, StoreError> {
    let row = db
        .query(&format!("SELECT {COLUMNS} FROM runs WHERE id = $1"))
        .bind(id.to_string())
        .fetch_optional(db)
        .await?;
    row.as_ref().map(|row| decode(db, row)).transpose()
}

pub(crate) async fn of_session(db: &Db, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError> {
    let rows = db
        .query(&format!(
            "SELECT {COLUMNS} FROM runs WHERE session_id = $1 ORDER BY started_at, id"
        ))
        .bind(session_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| decode(db, row)).collect()
}

/// What `user_id`'s runs that started at or after `since` spent, summed: tokens, the cost
/// known, and whether every run's cost was complete.
pub(crate) async fn user_usage_since(
    db: &Db,
    user_id: &str,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<Usage, StoreError> {
    let row = db
        .query(
            "SELECT CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT) AS prompt_tokens, \
                 CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT) AS completion_tokens, \
                 CAST(SUM(cost_usd) AS DOUBLE PRECISION) AS cost_usd, \
                 CAST(COALESCE(MIN(cost_complete), 1) AS BIGINT) AS cost_complete \
             FROM runs WHERE user_id = $1 AND started_at >= $2",
        )
        .bind(db.text(user_id))
        .bind(millis(since))
        .fetch_one(db)
        .await?;
    let cells = db.cells(&row, "runs");
    Ok(Usage {
        prompt_tokens: cells.counter("prompt_tokens")?,
        completion_tokens: cells.counter("completion_tokens")?,
        cost_usd: cells.optional_real("cost_usd")?,
        cost_complete: cells.flag("cost_complete")?,
        ..Usage::default()
    })
}

fn decode(db: &Db, row: &Row) -> Result<RunInfo, StoreError> {
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
            cost_usd: cells.optional_real("cost_usd")?,
            cost_complete: cells.flag("cost_complete")?,
            ..Usage::default()
        },
        finalize_reason: cells.optional_name("finalize_reason")?,
        answer_message_id: cells.optional_uuid("answer_message_id")?,
        error_code: cells.optional_name("error_code")?,
        error_message: cells.optional_free_text("error_message")?,
        output: cells.optional_json("output")?,
        save_chat: cells.flag("save_chat")?,
        started_at: cells.time("started_at")?,
        finished_at: cells.optional_time("finished_at")?,
        pruned_at: cells.optional_time("pruned_at")?,
    })
}
