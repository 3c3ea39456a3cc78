//! Pruning: what a finished run stops keeping once `[store.retention]` says it is old enough.
//!
//! A run's trail is its events (`run_events`, most of what a run stores), its checkpoint (the
//! input in `run_inputs`, the head in `runs.state_head`, the messages of a run that does not
//! save the chat in `run_turn`) and tool outputs that no message and no record of the run names
//! any more. Pruning deletes them and marks the run (`runs.pruned_at`); it keeps the run's row
//! (status, usage, cost, typed answer), its tool call records and every message of its session,
//! so that the history a later run reads, the costs a budget sums and the session's view are
//! what they were.
//!
//! Only runs that ended (`completed`, `failed`, `cancelled`, `blocked`) are pruned: a running
//! or paused run needs its checkpoint to go on. Each batch is one short transaction over at most
//! `batch` runs, its statements keyed by run id (no lock on sessions), so runs saving their steps
//! meanwhile wait for it at most as long as for another step. Pruners of several instances may
//! run at once: a run is marked once, and deleting what another pruner deleted deletes nothing.

use agentloop_core::StoreError;
use chrono::{DateTime, Duration, Utc};

use crate::config::Retention;
use crate::db::Db;
use crate::sql::Query;

/// What one pass of pruning deleted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pruned {
    /// Runs whose trail was deleted (and that are marked pruned).
    pub runs: u64,
    /// Events deleted.
    pub events: u64,
    /// Rows of checkpoints deleted: inputs and messages of runs that do not save the chat.
    pub checkpoint_rows: u64,
    /// Stored tool outputs deleted (none of the run's messages or records named them).
    pub tool_outputs: u64,
}

impl std::ops::AddAssign for Pruned {
    fn add_assign(&mut self, other: Pruned) {
        self.runs += other.runs;
        self.events += other.events;
        self.checkpoint_rows += other.checkpoint_rows;
        self.tool_outputs += other.tool_outputs;
    }
}

/// The condition on `runs r` of a run the rules prune ($1: the age limit in milliseconds,
/// $2: how many later runs of its session make it prunable). A rule not set is given a value
/// that matches nothing (a limit before every run, a count no session reaches).
const PRUNABLE: &str = "r.pruned_at IS NULL AND r.finished_at IS NOT NULL \
    AND r.status IN ('completed', 'failed', 'cancelled', 'blocked') \
    AND (r.finished_at < $1 \
        OR (SELECT COUNT(*) FROM runs n WHERE n.session_id = r.session_id \
            AND (n.started_at > r.started_at OR (n.started_at = r.started_at AND n.id > r.id))) \
            >= $2)";

/// The values of [`PRUNABLE`]'s parameters under `rules` at `now`.
fn limits(rules: &Retention, now: DateTime<Utc>) -> (i64, i64) {
    let before = rules.max_age_days.map_or(i64::MIN, |days| {
        (now - Duration::days(i64::from(days))).timestamp_millis()
    });
    let later_runs = rules.keep_per_session.map_or(i64::MAX, i64::from);
    (before, later_runs)
}

/// How many runs the rules would prune now.
pub(crate) async fn count(
    db: &Db,
    rules: &Retention,
    now: DateTime<Utc>,
) -> Result<u64, StoreError> {
    if !rules.is_set() {
        return Ok(0);
    }
    let (before, later_runs) = limits(rules, now);
    let row = db
        .query(&format!(
            "SELECT COUNT(*) AS prunable FROM runs r WHERE {PRUNABLE}"
        ))
        .bind(before)
        .bind(later_runs)
        .fetch_one(db)
        .await?;
    db.cells(&row, "runs").counter("prunable")
}

/// Prunes one batch of at most `rules.batch` runs, oldest first, in one transaction.
pub(crate) async fn batch(
    db: &Db,
    rules: &Retention,
    now: DateTime<Utc>,
) -> Result<Pruned, StoreError> {
    if !rules.is_set() {
        return Ok(Pruned::default());
    }
    let (before, later_runs) = limits(rules, now);
    let rows = db
        .query(&format!(
            "SELECT r.id FROM runs r WHERE {PRUNABLE} ORDER BY r.finished_at, r.id LIMIT $3"
        ))
        .bind(before)
        .bind(later_runs)
        .bind(i64::from(rules.batch))
        .fetch_all(db)
        .await?;
    let ids = rows
        .iter()
        .map(|row| db.cells(row, "runs").text("id"))
        .collect::<Result<Vec<String>, StoreError>>()?;
    if ids.is_empty() {
        return Ok(Pruned::default());
    }
    let list = (1..=ids.len())
        .map(|n| format!("${n}"))
        .collect::<Vec<_>>()
        .join(", ");
    let of_batch = |sql: String| -> Query<'_> {
        ids.iter()
            .fold(db.query(&sql), |query, id| query.bind(id.as_str()))
    };
    let mut tx = db.begin().await?;
    // Marked first, and only the runs still unmarked: a pruner that lost the race to another
    // deletes what is already gone, nothing else.
    let runs = of_batch(format!(
        "UPDATE runs SET pruned_at = ${}, state_head = NULL \
         WHERE id IN ({list}) AND pruned_at IS NULL",
        ids.len() + 1
    ))
    .bind(now.timestamp_millis())
    .execute(&mut tx)
    .await?;
    let events = of_batch(format!("DELETE FROM run_events WHERE run_id IN ({list})"))
        .execute(&mut tx)
        .await?;
    let inputs = of_batch(format!("DELETE FROM run_inputs WHERE run_id IN ({list})"))
        .execute(&mut tx)
        .await?;
    let turns = of_batch(format!("DELETE FROM run_turn WHERE run_id IN ({list})"))
        .execute(&mut tx)
        .await?;
    let tool_outputs = of_batch(format!(
        "DELETE FROM tool_outputs WHERE run_id IN ({list}) \
         AND NOT EXISTS (SELECT 1 FROM messages m \
             WHERE m.run_id = tool_outputs.run_id AND m.content_hash = tool_outputs.hash) \
         AND NOT EXISTS (SELECT 1 FROM tool_executions e \
             WHERE e.run_id = tool_outputs.run_id AND e.result_hash = tool_outputs.hash)"
    ))
    .execute(&mut tx)
    .await?;
    tx.commit().await?;
    Ok(Pruned {
        runs,
        events,
        checkpoint_rows: inputs + turns,
        tool_outputs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rule_not_set_matches_no_run() {
        let now = Utc::now();
        let none = Retention::default();
        assert_eq!(limits(&none, now), (i64::MIN, i64::MAX));
        let both = Retention {
            max_age_days: Some(2),
            keep_per_session: Some(5),
            ..Retention::default()
        };
        let (before, later_runs) = limits(&both, now);
        assert_eq!(before, now.timestamp_millis() - 2 * 86_400_000);
        assert_eq!(later_runs, 5);
    }
}
