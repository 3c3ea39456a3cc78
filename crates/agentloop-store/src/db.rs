//! The database with what every query needs beside it: the dialect, and where the database
//! is, so that an error can say which database failed.

use std::borrow::Cow;
use std::fs::Metadata;
use std::io;
use std::path::PathBuf;

use agentloop_core::StoreError;
#[cfg(feature = "sqlite")]
use rusqlite::Connection;
#[cfg(feature = "postgres")]
use sqlx::pool::PoolConnection;
#[cfg(feature = "postgres")]
use sqlx::{Executor, PgPool, Postgres};
#[cfg(feature = "sqlite")]
use tokio::sync::MappedMutexGuard;

use crate::columns::Cells;
use crate::dialect::Backend;
use crate::sql::{Query, Row};
#[cfg(feature = "sqlite")]
use crate::sqlite::group_commit::Member;
#[cfg(feature = "sqlite")]
use crate::sqlite::{self, Lite};
use crate::text;

/// What runs the statements: a backend built in (the `sqlite` and `postgres` features).
pub(crate) enum Engine {
    /// One connection, used in the calling task (see `sqlite.rs`).
    #[cfg(feature = "sqlite")]
    Sqlite(Lite),
    #[cfg(feature = "postgres")]
    Postgres(PgPool),
    /// Built without a backend: no database opens (`connect::not_built`), no `Db` exists.
    #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
    Unbuilt(std::convert::Infallible),
}

pub(crate) struct Db {
    pub(crate) engine: Engine,
    /// PostgreSQL: where a listener connects for the news of runs (`notices.rs`).
    pub(crate) listen_url: Option<String>,
    pub(crate) backend: Backend,
    /// The SQLite path or the PostgreSQL URL without its password, for messages.
    pub(crate) location: String,
    /// The file of a SQLite store as it was when opened, to notice it deleted or replaced.
    pub(crate) file: Option<DbFile>,
    /// The SQLite file did not exist before this store opened it.
    pub(crate) created: bool,
}

impl Db {
    /// A query written with `$N` placeholders, in this database's dialect.
    pub(crate) fn query<'p>(&self, sql: &str) -> Query<'p> {
        Query::new(self.backend.placeholders(sql).into_owned())
    }

