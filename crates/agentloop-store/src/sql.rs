//! Statements as the store's modules write them, whatever the database: SQL text with `$N`
//! placeholders, the values bound to them, and the rows that come back. `execute.rs` runs them:
//! `sqlite.rs` on rusqlite, in the calling task; `postgres.rs` on sqlx's PostgreSQL driver.

use std::borrow::Cow;
use std::sync::Arc;

/// A value bound to a placeholder. Typed even when NULL: PostgreSQL needs the type of every
/// parameter. Text is borrowed when it can be: a step's texts (its state, events, tool outputs)
/// go to the database without a copy of their own.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Param<'a> {
    Int(Option<i64>),
    Real(Option<f64>),
    Text(Option<Cow<'a, str>>),
    /// Bytes (an attachment's), shared rather than copied.
    Blob(Option<Arc<[u8]>>),
}

impl From<Arc<[u8]>> for Param<'_> {
    fn from(value: Arc<[u8]>) -> Self {
        Param::Blob(Some(value))
    }
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
}
