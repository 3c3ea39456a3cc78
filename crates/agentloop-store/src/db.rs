//! The pool with what every query needs beside it: the dialect, and where the database is, so
//! that an error can say which database failed.

use std::fs::Metadata;
use std::io;
use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentloop_core::StoreError;
use sqlx::any::AnyRow;
use sqlx::pool::PoolConnection;
use sqlx::{
    Any, AnyConnection, AnyPool, AssertSqlSafe, Executor, any::AnyArguments, any::AnyQueryResult,
    query::Query,
};

use crate::columns::Cells;
use crate::dialect::Backend;
use crate::text;

pub(crate) type AnyQuery = Query<'static, Any, AnyArguments>;

pub(crate) struct Db {
    pub(crate) pool: AnyPool,
    /// PostgreSQL: where a listener connects for the news of runs (`notices.rs`).
    pub(crate) listen_url: Option<String>,
    pub(crate) backend: Backend,
    /// The SQLite path or the PostgreSQL URL without its password, for messages.
    pub(crate) location: String,
    /// The file of a SQLite store as it was when opened, to notice it deleted or replaced.
    pub(crate) file: Option<DbFile>,
    /// For `sqlite::memory:`, whose only connection is the database and cannot be closed: set
    /// when a transaction was dropped unfinished; the pool rolls it back before the next use.
    pub(crate) rollback_on_acquire: Option<Arc<AtomicBool>>,
    /// The SQLite file did not exist before this store opened it.
    pub(crate) created: bool,
}

impl Db {
    /// A query written with `$N` placeholders, in this database's dialect.
    pub(crate) fn query(&self, sql: &str) -> AnyQuery {
        let sql = self.backend.placeholders(sql).into_owned();
        // Safe: only our own constant SQL gets here; every value is bound.
        sqlx::query(AssertSqlSafe(sql))
    }

    /// Free text (from a user, the model or a tool) as this database stores it: see `text`.
    pub(crate) fn text(&self, text: &str) -> String {
        text::encode(self.backend, text).into_owned()
    }

    pub(crate) fn optional_text(&self, text: Option<&str>) -> Option<String> {
        text.map(|text| self.text(text))
    }

    /// The cells of one row of `table`.
    pub(crate) fn cells<'r>(&self, row: &'r AnyRow, table: &'static str) -> Cells<'r> {
        Cells::of(row, table, self.backend)
    }

    /// A transaction on a connection of its own, holding SQLite's write lock from its first
    /// statement: SQLite fails at once with SQLITE_BUSY, without waiting for `busy_timeout`,
    /// when a deferred transaction that has read must upgrade to write while another
    /// connection writes.
    ///
    /// The transaction is begun with a plain `BEGIN` rather than sqlx's `begin_with`: sqlx
    /// counts transactions per connection and never resets its count when the database ended
    /// the transaction by itself (SQLite does on a full disk or an I/O error), so its ROLLBACK
    /// fails, the connection goes back to the pool "inside" a transaction, and every later
    /// `begin_with` on it fails. [`Tx`] owns the end of the transaction instead.
    pub(crate) async fn begin(&self) -> Result<Tx<'_>, StoreError> {
        let connection = self
            .pool
            .acquire()
            .await
            .map_err(|error| self.error(error))?;
        let mut tx = Tx {
            db: self,
            connection,
            open: true,
        };
        let begin = match self.backend {
            Backend::Sqlite => "BEGIN IMMEDIATE",
            Backend::Postgres => "BEGIN",
        };
        // On failure `tx` is dropped open, and its connection closed.
        tx.connection
            .execute(begin)
            .await
            .map_err(|error| self.error(error))?;
        Ok(tx)
    }

    pub(crate) fn error(&self, error: sqlx::Error) -> StoreError {
        crate::errors::from_sqlx(error, &self.location)
    }

    /// Whether the database answers, and for a SQLite file whether it is still the file this
    /// store opened and still takes a write.
    pub(crate) async fn ping(&self) -> Result<(), StoreError> {
        if let Some(file) = &self.file {
            file.check()?;
        }
        match self.backend {
            Backend::Postgres => self
                .query("SELECT 1")
                .execute(&self.pool)
                .await
                .map(drop)
                .map_err(|error| self.error(error)),
            Backend::Sqlite => {
                // A write that changes nothing, committed: the header's user_version set to what
                // it is. Only a write proves that the file still takes writes (not read-only, not
                // on a disk too full for the WAL to grow); it costs one page in the WAL.
                let mut tx = self.begin().await?;
                let version: i64 = sqlx::query_scalar("PRAGMA user_version")
                    .fetch_one(&mut *tx)
                    .await
                    .map_err(|error| self.error(error))?;
                sqlx::query(AssertSqlSafe(format!("PRAGMA user_version = {version}")))
                    .execute(&mut *tx)
                    .await
                    .map_err(|error| self.error(error))?;
                tx.commit().await
            }
        }
    }
}

/// Whether a statement changed any row: a conditional UPDATE or a DELETE that found nothing.
pub(crate) fn changed(result: &AnyQueryResult) -> bool {
    result.rows_affected() > 0
}

/// A transaction begun by [`Db::begin`]. Statements run on it through `&mut *tx`; it ends with
/// [`Tx::commit`], or is dropped. Dropped unfinished (an error returned early, a failed
/// COMMIT, a cancelled call), its connection is closed instead of going back to the pool:
/// closing rolls back whatever the failure left behind, and that state never reaches the next
/// caller; the pool opens a fresh connection when needed. The one connection of a memory
/// database cannot be closed without losing the database: it is rolled back before its next
/// use instead (`rollback_on_acquire`).
pub(crate) struct Tx<'d> {
    db: &'d Db,
    connection: PoolConnection<Any>,
    /// Until COMMIT succeeded.
    open: bool,
}

impl Tx<'_> {
    pub(crate) async fn commit(mut self) -> Result<(), StoreError> {
        self.connection
            .execute("COMMIT")
            .await
            .map_err(|error| self.db.error(error))?;
        self.open = false;
        Ok(())
    }
}

impl Deref for Tx<'_> {
    type Target = AnyConnection;

    fn deref(&self) -> &AnyConnection {
        &self.connection
    }
}

impl DerefMut for Tx<'_> {
    fn deref_mut(&mut self) -> &mut AnyConnection {
        &mut self.connection
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        match &self.db.rollback_on_acquire {
            // Set before the connection goes back to the pool, so that no one uses it first.
            Some(flag) => flag.store(true, Ordering::Release),
            None => self.connection.close_on_drop(),
        }
    }
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