    /// Free text (from a user, the model or a tool) as this database stores it: see `text`.
    pub(crate) fn text<'t>(&self, text: &'t str) -> Cow<'t, str> {
        text::encode(self.backend, text)
    }

    pub(crate) fn optional_text<'t>(&self, text: Option<&'t str>) -> Option<Cow<'t, str>> {
        text.map(|text| self.text(text))
    }

    /// The cells of one row of `table`.
    pub(crate) fn cells<'r>(&self, row: &'r Row, table: &'static str) -> Cells<'r> {
        Cells::of(row, table, self.backend)
    }

    /// A transaction, holding SQLite's write lock from its first statement (see
    /// `sqlite::begin`), committed with the transactions that wait for the connection meanwhile
    /// (see `group_commit`); on PostgreSQL, on a connection of its own.
    ///
    /// The PostgreSQL transaction is begun with a plain `BEGIN` rather than sqlx's
    /// `begin_with`: sqlx counts transactions per connection and never resets its count when
    /// the database ended the transaction by itself, so its ROLLBACK fails and the connection
    /// goes back to the pool "inside" a transaction. [`Tx`] owns the end of the transaction.
    pub(crate) async fn begin(&self) -> Result<Tx<'_>, StoreError> {
        let connection = match &self.engine {
            #[cfg(feature = "sqlite")]
            Engine::Sqlite(lite) => match lite.join().await? {
                Some((connection, member)) => TxConnection::Sqlite {
                    connection,
                    member,
                    lite,
                },
                None => return Err(self.closed()),
            },
            // Boxed: sqlx's futures are kilobytes (see `Query::run`).
            #[cfg(feature = "postgres")]
            Engine::Postgres(pool) => Box::pin(begin_postgres(pool))
                .await
                .map(TxConnection::Postgres)
                .map_err(|error| self.error(error))?,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Engine::Unbuilt(never) => match *never {},
        };
        Ok(Tx {
            db: self,
            connection,
            open: true,
        })
    }

    /// The connection of a SQLite store, or the error that it was closed.
    #[cfg(feature = "sqlite")]
    pub(crate) async fn sqlite<'l>(
        &self,
        lite: &'l Lite,
    ) -> Result<MappedMutexGuard<'l, Connection>, StoreError> {
        lite.lock().await.ok_or_else(|| self.closed())
    }

    #[cfg(feature = "sqlite")]
    fn closed(&self) -> StoreError {
        StoreError::unavailable(format!(
            "the database at {} is unavailable: the store was closed (agentloop is stopping)",
            self.location
        ))
    }

    #[cfg(feature = "postgres")]
    pub(crate) fn error(&self, error: sqlx::Error) -> StoreError {
        crate::errors::from_sqlx(error, &self.location)
    }

    #[cfg(feature = "sqlite")]
    pub(crate) fn sqlite_error(&self, error: rusqlite::Error) -> StoreError {
        crate::errors::from_sqlite(error, &self.location)
    }

    /// Whether the database answers, and for a SQLite file whether it is still the file this
    /// store opened and still takes a write.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        if let Some(file) = &self.file {
            file.check()?;
        }
        match &self.engine {
            #[cfg(feature = "postgres")]
            Engine::Postgres(_) => self.query("SELECT 1").execute(self).await.map(drop),
            #[cfg(feature = "sqlite")]
            Engine::Sqlite(lite) => {
                let connection = self.sqlite(lite).await?;
                sqlite::ping(&connection).map_err(|error| self.sqlite_error(error))
            }
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Engine::Unbuilt(never) => match *never {},
        }
    }

    /// Waits for the queries in flight and closes the connections; later calls fail.
    pub(crate) async fn close(&self) {
        match &self.engine {
            #[cfg(feature = "sqlite")]
            Engine::Sqlite(lite) => lite.close().await,
            #[cfg(feature = "postgres")]
            Engine::Postgres(pool) => pool.close().await,
            #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
            Engine::Unbuilt(never) => match *never {},
        }
    }
}

/// Whether a statement changed any row: a conditional UPDATE or a DELETE that found nothing.
pub(crate) fn changed(count: &u64) -> bool {
    *count > 0
}

/// The connection a transaction holds.
pub(crate) enum TxConnection<'d> {
    #[cfg(feature = "sqlite")]
    Sqlite {
        connection: MappedMutexGuard<'d, Connection>,
        /// Its place in a group of transactions committed together.
        member: Member,
        lite: &'d Lite,
    },
    #[cfg(feature = "postgres")]
    Postgres(PoolConnection<Postgres>),
    /// Let go of by a commit.
    Ended,
    /// Built without SQLite: nothing else borrows from the database. Never made.
    #[cfg(not(feature = "sqlite"))]
    #[allow(dead_code)]
    Borrowing(std::convert::Infallible, std::marker::PhantomData<&'d ()>),
}

/// A transaction begun by [`Db::begin`]. Statements run on it with `&mut tx`; it ends with
/// [`Tx::commit`], or is dropped. Dropped unfinished (an error returned early, a failed
/// COMMIT, a cancelled call), it is rolled back: on SQLite at once, before the connection is
/// free again (its own work only: the rest of its group goes on, see `group_commit`); on
/// PostgreSQL by closing its connection instead of giving it back to the pool, so that what the
/// failure left behind never reaches the next caller. On SQLite, once `commit` was called the
/// work belongs to its group: `commit` returns when the group was committed (or failed), and a
/// call cancelled while it waits leaves the work to be committed with the group.
pub(crate) struct Tx<'d> {
    pub(crate) db: &'d Db,
    pub(crate) connection: TxConnection<'d>,
    /// Until COMMIT succeeded.
    open: bool,
}

