//! How values are written to the portable schema and read back: ids as text, times as
//! milliseconds, JSON as text, counters as BIGINT, free text through `text::encode`. Anything
//! unreadable becomes `StoreError::Corrupt` naming the table and column, never a panic.

use std::future::Future;
use std::sync::Arc;

use agentloop_core::{Clock, StoreError};
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde_json::Value;
use uuid::Uuid;

use crate::dialect::Backend;
use crate::sql::{Cell, Row};
use crate::text;

/// Times are kept to the millisecond: what is read back is truncated to it.
pub(crate) fn millis(time: DateTime<Utc>) -> i64 {
    time.timestamp_millis()
}

/// SQL has no unsigned integers; a counter past `i64::MAX` is not a value worth failing for.
pub(crate) fn count(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn json_text(value: &Value) -> String {
    value.to_string()
}

/// The JSON of a value a row holds; serialising our own protocol types cannot fail in practice,
/// but a failure still must not panic.
pub(crate) fn to_json<T: serde::Serialize>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|error| {
        StoreError::query(format!("cannot serialise {what}: {error}")).caused_by(error)
    })
}

/// One row of `table`, read column by column.
pub(crate) struct Cells<'r> {
    row: &'r Row,
    table: &'static str,
    backend: Backend,
}

impl<'r> Cells<'r> {
    pub(crate) fn of(row: &'r Row, table: &'static str, backend: Backend) -> Self {
        Self {
            row,
            table,
            backend,
        }
    }

