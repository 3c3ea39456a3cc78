//! SQLite through rusqlite, in the calling task.
//!
//! The store holds one connection per SQLite database, behind an async mutex; a statement, or
//! a whole transaction, runs on it synchronously, in the task that asked. SQLite answers one of
//! our statements in microseconds (WAL, `synchronous = NORMAL`: a commit writes to the WAL
//! without waiting for the disk), far less than handing each statement to a worker thread and
//! waking the task when it is done, which is what a run spent most of its CPU on with sqlx's
//! SQLite driver. SQLite takes one writer at a time anyway, so one connection costs no
//! concurrency on writes; reads wait for the write in progress (microseconds) instead of
//! running beside it. Prepared statements are cached per connection.
//!
//! Transactions that queue for the connection while one is open are committed together (see
//! `group_commit`). Database files are opened through the VFS of `wal_writes`, which hands each
//! commit to the WAL in one write (`?vfs=unix` in the URL opens them with SQLite's own).
//!
//! The cost: a statement that waits (another process holding the write lock, up to
//! `busy_timeout`; a disk that stalls) blocks its tokio worker thread while it waits.

pub(crate) mod group_commit;
pub(crate) mod migrate;
mod wal_writes;

use std::sync::{Arc, mpsc};
use std::time::Duration;

use rusqlite::types::ValueRef;
use rusqlite::{Connection, OpenFlags};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use self::group_commit::{Groups, Kept, Member, Waiting};
use crate::sql::{Cell, Fetch, Outcome, Param, Query, Row};

/// How long a statement waits for another process's write lock before it fails with
/// SQLITE_BUSY. WAL lets readers proceed while a run writes; NORMAL is durable enough under WAL
/// (a power cut may lose the last steps, never corrupt the file).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const PRAGMAS: &str =
    "PRAGMA foreign_keys = ON; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;";

/// A health check waits this long for another process's write lock, and answers within its
/// 2 s even then.
const PING_BUSY_TIMEOUT: Duration = Duration::from_millis(1500);

/// Statements kept prepared: every statement the store runs, with room for the multi-row
/// INSERTs of each size a step uses.
const PREPARED_STATEMENTS: usize = 256;

/// How often the checkpointer copies what the WAL gained back into the database file. Each
/// checkpoint syncs the WAL and the file (two `fsync`s) and copies each page written since the
/// last one once, however often it was written: every 200 ms, those were 4% of the server's CPU
/// for runs one after another, and a run that met one waited for it (p99 5 ms against 3 ms).
/// The WAL's size does not depend on it: under steady writes a passive checkpoint never
/// catches up with the writer, and the WAL is restarted by the writer's own checkpoint
/// (`WRITER_CHECKPOINT_PAGES`).
const CHECKPOINT_EVERY: Duration = Duration::from_secs(1);

/// With a checkpointer, the connection checkpoints by itself only past this many WAL pages
/// (64 MiB), should the checkpointer fall behind; SQLite's default is 1,000 pages.
const WRITER_CHECKPOINT_PAGES: u32 = 16_384;

/// The connection of a SQLite store; `None` once the store is closed.
pub(crate) struct Lite {
    connection: Mutex<Option<Connection>>,
    /// Boxed: the engine's other variant is a pool handle of a few words.
    groups: Box<Groups>,
    checkpointer: std::sync::Mutex<Option<Checkpointer>>,
}

