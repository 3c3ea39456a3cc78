//! PostgreSQL through sqlx's own driver for it: statements bound with typed parameters and
//! prepared once per connection (sqlx caches them by their text), rows read into [`Row`]s.

use std::sync::Arc;
use std::time::Duration;

use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Arguments, AssertSqlSafe, Column, Executor, Postgres, Row as _, TypeInfo};

use crate::sql::{Cell, Fetch, Outcome, Param, Query, Row};

/// How long a store call waits for a connection (a free one, or a new one) before it fails:
/// with the database down, a request fails in seconds instead of hanging.
pub(crate) const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) async fn run<'e, E>(
    query: &Query<'_>,
    fetch: Fetch,
    on: E,
) -> Result<Outcome, sqlx::Error>
where
    E: Executor<'e, Database = Postgres>,
{
    let mut arguments = PgArguments::default();
    for param in &query.params {
        match param {
            Param::Int(value) => arguments.add(value),
            Param::Real(value) => arguments.add(value),
            Param::Text(value) => arguments.add(value.as_deref()),
            Param::Blob(value) => arguments.add(value.as_deref()),
        }
        .map_err(sqlx::Error::Encode)?;
    }
    // Safe: only the store's own constant SQL gets here; every value is bound.
    let statement = sqlx::query_with(AssertSqlSafe(query.sql.clone()), arguments);
    match fetch {
        Fetch::Count => Ok(Outcome::Count(statement.execute(on).await?.rows_affected())),
        Fetch::Rows(Some(1)) => {
            let row = statement.fetch_optional(on).await?;
            Ok(Outcome::Rows(
                row.map(|row| read(&row)).transpose()?.into_iter().collect(),
            ))
        }
        Fetch::Rows(_) => {
            let rows = statement.fetch_all(on).await?;
            let names = match rows.first() {
                Some(row) => names(row),
                None => return Ok(Outcome::Rows(Vec::new())),
            };
            rows.iter()
                .map(|row| cells(row).map(|cells| Row::new(names.clone(), cells)))
                .collect::<Result<_, _>>()
                .map(Outcome::Rows)
        }
    }
}

fn names(row: &PgRow) -> Arc<[String]> {
    row.columns()
        .iter()
        .map(|column| column.name().to_owned())
        .collect()
}

fn read(row: &PgRow) -> Result<Row, sqlx::Error> {
    Ok(Row::new(names(row), cells(row)?))
}

/// The portable schema has BIGINT, DOUBLE PRECISION and TEXT columns; a computed column is
/// cast to one of them by its query.
fn cells(row: &PgRow) -> Result<Vec<Cell>, sqlx::Error> {
    row.columns()
        .iter()
        .map(|column| {
            let index = column.ordinal();
            Ok(match column.type_info().name() {
                "INT8" => row
                    .try_get::<Option<i64>, _>(index)?
                    .map_or(Cell::Null, Cell::Int),
                "INT4" => row
                    .try_get::<Option<i32>, _>(index)?
                    .map_or(Cell::Null, |value| Cell::Int(value.into())),
                "INT2" => row
                    .try_get::<Option<i16>, _>(index)?
                    .map_or(Cell::Null, |value| Cell::Int(value.into())),
                "BOOL" => row
                    .try_get::<Option<bool>, _>(index)?
                    .map_or(Cell::Null, |value| Cell::Int(value.into())),
                "FLOAT8" => row
                    .try_get::<Option<f64>, _>(index)?
                    .map_or(Cell::Null, Cell::Real),
                "FLOAT4" => row
                    .try_get::<Option<f32>, _>(index)?
                    .map_or(Cell::Null, |value| Cell::Real(value.into())),
                "BYTEA" => row
                    .try_get::<Option<Vec<u8>>, _>(index)?
                    .map_or(Cell::Null, Cell::Blob),
                // pg_notify and other functions that return nothing.
                "VOID" => Cell::Null,
                _ => row
                    .try_get::<Option<String>, _>(index)?
                    .map_or(Cell::Null, Cell::Text),
            })
        })
        .collect()
}
