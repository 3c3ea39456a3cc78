//! Statements as the store's modules write them, whatever the database: SQL text with `$N`
//! placeholders, the values bound to them, and the rows that come back. `sqlite.rs` runs them
//! on rusqlite, in the calling task; `postgres.rs` on sqlx's PostgreSQL driver.

use std::borrow::Cow;
use std::sync::Arc;

use agentloop_core::StoreError;

use crate::db::{Db, Engine, Tx, TxConnection};
use crate::{postgres, sqlite};

/// A value bound to a placeholder. Typed even when NULL: PostgreSQL needs the type of every
/// parameter. Text is borrowed when it can be: a step's texts (its state, events, tool outputs)
/// go to the database without a copy of their own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<Cow<'a, str>>),
}

impl From<i64> for Param<'_> {
    fn from(value: i64) -> Self {
        Param::Int(Some(value))
    }
}

impl From<Option<i64>> for Param<'_> {
    fn from(value: Option<i64>) -> Self {
        Param::Int(value)
    }
}

impl From<f64> for Param<'_> {
    fn from(value: f64) -> Self {
        Param::Real(Some(value))
    }
}

impl From<Option<f64>> for Param<'_> {
    fn from(value: Option<f64>) -> Self {
        Param::Real(value)
    }
}

impl From<String> for Param<'_> {
    fn from(value: String) -> Self {
        Param::Text(Some(Cow::Owned(value)))
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(value: &'a str) -> Self {
        Param::Text(Some(Cow::Borrowed(value)))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(value: &'a String) -> Self {
        Param::Text(Some(Cow::Borrowed(value)))
    }
}

impl<'a> From<Cow<'a, str>> for Param<'a> {
    fn from(value: Cow<'a, str>) -> Self {
        Param::Text(Some(value))
    }
}

impl<'a> From<Option<Cow<'a, str>>> for Param<'a> {
    fn from(value: Option<Cow<'a, str>>) -> Self {
        Param::Text(value)
    }
}

impl From<Option<String>> for Param<'_> {
    fn from(value: Option<String>) -> Self {
        Param::Text(value.map(Cow::Owned))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(value: Option<&'a str>) -> Self {
        Param::Text(value.map(Cow::Borrowed))
    }
}

impl<'a> From<Option<&'a String>> for Param<'a> {
    fn from(value: Option<&'a String>) -> Self {
        Param::Text(value.map(|value| Cow::Borrowed(value.as_str())))
    }
}

/// A value read back.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
}

impl Cell {
    /// What it is, for a message about a column that holds the wrong kind of value.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Cell::Null => "NULL",
            Cell::Int(_) => "an integer",
            Cell::Real(_) => "a real number",
            Cell::Text(_) => "text",
            Cell::Blob(_) => "a blob",
        }
    }
}

/// One row of a result: its cells by column name.
#[derive(Debug, Clone)]
pub(crate) struct Row {
    names: Arc<[String]>,
    cells: Vec<Cell>,
}

impl Row {
    pub(crate) fn new(names: Arc<[String]>, cells: Vec<Cell>) -> Self {
        Self { names, cells }
    }

    /// The cell of `column`; `None` when the result has no such column.
    pub(crate) fn get(&self, column: &str) -> Option<&Cell> {
        let index = self.names.iter().position(|name| name == column)?;
        self.cells.get(index)
    }
}

/// A statement and its values, in the dialect of its database (see [`Db::query`]).
#[derive(Debug)]
#[must_use = "a query does nothing until it is executed or fetched"]
pub(crate) struct Query<'p> {
    pub(crate) sql: String,
    pub(crate) params: Vec<Param<'p>>,
}

/// Where a statement runs: on its own (SQLite: the store's connection; PostgreSQL: any
/// connection of the pool), or inside a transaction.
pub(crate) enum On<'a, 'd: 'a> {
    Db(&'a Db),
    Tx(&'a mut Tx<'d>),
}

impl<'a, 'd: 'a> From<&'a Db> for On<'a, 'd> {
    fn from(db: &'a Db) -> Self {
        On::Db(db)
    }
}