impl Lite {
    /// `checkpointer`: see [`Checkpointer::start`]; none for a memory database. `location`
    /// names the database in errors.
    pub(crate) fn new(
        connection: Connection,
        checkpointer: Option<Checkpointer>,
        location: String,
    ) -> Self {
        if checkpointer.is_some()
            && let Err(error) = connection.execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = {WRITER_CHECKPOINT_PAGES}"
            ))
        {
            tracing::debug!(%error, "cannot raise wal_autocheckpoint");
        }
        Self {
            connection: Mutex::new(Some(connection)),
            groups: Box::new(Groups::new(location)),
            checkpointer: std::sync::Mutex::new(checkpointer),
        }
    }

    /// The connection, once no other task uses it, with no transaction open on it (a group
    /// left open is committed first); `None` when the store was closed. Nothing awaits while it
    /// is held: every statement runs synchronously.
    pub(crate) async fn lock(&self) -> Option<MappedMutexGuard<'_, Connection>> {
        let connection = MutexGuard::try_map(self.connection.lock().await, Option::as_mut).ok()?;
        self.groups.settle(&connection);
        Some(connection)
    }

    /// The connection for a transaction, which joins the group open on it or begins one (see
    /// `group_commit`); `Ok(None)` when the store was closed.
    pub(crate) async fn join(
        &self,
    ) -> Result<Option<(MappedMutexGuard<'_, Connection>, Member)>, agentloop_core::StoreError>
    {
        let mut queued = Queued {
            lite: self,
            waiting: Some(self.groups.wait()),
            got: false,
        };
        let connection = self.connection.lock().await;
        queued.got = true;
        drop(queued);
        let Ok(connection) = MutexGuard::try_map(connection, Option::as_mut) else {
            return Ok(None);
        };
        let member = self.groups.join(&connection)?;
        Ok(Some((connection, member)))
    }

    /// Keeps the work of a transaction begun by [`Lite::join`]: once this returns `Ok`, it is
    /// committed (with its group).
    pub(crate) async fn keep(
        &self,
        connection: MappedMutexGuard<'_, Connection>,
        member: &Member,
    ) -> Result<(), agentloop_core::StoreError> {
        match self.groups.keep(&connection, member) {
            Kept::Done(result) => result,
            Kept::HandedOn(group) => {
                drop(connection);
                // Those it was handed on to may have stopped waiting before it let go.
                self.settle_if_free();
                match tokio::time::timeout(GROUP_PATIENCE, self.groups.ended(group)).await {
                    Ok(outcome) => outcome,
                    // Should the group be left open after all, taking the connection ends it.
                    Err(_) => {
                        let again = self.lock().await;
                        drop(again);
                        self.groups.ended(group).await
                    }
                }
            }
        }
    }

    /// Commits a group left open when nobody waits to join it and the connection is free.
    fn settle_if_free(&self) {
        if !self.groups.nobody_waits() || !self.groups.is_open() {
            return;
        }
        if let Ok(connection) = self.connection.try_lock()
            && let Some(connection) = connection.as_ref()
        {
            self.groups.settle(connection);
        }
    }

    /// Transactions waiting for the connection to join a group.
    #[cfg(all(test, feature = "postgres"))] // for `store/tests.rs`, built with both backends
    pub(crate) fn waiting(&self) -> usize {
        self.groups.waiting()
    }

    /// How many groups were begun.
    #[cfg(all(test, feature = "postgres"))]
    pub(crate) fn groups_begun(&self) -> u64 {
        self.groups.begun()
    }

    /// Undoes the work of a transaction begun by [`Lite::join`] (the rest of its group goes on).
    pub(crate) fn abandon(&self, connection: &Connection, member: &Member) {
        self.groups.abandon(connection, member);
    }

    /// Closes the connection once the statement in progress is done (SQLite checkpoints the
    /// WAL into the file as its last connection closes); later calls fail. A group left open
    /// is committed first.
    pub(crate) async fn close(&self) {
        if let Ok(mut checkpointer) = self.checkpointer.lock() {
            checkpointer.take();
        }
        let mut connection = self.connection.lock().await;
        if let Some(open) = connection.as_ref() {
            self.groups.settle(open);
        }
        let (transactions, groups) = self.groups.counts();
        tracing::debug!(
            transactions,
            groups,
            "SQLite transactions and the groups they were committed in"
        );
        if let Some(connection) = connection.take()
            && let Err((_, error)) = connection.close()
        {
            tracing::warn!(%error, "closing the SQLite database failed");
        }
    }
}