impl Tx<'_> {
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        match std::mem::replace(&mut self.connection, TxConnection::Ended) {
            // Kept or undone by its group from here on, whatever happens to this call.
            #[cfg(feature = "sqlite")]
            TxConnection::Sqlite {
                connection,
                member,
                lite,
            } => {
                self.open = false;
                lite.keep(connection, &member).await
            }
            #[cfg(feature = "postgres")]
            TxConnection::Postgres(mut connection) => {
                if let Err(error) = Box::pin(connection.execute("COMMIT")).await {
                    connection.close_on_drop();
                    return Err(self.db.error(error));
                }
                self.open = false;
                Ok(())
            }
            TxConnection::Ended => Err(StoreError::query("the transaction was already ended")),
            #[cfg(not(feature = "sqlite"))]
            TxConnection::Borrowing(never, _) => match never {},
        }
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        match &mut self.connection {
            #[cfg(feature = "sqlite")]
            TxConnection::Sqlite {
                connection,
                member,
                lite,
            } => lite.abandon(connection, member),
            #[cfg(feature = "postgres")]
            TxConnection::Postgres(connection) => connection.close_on_drop(),
            TxConnection::Ended => {}
            #[cfg(not(feature = "sqlite"))]
            TxConnection::Borrowing(never, _) => match *never {},
        }
    }
}

/// A pooled PostgreSQL connection with a transaction begun on it.
#[cfg(feature = "postgres")]
async fn begin_postgres(pool: &PgPool) -> Result<PoolConnection<Postgres>, sqlx::Error> {
    let mut connection = pool.acquire().await?;
    if let Err(error) = connection.execute("BEGIN").await {
        connection.close_on_drop();
        return Err(error);
    }
    Ok(connection)
}

/// The file of a SQLite store.
pub(crate) struct DbFile {
    /// Absolute, so that a later change of the working directory does not matter.
    pub(crate) path: PathBuf,
    identity: FileIdentity,
}

impl DbFile {
    /// The file at `path`, as it is now (just opened).
    pub(crate) fn opened(path: PathBuf) -> io::Result<DbFile> {
        let identity = FileIdentity::of(&std::fs::metadata(&path)?);
        Ok(DbFile { path, identity })
    }

    /// Fails when the file was deleted or replaced since it was opened: SQLite goes on writing
    /// to the file it holds open, which no one will find again once agentloop stops.
    fn check(&self) -> Result<(), StoreError> {
        let path = self.path.display();
        match std::fs::metadata(&self.path) {
            Ok(metadata) if FileIdentity::of(&metadata) == self.identity => Ok(()),
            Ok(_) => Err(StoreError::unavailable(format!(
                "the SQLite database {path} was replaced by another file while agentloop had it \
                 open: what agentloop writes now goes to the old file, which is lost when it \
                 stops; restart agentloop to use the new file"
            ))),
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                Err(StoreError::unavailable(format!(
                    "the SQLite database {path} was deleted while agentloop had it open: what \
                     agentloop writes now is lost when it stops; stop agentloop and restore the \
                     file from a backup, or restart it to begin with an empty store"
                )))
            }
            Err(error) => Err(StoreError::unavailable(format!(
                "cannot check the SQLite database {path}: {error}; check the permissions of its \
                 directory"
            ))
            .caused_by(error)),
        }
    }
}

/// What tells two files apart even when one replaced the other under the same name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileIdentity {
    device: u64,
    inode: u64,
}

impl FileIdentity {
    #[cfg(unix)]
    fn of(metadata: &Metadata) -> FileIdentity {
        use std::os::unix::fs::MetadataExt;
        FileIdentity {
            device: metadata.dev(),
            inode: metadata.ino(),
        }
    }

    /// Elsewhere only a deleted file is noticed.
    #[cfg(not(unix))]
    fn of(_: &Metadata) -> FileIdentity {
        FileIdentity {
            device: 0,
            inode: 0,
        }
    }
}
