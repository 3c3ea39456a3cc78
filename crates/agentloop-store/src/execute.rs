//! Running the store's statements ([`Query`]) on its database, on their own or inside a
//! transaction, on SQLite or PostgreSQL.

use agentloop_core::StoreError;

use crate::db::{Db, Engine, Tx, TxConnection};
#[cfg(feature = "postgres")]
use crate::postgres;
use crate::sql::{Fetch, Outcome, Query, Row};
#[cfg(feature = "sqlite")]
use crate::sqlite;

/// Where a statement runs: on its own (SQLite: the store's connection; PostgreSQL: any
/// connection of the pool), or inside a transaction.
pub(crate) enum On<'a, 'd: 'a> {
    Db(&'a Db),
    Tx(&'a mut Tx<'d>),
}

impl<'d> On<'_, 'd> {
    /// The same place, borrowed again: for a second statement on it.
    pub(crate) fn reborrow(&mut self) -> On<'_, 'd> {
        match self {
            On::Db(db) => On::Db(db),
            On::Tx(tx) => On::Tx(tx),
        }
    }
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

impl Query<'_> {
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
                #[cfg(feature = "sqlite")]
                Engine::Sqlite(lite) => {
                    let connection = db.sqlite(lite).await?;
                    sqlite::run(&connection, self, fetch).map_err(|error| db.sqlite_error(error))
                }
                // Boxed here and below: sqlx's futures are kilobytes, and inline they would
                // make every store call's future as large on SQLite too.
                #[cfg(feature = "postgres")]
                Engine::Postgres(pool) => Box::pin(postgres::run(self, fetch, pool))
                    .await
                    .map_err(|error| db.error(error)),
                #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
                Engine::Unbuilt(never) => match *never {},
            },
            On::Tx(tx) => {
                #[cfg(any(feature = "sqlite", feature = "postgres"))]
                let db = tx.db;
                match &mut tx.connection {
                    #[cfg(feature = "sqlite")]
                    TxConnection::Sqlite { connection, .. } => {
                        sqlite::run(connection, self, fetch).map_err(|error| db.sqlite_error(error))
                    }
                    #[cfg(feature = "postgres")]
                    TxConnection::Postgres(connection) => {
                        Box::pin(postgres::run(self, fetch, &mut **connection))
                            .await
                            .map_err(|error| db.error(error))
                    }
                    TxConnection::Ended => {
                        Err(StoreError::query("a statement after its transaction ended"))
                    }
                    #[cfg(not(feature = "sqlite"))]
                    TxConnection::Borrowing(never, _) => match *never {},
                }
            }
        }
    }
}