/// A transaction waiting for the connection to join a group. Dropped before it got it (its task
/// cancelled), it may have been the one a group was handed on to: the group is committed if
/// nobody else waits and the connection is free.
struct Queued<'l> {
    lite: &'l Lite,
    waiting: Option<Waiting<'l>>,
    got: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        drop(self.waiting.take());
        if !self.got {
            self.lite.settle_if_free();
        }
    }
}

/// How long a transaction that handed its group on waits for the group's end before it takes
/// the connection to end it itself (a safety net: the group ends once nobody waits to join).
const GROUP_PATIENCE: Duration = Duration::from_secs(2);

/// A thread of its own, with a connection of its own, that copies the WAL back into the
/// database file every second (a PASSIVE checkpoint, which never blocks the writer). SQLite
/// otherwise checkpoints in the commit that takes the WAL past 1,000 pages: that commit, and the
/// run waiting on it, pays for copying 4 MiB and the fsyncs. Stopped when dropped.
pub(crate) struct Checkpointer {
    _stop: mpsc::Sender<()>,
}

impl Checkpointer {
    /// Starts checkpointing the database at `uri`; `None` when no thread could be started (the
    /// connection then checkpoints by itself, as SQLite does by default).
    pub(crate) fn start(uri: &str) -> Option<Checkpointer> {
        let (stop, stopped) = mpsc::channel::<()>();
        let target = Open::Uri(uri.to_owned());
        let started = std::thread::Builder::new()
            .name("agentloop-sqlite-checkpoint".into())
            .spawn(move || {
                let connection = match open(&target) {
                    Ok(connection) => connection,
                    Err(error) => {
                        tracing::warn!(%error, "the SQLite checkpointer cannot open the database");
                        return;
                    }
                };
                // Until the store drops its end of the channel.
                while let Err(mpsc::RecvTimeoutError::Timeout) =
                    stopped.recv_timeout(CHECKPOINT_EVERY)
                {
                    if let Err(error) = connection.execute_batch("PRAGMA wal_checkpoint(PASSIVE)") {
                        tracing::debug!(%error, "WAL checkpoint failed; the next one retries");
                    }
                }
            });
        match started {
            Ok(_) => Some(Checkpointer { _stop: stop }),
            Err(error) => {
                tracing::warn!(%error, "cannot start the SQLite checkpointer thread");
                None
            }
        }
    }
}

/// Where to open, as SQLite's own URI (`file:PATH?mode=rwc`), or the memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Open {
    Memory,
    Uri(String),
}

/// Opens a connection and sets it up: busy timeout, foreign keys, WAL.
pub(crate) fn open(target: &Open) -> rusqlite::Result<Connection> {
    let connection = match target {
        Open::Memory => Connection::open_in_memory()?,
        Open::Uri(uri) => {
            let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
                | OpenFlags::SQLITE_OPEN_CREATE
                | OpenFlags::SQLITE_OPEN_URI
                | OpenFlags::SQLITE_OPEN_NO_MUTEX;
            match wal_writes::vfs() {
                Some(vfs) => Connection::open_with_flags_and_vfs(uri, flags, vfs)?,
                None => Connection::open_with_flags(uri, flags)?,
            }
        }
    };
    // busy_timeout first, so that switching to WAL waits for a concurrent opener.
    connection.busy_timeout(BUSY_TIMEOUT)?;
    connection.execute_batch(PRAGMAS)?;
    connection.set_prepared_statement_cache_capacity(PREPARED_STATEMENTS);
    Ok(connection)
}

