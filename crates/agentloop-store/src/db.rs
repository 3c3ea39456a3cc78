//! The pool with what every query needs beside it: the dialect, and where the database is, so
//! that an error can say which database failed.

use agentloop_core::StoreError;
use sqlx::{
    Any, AnyPool, AssertSqlSafe, Transaction, any::AnyArguments, any::AnyQueryResult, query::Query,
};

use crate::dialect::Backend;

pub(crate) type AnyQuery = Query<'static, Any, AnyArguments>;

pub(crate) struct Db {
    pub(crate) pool: AnyPool,
    pub(crate) backend: Backend,
    /// The SQLite path or the PostgreSQL URL without its password, for messages.
    pub(crate) location: String,
}

impl Db {
    /// A query written with `$N` placeholders, in this database's dialect.
    pub(crate) fn query(&self, sql: &str) -> AnyQuery {
        let sql = self.backend.placeholders(sql).into_owned();
        // Safe: only our own constant SQL gets here; every value is bound.
        sqlx::query(AssertSqlSafe(sql))
    }

    /// A transaction that holds the write lock from its first statement: SQLite fails at once
    /// with SQLITE_BUSY, without waiting for `busy_timeout`, when a deferred transaction that
    /// has read must upgrade to write while another connection writes.
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Any>, StoreError> {
        let begun = match self.backend {
            Backend::Sqlite => self.pool.begin_with("BEGIN IMMEDIATE").await,
            Backend::Postgres => self.pool.begin().await,
        };
        begun.map_err(|error| self.error(error))
    }

    pub(crate) fn error(&self, error: sqlx::Error) -> StoreError {
        crate::errors::from_sqlx(&error, &self.location)
    }
}

/// Whether a statement changed any row: a conditional UPDATE or a DELETE that found nothing.
pub(crate) fn changed(result: &AnyQueryResult) -> bool {
    result.rows_affected() > 0
}