    /// The cell of `column`, `None` when NULL.
    fn get(&self, column: &str) -> Result<Option<&'r Cell>, StoreError> {
        match self.row.get(column) {
            None => Err(self.corrupt(column, "is missing from the result")),
            Some(Cell::Null) => Ok(None),
            Some(cell) => Ok(Some(cell)),
        }
    }

    fn required<T>(&self, column: &str, value: Option<T>) -> Result<T, StoreError> {
        value.ok_or_else(|| self.corrupt(column, "is NULL"))
    }

    fn wrong_kind(&self, column: &str, cell: &Cell, expected: &str) -> StoreError {
        self.corrupt(column, &format!("holds {}, not {expected}", cell.kind()))
    }

    pub(crate) fn corrupt(&self, column: &str, detail: &str) -> StoreError {
        StoreError::corrupt(format!(
            "{}.{column} {detail} (was the database written by a newer agentloop, or edited by \
             hand?)",
            self.table
        ))
    }

    /// Text the store wrote itself: an id, a name, JSON.
    pub(crate) fn text(&self, column: &str) -> Result<String, StoreError> {
        let value = self.optional_text(column)?;
        self.required(column, value)
    }

    pub(crate) fn optional_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        match self.get(column)? {
            None => Ok(None),
            Some(Cell::Text(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.wrong_kind(column, other, "text")),
        }
    }

    /// Text that came from outside (a user, the model, a tool) and may hold any character; it
    /// was written with `Db::text`.
    pub(crate) fn free_text(&self, column: &str) -> Result<String, StoreError> {
        Ok(text::decode(self.backend, self.text(column)?))
    }

    pub(crate) fn optional_free_text(&self, column: &str) -> Result<Option<String>, StoreError> {
        Ok(self
            .optional_text(column)?
            .map(|stored| text::decode(self.backend, stored)))
    }

    /// Bytes (a BLOB, BYTEA).
    pub(crate) fn blob(&self, column: &str) -> Result<Vec<u8>, StoreError> {
        match self.get(column)? {
            None => Err(self.corrupt(column, "is NULL")),
            Some(Cell::Blob(bytes)) => Ok(bytes.clone()),
            // SQLite gives bytes that are valid UTF-8 back as text.
            Some(Cell::Text(text)) => Ok(text.clone().into_bytes()),
            Some(other) => Err(self.wrong_kind(column, other, "bytes")),
        }
    }

    pub(crate) fn integer(&self, column: &str) -> Result<i64, StoreError> {
        let value = self.optional_integer(column)?;
        self.required(column, value)
    }

    pub(crate) fn optional_integer(&self, column: &str) -> Result<Option<i64>, StoreError> {
        match self.get(column)? {
            None => Ok(None),
            Some(Cell::Int(value)) => Ok(Some(*value)),
            Some(other) => Err(self.wrong_kind(column, other, "an integer")),
        }
    }

    pub(crate) fn optional_real(&self, column: &str) -> Result<Option<f64>, StoreError> {
        match self.get(column)? {
            None => Ok(None),
            Some(Cell::Real(value)) => Ok(Some(*value)),
            // SQLite keeps a whole number written to a REAL column as an integer on disk.
            #[allow(clippy::cast_precision_loss)]
            Some(Cell::Int(value)) => Ok(Some(*value as f64)),
            Some(other) => Err(self.wrong_kind(column, other, "a number")),
        }
    }

    pub(crate) fn flag(&self, column: &str) -> Result<bool, StoreError> {
        match self.integer(column)? {
            0 => Ok(false),
            1 => Ok(true),
            other => Err(self.corrupt(column, &format!("holds {other}, not 0 or 1"))),
        }
    }

    pub(crate) fn counter<T: TryFrom<i64>>(&self, column: &str) -> Result<T, StoreError> {
        let value = self.integer(column)?;
        T::try_from(value)
            .map_err(|_| self.corrupt(column, &format!("holds {value}, out of range")))
    }

    pub(crate) fn uuid(&self, column: &str) -> Result<Uuid, StoreError> {
        let text = self.text(column)?;
        self.parse_uuid(column, &text)
    }

    pub(crate) fn optional_uuid(&self, column: &str) -> Result<Option<Uuid>, StoreError> {
        self.optional_text(column)?
            .map(|text| self.parse_uuid(column, &text))
            .transpose()
    }

    fn parse_uuid(&self, column: &str, text: &str) -> Result<Uuid, StoreError> {
        Uuid::parse_str(text)
            .map_err(|_| self.corrupt(column, &format!("holds {text:?}, which is not a UUID")))
    }

    pub(crate) fn time(&self, column: &str) -> Result<DateTime<Utc>, StoreError> {
        let value = self.integer(column)?;
        self.parse_time(column, value)
    }

    pub(crate) fn optional_time(&self, column: &str) -> Result<Option<DateTime<Utc>>, StoreError> {
        self.optional_integer(column)?
            .map(|value| self.parse_time(column, value))
            .transpose()
    }

    fn parse_time(&self, column: &str, value: i64) -> Result<DateTime<Utc>, StoreError> {
        DateTime::from_timestamp_millis(value).ok_or_else(|| {
            self.corrupt(
                column,
                &format!("holds {value}, not a time in milliseconds"),
            )
        })
    }

    /// A JSON document stored as text, as the type it should hold.
    pub(crate) fn json<T: DeserializeOwned>(&self, column: &str) -> Result<T, StoreError> {
        let text = self.text(column)?;
        self.parse_json(column, &text)
    }

    pub(crate) fn optional_json<T: DeserializeOwned>(
        &self,
        column: &str,
    ) -> Result<Option<T>, StoreError> {
        self.optional_text(column)?
            .map(|text| self.parse_json(column, &text))
            .transpose()
    }

    fn parse_json<T: DeserializeOwned>(&self, column: &str, text: &str) -> Result<T, StoreError> {
        serde_json::from_str(text)
            .map_err(|error| self.corrupt(column, &format!("holds unreadable JSON ({error})")))
    }

    /// One of the snake_case names of a protocol enum (a status, a role, a kind).
    pub(crate) fn name<T: DeserializeOwned>(&self, column: &str) -> Result<T, StoreError> {
        let text = self.text(column)?;
        self.parse_name(column, text)
    }

    pub(crate) fn optional_name<T: DeserializeOwned>(
        &self,
        column: &str,
    ) -> Result<Option<T>, StoreError> {
        self.optional_text(column)?
            .map(|text| self.parse_name(column, text))
            .transpose()
    }

    fn parse_name<T: DeserializeOwned>(&self, column: &str, text: String) -> Result<T, StoreError> {
        serde_json::from_value(Value::String(text.clone())).map_err(|_| {
            self.corrupt(
                column,
                &format!("holds {text:?}, which is not a known value"),
            )
        })
    }
}

tokio::task_local! {
    /// The clock of the store whose call is running ([`SqlStore::with_clock`]); scoped around
    /// every call, so that each query reads the time of its own store.
    ///
    /// [`SqlStore::with_clock`]: crate::SqlStore::with_clock
    static CLOCK: Arc<dyn Clock>;
}

/// Runs `call` with `clock` as the time [`now`] reads. (A plain function: an `async fn` would
/// hold a second copy of `call`'s state.)
pub(crate) fn with_clock<F: Future>(
    clock: Arc<dyn Clock>,
    call: F,
) -> tokio::task::futures::TaskLocalFuture<Arc<dyn Clock>, F> {
    CLOCK.scope(clock, call)
}

/// Now, by the store's clock, truncated to what the database keeps, so that what a method
/// returns equals what a later read gives back.
pub(crate) fn now() -> DateTime<Utc> {
    let now = CLOCK
        .try_with(|clock| clock.now())
        .unwrap_or_else(|_| Utc::now());
    DateTime::from_timestamp_millis(now.timestamp_millis()).unwrap_or(now)
}