/// Runs one statement. The SQL is already in SQLite's dialect (`?N` placeholders).
pub(crate) fn run(
    connection: &Connection,
    query: &Query<'_>,
    fetch: Fetch,
) -> rusqlite::Result<Outcome> {
    let mut statement = connection.prepare_cached(&query.sql)?;
    for (index, param) in query.params.iter().enumerate() {
        let index = index + 1;
        match param {
            Param::Int(value) => statement.raw_bind_parameter(index, value)?,
            Param::Real(value) => statement.raw_bind_parameter(index, value)?,
            Param::Text(value) => statement.raw_bind_parameter(index, value.as_deref())?,
            Param::Blob(value) => statement.raw_bind_parameter(index, value.as_deref())?,
        }
    }
    let returns_rows = statement.column_count() > 0;
    if fetch == Fetch::Count && !returns_rows {
        return statement
            .raw_execute()
            .map(|count| Outcome::Count(count as u64));
    }
    let names: Arc<[String]> = statement
        .column_names()
        .into_iter()
        .map(str::to_owned)
        .collect();
    let limit = match fetch {
        Fetch::Rows(limit) => limit,
        Fetch::Count => None,
    };
    let mut rows = statement.raw_query();
    let mut out = Vec::new();
    while let Some(row) = rows.next()? {
        let cells = (0..names.len())
            .map(|index| row.get_ref(index).map(cell))
            .collect::<rusqlite::Result<Vec<_>>>()?;
        out.push(Row::new(names.clone(), cells));
        if limit.is_some_and(|limit| out.len() >= limit) {
            break;
        }
    }
    Ok(match fetch {
        Fetch::Count => Outcome::Count(out.len() as u64),
        Fetch::Rows(_) => Outcome::Rows(out),
    })
}

fn cell(value: ValueRef<'_>) -> Cell {
    match value {
        ValueRef::Null => Cell::Null,
        ValueRef::Integer(value) => Cell::Int(value),
        ValueRef::Real(value) => Cell::Real(value),
        ValueRef::Text(bytes) => match std::str::from_utf8(bytes) {
            Ok(text) => Cell::Text(text.to_owned()),
            // Not text the store wrote: reported as corrupt by the column that reads it.
            Err(_) => Cell::Blob(bytes.to_vec()),
        },
        ValueRef::Blob(bytes) => Cell::Blob(bytes.to_vec()),
    }
}

/// Begins a transaction that holds the write lock from its first statement: a deferred one
/// that read first could fail at once with SQLITE_BUSY when it upgrades while another process
/// writes. A transaction left open by a failure SQLite did not roll back itself is rolled back
/// first.
pub(crate) fn begin(connection: &Connection) -> rusqlite::Result<()> {
    if !connection.is_autocommit() {
        rollback(connection);
    }
    execute(connection, "BEGIN IMMEDIATE")
}

pub(crate) fn commit(connection: &Connection) -> rusqlite::Result<()> {
    execute(connection, "COMMIT")
}

/// A statement without parameters, prepared once per connection (`BEGIN`, `COMMIT` and their
/// kin run for every step: parsing each again was 1% of the server's CPU).
pub(crate) fn execute(connection: &Connection, sql: &str) -> rusqlite::Result<()> {
    connection.prepare_cached(sql)?.raw_execute().map(drop)
}

/// Runs `work` in a transaction of its own (see [`begin`]): committed when it succeeds, rolled
/// back when it or the commit fails.
pub(crate) fn transaction<T>(
    connection: &Connection,
    work: impl FnOnce() -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    begin(connection)?;
    let done = work().and_then(|value| commit(connection).map(|()| value));
    if done.is_err() {
        rollback(connection);
    }
    done
}

/// Rolls back what is open; SQLite may already have (a full disk, an I/O error).
pub(crate) fn rollback(connection: &Connection) {
    if connection.is_autocommit() {
        return;
    }
    if let Err(error) = execute(connection, "ROLLBACK") {
        tracing::debug!(%error, "rolling back an abandoned transaction");
    }
}

