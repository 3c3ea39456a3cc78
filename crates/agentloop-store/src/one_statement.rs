//! A step on PostgreSQL in one round trip. Each statement of a transaction costs a round trip
//! to the server (and a wake-up on both sides); a step's transaction took six to nine of them
//! (`BEGIN`, the run's row, messages, tool records, events, the session, `COMMIT`). Written as
//! the parts of one statement, data-modifying `WITH` queries, the step is one round trip and
//! one implicit transaction: PostgreSQL applies all of it or nothing.
//!
//! The first part is the run's row, whose `UPDATE` changes nothing when the step may not be
//! written (an unknown run, or one adopted by another instance). The statement then divides by
//! the number of rows it changed: zero is an error (`division_by_zero`), which undoes every
//! part, and the caller asks why, as the transaction does.
//!
//! The parts see the database as it was before the statement, none sees another's rows, no two
//! may change the same row, and they run in no set order: the caller keeps to steps whose parts
//! write different rows (one statement on the session: `locks::after_step`), whose numbered
//! rows (messages, tool records: their `position` is their order) fit one part per table, and
//! that read nothing first (no text kept apart in `tool_outputs`, which is looked up before it
//! is sent); other steps take the transaction.

use std::fmt::Write as _;

use agentloop_core::StoreError;
use sqlx::PgPool;

use crate::db::{Db, Tx};
use crate::postgres;
use crate::runs;
use crate::sql::{Fetch, Query};

/// PostgreSQL's limit of bound parameters in one statement.
const MAX_PARAMETERS: usize = u16::MAX as usize;

/// The SQLSTATE of `division_by_zero`: the first part changed no row.
const NOT_WRITTEN: &str = "22012";

/// Whether `first` and `rest` fit in one statement.
pub(crate) fn fits<'q, 'p: 'q>(
    first: &Query<'_>,
    rest: impl IntoIterator<Item = &'q Query<'p>>,
) -> bool {
    first.params.len()
        + rest
            .into_iter()
            .map(|query| query.params.len())
            .sum::<usize>()
        <= MAX_PARAMETERS
}

/// Runs `first` (an `UPDATE` of the run's row) and `rest` as one statement.
pub(crate) async fn run(
    db: &Db,
    pool: &PgPool,
    first: Query<'_>,
    rest: Vec<Query<'_>>,
    run_id: &str,
) -> Result<(), StoreError> {
    let statement = combine(first, rest);
    tracing::debug!(target: "sql", parameters = statement.params.len(), "{}", statement.sql);
    // Boxed: sqlx's futures are kilobytes (see `Query::run`).
    match Box::pin(postgres::run(&statement, Fetch::Count, pool)).await {
        Ok(_) => Ok(()),
        Err(error) if is_not_written(&error) => Err(runs::not_written(db, db, run_id).await),
        Err(error) => Err(db.error(error)),
    }
}

/// Runs `first` and `rest` as one statement in `tx`, a transaction that wrote the run's row
/// itself (a run's beginning with its first step): the statement fails only with the
/// transaction, which the caller then drops.
pub(crate) async fn run_within(
    tx: &mut Tx<'_>,
    first: Query<'_>,
    rest: Vec<Query<'_>>,
) -> Result<(), StoreError> {
    combine(first, rest).execute(tx).await.map(drop)
}

fn is_not_written(error: &sqlx::Error) -> bool {
    error
        .as_database_error()
        .and_then(|error| error.code())
        .is_some_and(|code| code == NOT_WRITTEN)
}

/// `WITH written AS (first RETURNING 1), part1 AS (...), ... SELECT 1 / COUNT(*) FROM written`,
/// the placeholders of each part numbered after those of the parts before it.
fn combine<'p>(first: Query<'p>, rest: Vec<Query<'p>>) -> Query<'p> {
    let length = first.sql.len() + rest.iter().map(|query| query.sql.len() + 24).sum::<usize>();
    let mut sql = String::with_capacity(length + 80);
    sql.push_str("WITH written AS (");
    sql.push_str(&first.sql);
    sql.push_str(" RETURNING 1)");
    let mut params = first.params;
    for (n, query) in rest.into_iter().enumerate() {
        let _ = write!(sql, ", part{} AS (", n + 1);
        renumber_into(&mut sql, &query.sql, params.len());
        sql.push(')');
        params.extend(query.params);
    }
    sql.push_str(" SELECT 1 / COUNT(*) FROM written");
    Query { sql, params }
}

/// Appends `sql` with each placeholder `$N` written `$(N + offset)`, in place (as `values_sql`
/// writes them). The store's statements hold no other `$` (no string literals, no dollar
/// quoting).
fn renumber_into(out: &mut String, sql: &str, offset: usize) {
    let mut rest = sql;
    while let Some(dollar) = rest.find('$') {
        out.push_str(&rest[..=dollar]);
        rest = &rest[dollar + 1..];
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        match rest[..digits].parse::<usize>() {
            Ok(number) => {
                let _ = write!(out, "{}", number + offset);
            }
            Err(_) => out.push_str(&rest[..digits]),
        }
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn query(sql: &str, params: &[i64]) -> Query<'static> {
        params
            .iter()
            .fold(Query::new(sql.to_string()), |query, param| {
                query.bind(*param)
            })
    }

    #[test]
    fn placeholders_are_numbered_after_the_parts_before() {
        let mut out = String::new();
        renumber_into(&mut out, "VALUES ($1, $2), ($3, $10) WHERE $2 = $2", 4);
        assert_eq!(out, "VALUES ($5, $6), ($7, $14) WHERE $6 = $6");
        let mut out = String::new();
        renumber_into(&mut out, "SELECT 1", 7);
        assert_eq!(out, "SELECT 1");
    }

    #[test]
    fn the_parts_follow_the_run_s_row_and_the_statement_fails_without_it() {
        let combined = combine(
            query("UPDATE runs SET n = $2 WHERE id = $1", &[1, 2]),
            vec![
                query("INSERT INTO t (a, b) VALUES ($1, $2)", &[3, 4]),
                query("UPDATE s SET c = $1", &[5]),
            ],
        );
        assert_eq!(
            combined.sql,
            "WITH written AS (UPDATE runs SET n = $2 WHERE id = $1 RETURNING 1), \
             part1 AS (INSERT INTO t (a, b) VALUES ($3, $4)), part2 AS (UPDATE s SET c = $5) \
             SELECT 1 / COUNT(*) FROM written"
        );
        let values: Vec<_> = combined
            .params
            .iter()
            .map(|param| match param {
                crate::sql::Param::Int(value) => value.unwrap_or_default(),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(values, [1, 2, 3, 4, 5]);
    }

    #[test]
    fn a_step_past_the_parameter_limit_does_not_fit() {
        let small = query("UPDATE runs SET n = $1", &[1]);
        assert!(fits(&small, &[query("SELECT $1", &[1])]));
        let wide = Query {
            sql: String::new(),
            params: vec![crate::sql::Param::Int(None); MAX_PARAMETERS],
        };
        assert!(!fits(&small, &[wide]));
    }
}