impl<'a, 'd: 'a> From<&'a mut Tx<'d>> for On<'a, 'd> {
    fn from(tx: &'a mut Tx<'d>) -> Self {
        On::Tx(tx)
    }
}

/// What a statement is run for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fetch {
    /// The number of rows it changed.
    Count,
    /// Its rows; with `Some(1)`, at most that many are read.
    Rows(Option<usize>),
}

/// What came back.
pub(crate) enum Outcome {
    Count(u64),
    Rows(Vec<Row>),
}

impl<'p> Query<'p> {
    pub(crate) fn new(sql: String) -> Self {
        Self {
            sql,
            params: Vec::new(),
        }
    }

    pub(crate) fn bind(mut self, value: impl Into<Param<'p>>) -> Self {
        self.params.push(value.into());
        self
    }

    /// Runs a statement that returns no rows; how many rows it changed.
    pub(crate) async fn execute<'a, 'd: 'a>(
        self,
        on: impl Into<On<'a, 'd>>,
    ) -> Result<u64, StoreError> {
        match self.run(on.into(), Fetch::Count).await? {
            Outcome::Count(count) => Ok(count),
            Outcome::Rows(rows) => Ok(rows.len() as u64),
        }
    }

    pub(crate) async fn fetch_all<'a, 'd: 'a>(
        self,
        on: impl Into<On<'a, 'd>>,
    ) -> Result<Vec<Row>, StoreError> {
        match self.run(on.into(), Fetch::Rows(None)).await? {
            Outcome::Rows(rows) => Ok(rows),
            Outcome::Count(_) => Ok(Vec::new()),
        }
    }

    pub(crate) async fn fetch_optional<'a, 'd: 'a>(
        self,
        on: impl Into<On<'a, 'd>>,
    ) -> Result<Option<Row>, StoreError> {
        self.first(on.into()).await
    }

    /// The one row a statement such as `SELECT COUNT(*)` always returns.
    pub(crate) async fn fetch_one<'a, 'd: 'a>(
        self,
        on: impl Into<On<'a, 'd>>,
    ) -> Result<Row, StoreError> {
        self.first(on.into())
            .await?
            .ok_or_else(|| StoreError::query(format!("no row came back from {}", self.sql)))
    }

    async fn first(&self, on: On<'_, '_>) -> Result<Option<Row>, StoreError> {
        match self.run(on, Fetch::Rows(Some(1))).await? {
            Outcome::Rows(rows) => Ok(rows.into_iter().next()),
            Outcome::Count(_) => Ok(None),
        }
    }

    async fn run(&self, on: On<'_, '_>, fetch: Fetch) -> Result<Outcome, StoreError> {
        // `AGENTLOOP_LOG=debug,sql=debug` shows every statement (the CLI keeps it quiet unless
        // the filter names it).
        tracing::debug!(target: "sql", parameters = self.params.len(), "{}", self.sql);
        match on {
            On::Db(db) => match &db.engine {
                // Run at once on the store's connection: no thread to hand the statement to.
                Engine::Sqlite(lite) => {
                    let connection = db.sqlite(lite).await?;
                    sqlite::run(&connection, self, fetch).map_err(|error| db.sqlite_error(error))
                }
                // Boxed here and below: sqlx's futures are kilobytes, and inline they would
                // make every store call's future as large on SQLite too.
                Engine::Postgres(pool) => Box::pin(postgres::run(self, fetch, pool))
                    .await
                    .map_err(|error| db.error(error)),
            },
            On::Tx(tx) => {
                let db = tx.db;
                match &mut tx.connection {
                    TxConnection::Sqlite { connection, .. } => {
                        sqlite::run(connection, self, fetch).map_err(|error| db.sqlite_error(error))
                    }
                    TxConnection::Postgres(connection) => {
                        Box::pin(postgres::run(self, fetch, &mut **connection))
                            .await
                            .map_err(|error| db.error(error))
                    }
                    TxConnection::Ended => {
                        Err(StoreError::query("a statement after its transaction ended"))
                    }
                }
            }
        }
    }
}