/// Whether the database takes a write: one that changes nothing, committed (the header's
/// user_version set to what it is). Only a write proves that the file still takes writes (not
/// read-only, not on a disk too full for the WAL to grow); it costs one page in the WAL.
pub(crate) fn ping(connection: &Connection) -> rusqlite::Result<()> {
    connection.busy_timeout(PING_BUSY_TIMEOUT)?;
    let written = transaction(connection, || {
        let version: i64 = connection.query_row("PRAGMA user_version", [], |row| row.get(0))?;
        connection.execute_batch(&format!("PRAGMA user_version = {version}"))
    });
    connection.busy_timeout(BUSY_TIMEOUT)?;
    written
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::primary_code;

    fn query(sql: &str) -> Query<'static> {
        Query::new(sql.to_owned())
    }

    #[test]
    fn statements_bind_by_number_and_read_back_every_kind() {
        let connection = open(&Open::Memory).unwrap();
        connection
            .execute_batch("CREATE TABLE t (a BIGINT, b TEXT, c DOUBLE PRECISION)")
            .unwrap();
        let insert = query("INSERT INTO t (a, b, c) VALUES (?2, ?1, ?3)")
            .bind("x")
            .bind(7_i64)
            .bind(Option::<f64>::None);
        let Outcome::Count(changed) = run(&connection, &insert, Fetch::Count).unwrap() else {
            panic!("an INSERT counts rows");
        };
        assert_eq!(changed, 1);
        let Outcome::Rows(rows) = run(
            &connection,
            &query("SELECT a, b, c FROM t"),
            Fetch::Rows(None),
        )
        .unwrap() else {
            panic!("a SELECT returns rows");
        };
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].get("a"), Some(&Cell::Int(7)));
        assert_eq!(rows[0].get("b"), Some(&Cell::Text("x".into())));
        assert_eq!(rows[0].get("c"), Some(&Cell::Null));
        assert_eq!(rows[0].get("d"), None);
    }

    #[test]
    fn a_transaction_dropped_open_is_rolled_back_before_the_next() {
        let connection = open(&Open::Memory).unwrap();
        connection
            .execute_batch("CREATE TABLE t (a BIGINT)")
            .unwrap();
        begin(&connection).unwrap();
        connection
            .execute_batch("INSERT INTO t VALUES (1)")
            .unwrap();
        // Never committed: the next transaction starts clean.
        begin(&connection).unwrap();
        commit(&connection).unwrap();
        let count: i64 = connection
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap();
        assert_eq!(count, 0);
    }

    #[test]
    fn the_checkpointer_copies_the_wal_into_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.db");
        let uri = format!("file:{}?mode=rwc", path.display());
        let connection = open(&Open::Uri(uri.clone())).unwrap();
        let lite = Lite::new(connection, Checkpointer::start(&uri), uri.clone());
        let size = || std::fs::metadata(&path).unwrap().len();
        let before = size();
        {
            let connection = lite.connection.try_lock().unwrap();
            let connection = connection.as_ref().unwrap();
            let pages: i64 = connection
                .query_row("PRAGMA wal_autocheckpoint", [], |row| row.get(0))
                .unwrap();
            assert_eq!(pages, i64::from(WRITER_CHECKPOINT_PAGES));
            connection
                .execute_batch(
                    "CREATE TABLE t (a TEXT); \
                     WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n \
                     WHERE i < 200) INSERT INTO t SELECT hex(randomblob(1000)) FROM n;",
                )
                .unwrap();
        }
        // Committed to the WAL only; the checkpointer copies it into the file.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while size() <= before + 200_000 {
            assert!(
                std::time::Instant::now() < deadline,
                "no checkpoint: {}",
                size()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    #[tokio::test(flavor = "current_thread")]
    async fn transactions_that_wait_for_the_connection_are_committed_with_the_open_one() {
        let (_dir, lite, reader) = grouped_store();
        let lite = Arc::new(lite);
        let count = || committed(&reader);

        let (connection, first) = lite.join().await.unwrap().unwrap();
        connection.execute("INSERT INTO t VALUES (0)", []).unwrap();
        let others: Vec<_> = (1..=3_i64)
            .map(|a| {
                let lite = lite.clone();
                tokio::spawn(async move {
                    let (connection, member) = lite.join().await.unwrap().unwrap();
                    connection
                        .execute("INSERT INTO t VALUES (?1)", [a])
                        .unwrap();
                    let group = member.group;
                    lite.keep(connection, &member).await.map(|()| group)
                })
            })
            .collect();
        while lite.groups.waiting() < 3 {
            tokio::task::yield_now().await;
        }
        let group = first.group;
        lite.keep(connection, &first).await.unwrap();
        assert_eq!(
            count(),
            4,
            "committed once the first transaction's commit returned"
        );
        for other in others {
            assert_eq!(
                other.await.unwrap().unwrap(),
                group,
                "one group for all four"
            );
        }
        // Nobody waits now: the next transaction commits at once, in a group of its own.
        let (connection, next) = lite.join().await.unwrap().unwrap();
        connection.execute("INSERT INTO t VALUES (4)", []).unwrap();
        assert_ne!(next.group, group);
        lite.keep(connection, &next).await.unwrap();
        assert_eq!(count(), 5);
    }

    /// A store with a table `t`, and a second connection that sees what was committed.
    fn grouped_store() -> (tempfile::TempDir, Lite, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("file:{}?mode=rwc", dir.path().join("g.db").display());
        let connection = open(&Open::Uri(uri.clone())).unwrap();
        connection
            .execute_batch("CREATE TABLE t (a BIGINT)")
            .unwrap();
        let lite = Lite::new(connection, None, uri.clone());
        (dir, lite, open(&Open::Uri(uri)).unwrap())
    }

    fn committed(reader: &Connection) -> i64 {
        reader
            .query_row("SELECT COUNT(*) FROM t", [], |row| row.get(0))
            .unwrap()
    }

    /// The group was handed on to a transaction that stopped waiting (its task cancelled)
    /// after the first let go of the connection: the one that stopped waiting commits it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_group_handed_on_to_a_transaction_that_went_away_is_committed_at_once() {
        let (_dir, lite, reader) = grouped_store();
        let (connection, first) = lite.join().await.unwrap().unwrap();
        connection.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let mut waiter = Box::pin(lite.join());
        assert!(waiter.as_mut().poll(&mut context).is_pending());
        assert_eq!(lite.groups.waiting(), 1);
        let Kept::HandedOn(group) = lite.groups.keep(&connection, &first) else {
            panic!("a transaction waits: the group is handed on");
        };
        drop(connection);
        assert_eq!(committed(&reader), 0);
        drop(waiter);
        assert_eq!(committed(&reader), 1);
        let mut ended = Box::pin(lite.groups.ended(group));
        assert!(matches!(
            ended.as_mut().poll(&mut context),
            std::task::Poll::Ready(Ok(()))
        ));
    }

    /// The same, when the waiter went away before the first let go of the connection: the first
    /// commits it once it let go (as `Lite::keep` does).
    #[tokio::test(flavor = "current_thread")]
    async fn a_group_handed_on_to_nobody_is_committed_by_the_one_that_let_go() {
        let (_dir, lite, reader) = grouped_store();
        let (connection, first) = lite.join().await.unwrap().unwrap();
        connection.execute("INSERT INTO t VALUES (1)", []).unwrap();
        let mut context = std::task::Context::from_waker(std::task::Waker::noop());
        let mut waiter = Box::pin(lite.join());
        assert!(waiter.as_mut().poll(&mut context).is_pending());
        let Kept::HandedOn(_) = lite.groups.keep(&connection, &first) else {
            panic!("handed on");
        };
        drop(waiter);
        assert_eq!(committed(&reader), 0, "the connection was still taken");
        drop(connection);
        lite.settle_if_free();
        assert_eq!(committed(&reader), 1);
    }

    #[test]
    fn failures_keep_sqlite_codes() {
        let connection = open(&Open::Memory).unwrap();
        connection
            .execute_batch("CREATE TABLE t (a BIGINT PRIMARY KEY)")
            .unwrap();
        connection
            .execute_batch("INSERT INTO t VALUES (1)")
            .unwrap();
        let error = connection
            .execute_batch("INSERT INTO t VALUES (1)")
            .unwrap_err();
        // SQLITE_CONSTRAINT
        assert_eq!(primary_code(&error), Some(19));
    }
}
