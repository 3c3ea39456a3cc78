//! Group commit on SQLite: transactions that queue for the store's one connection while one is
//! open join it, and one `COMMIT` saves them all.
//!
//! A commit writes every page its transaction changed to the WAL (two `pwrite`s each) and
//! updates the WAL's index. Steps of different runs change mostly the same pages (the last leaf
//! of each table and of each index, the keys being time-ordered), so when many runs save steps
//! at once, one commit for many of them writes a fraction of the pages. A transaction that finds
//! nobody waiting for the connection commits at once, as without groups: one run at a time
//! sees no difference.
//!
//! How: the first transaction of a group begins it (`BEGIN IMMEDIATE`). When its work is done and
//! other transactions wait for the connection, it leaves the transaction open and lets go of the
//! connection; the next one joins with a `SAVEPOINT` of its own, so that its failure undoes its
//! own work only; the last one (nobody waiting, or the group full) commits for all, and the
//! members that handed the group on learn its end (a `watch` of the last group ended). Whoever
//! takes the connection without joining (a read, the store closing) first commits the group left
//! open; so does a transaction that stops waiting (its task cancelled) when it was the last one
//! waiting and the connection is free, and the member that handed the group on when nobody waits
//! by the time it let go of the connection. So a transaction's `commit` returns once its group is
//! committed, never before: nothing is reported saved that is not.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};

use agentloop_core::StoreError;
use rusqlite::Connection;
use tokio::sync::watch;

use super::{self as sqlite, execute};

/// The most transactions one commit takes: a bound on the transaction's size, and on how long
/// its first member waits.
const MOST_MEMBERS: usize = 64;

/// Failed groups kept for members that have not yet learned of it (members whose task was
/// cancelled never ask).
const FAILURES_KEPT: usize = 64;

/// The groups of one SQLite connection.
pub(crate) struct Groups {
    book: Mutex<Book>,
    /// Transactions waiting for the connection to join a group.
    waiting: AtomicUsize,
    /// The number of the last group that ended (committed or failed); groups end in order.
    ended: watch::Sender<u64>,
    /// The database, for the errors of a group's commit.
    location: String,
}

#[derive(Default)]
struct Book {
    open: Option<Open>,
    /// The number of the last group begun.
    begun: u64,
    /// Transactions that joined a group begun by another.
    joined: u64,
    failed: Vec<Failure>,
}

/// The group whose transaction is open on the connection.
struct Open {
    number: u64,
    members: usize,
    /// Members that handed the group on and will ask how it ended.
    awaiting: usize,
}

struct Failure {
    group: u64,
    error: StoreError,
    awaiting: usize,
}

/// A transaction's place in its group.
#[derive(Debug)]
pub(crate) struct Member {
    pub(crate) group: u64,
    /// It joined a group another began (it has a savepoint); the first member has none.
    joined: bool,
}

/// How a member's part ended.
pub(crate) enum Kept {
    /// The group was committed (or failed) in the member's own call.
    Done(Result<(), StoreError>),
    /// The group stays open for the transactions waiting: let go of the connection, then
    /// [`Groups::handed_on`], and wait for its end with [`Groups::ended`].
    HandedOn(u64),
}

/// Counts a transaction as waiting for the connection while it lives.
pub(crate) struct Waiting<'g>(&'g Groups);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Groups {
    pub(crate) fn new(location: String) -> Self {
        Self {
            book: Mutex::new(Book::default()),
            waiting: AtomicUsize::new(0),
            ended: watch::Sender::new(0),
            location,
        }
    }

    /// Marks a transaction waiting for the connection, until the guard is dropped.
    pub(crate) fn wait(&self) -> Waiting<'_> {
        self.waiting.fetch_add(1, Ordering::SeqCst);
        Waiting(self)
    }

    /// Whether nobody waits for the connection to join: a group handed on and let go of may
    /// then be left open, and whoever sees it takes the connection if it is free and settles.
    pub(crate) fn nobody_waits(&self) -> bool {
        self.waiting.load(Ordering::SeqCst) == 0
    }

    /// Whether a group is open.
    pub(crate) fn is_open(&self) -> bool {
        self.book().open.is_some()
    }

    /// Waits until group `group` ended, then how it ended.
    pub(crate) async fn ended(&self, group: u64) -> Result<(), StoreError> {
        let mut ended = self.ended.subscribe();
        // The sender lives as long as `self`.
        if ended.wait_for(|&last| last >= group).await.is_err() {
            return Err(self.ended_early());
        }
        self.outcome(group)
    }

    /// Transactions waiting for the connection now.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    /// How many groups were begun.
    #[cfg(all(test, feature = "postgres"))]
    pub(crate) fn begun(&self) -> u64 {
        self.book().begun
    }

    /// How many transactions there were, and how many groups (commits) they made.
    pub(crate) fn counts(&self) -> (u64, u64) {
        let book = self.book();
        (book.begun + book.joined, book.begun)
    }

    fn book(&self) -> MutexGuard<'_, Book> {
        // Nothing panics while the book is held; a poisoned one is still consistent.
        self.book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn error(&self, error: rusqlite::Error) -> StoreError {
        crate::errors::from_sqlite(error, &self.location)
    }

    /// Joins the group open on `connection`, or begins one.
    pub(crate) fn join(&self, connection: &Connection) -> Result<Member, StoreError> {
        let mut book = self.book();
        // A savepoint outside a transaction would begin one, and the lost group's members would
        // be told it was committed.
        self.lost(&mut book, connection);
        if let Some(open) = &mut book.open {
            execute(connection, "SAVEPOINT member").map_err(|error| self.error(error))?;
            open.members += 1;
            let group = open.number;
            book.joined += 1;
            return Ok(Member {
                group,
                joined: true,
            });
        }
        sqlite::begin(connection).map_err(|error| self.error(error))?;
        book.begun += 1;
        let number = book.begun;
        book.open = Some(Open {
            number,
            members: 1,
            awaiting: 0,
        });
        Ok(Member {
            group: number,
            joined: false,
        })
    }

    /// Keeps a member's work: hands the group on to a transaction waiting, or commits it.
    pub(crate) fn keep(&self, connection: &Connection, member: &Member) -> Kept {
        let mut book = self.book();
        if member.joined
            && let Err(error) = execute(connection, "RELEASE member")
        {
            let error = self.error(error);
            self.undo(&mut book, connection, member);
            self.go_on_without(&mut book, connection);
            return Kept::Done(Err(error));
        }
        if let Some(lost) = self.lost(&mut book, connection) {
            return Kept::Done(Err(lost));
        }
        let waiting = !self.nobody_waits();
        match &mut book.open {
            Some(open) if open.number == member.group => {
                if waiting && open.members < MOST_MEMBERS {
                    open.awaiting += 1;
                    return Kept::HandedOn(open.number);
                }
            }
            _ => return Kept::Done(Err(self.ended_early())),
        }
        Kept::Done(self.commit(&mut book, connection))
    }

    /// Undoes a member's work (it failed, or was dropped before it was kept); the rest of its
    /// group is handed on or committed.
    pub(crate) fn abandon(&self, connection: &Connection, member: &Member) {
        let mut book = self.book();
        self.undo(&mut book, connection, member);
        self.go_on_without(&mut book, connection);
    }

    /// After a member's work was undone: the rest of its group, if any, is left open for the
    /// transactions waiting, or committed.
    fn go_on_without(&self, book: &mut Book, connection: &Connection) {
        if self.lost(book, connection).is_some() {
            return;
        }
        let waiting = !self.nobody_waits();
        if let Some(open) = &book.open
            && !(waiting && open.members < MOST_MEMBERS)
            && let Err(error) = self.commit(book, connection)
        {
            tracing::debug!(%error, "committing the rest of a group failed");
        }
    }

    /// Commits the group left open, if any: the connection is wanted by someone who does not
    /// join it.
    pub(crate) fn settle(&self, connection: &Connection) {
        let mut book = self.book();
        if book.open.is_none() || self.lost(&mut book, connection).is_some() {
            return;
        }
        if let Err(error) = self.commit(&mut book, connection) {
            tracing::debug!(%error, "committing a group left open failed");
        }
    }

    /// How group `group`, which a member handed on, ended.
    fn outcome(&self, group: u64) -> Result<(), StoreError> {
        let mut book = self.book();
        if book.open.as_ref().is_some_and(|open| open.number == group) {
            return Err(self.ended_early());
        }
        let Some(index) = book.failed.iter().position(|failed| failed.group == group) else {
            return Ok(());
        };
        let failed = &mut book.failed[index];
        failed.awaiting -= 1;
        let error = failed.error.clone();
        if failed.awaiting == 0 {
            book.failed.remove(index);
        }
        Err(error)
    }

    /// Undoes `member`'s work: back to its savepoint, or the whole transaction when it began the
    /// group (nobody else is in it: the others join after its work is done).
    fn undo(&self, book: &mut Book, connection: &Connection, member: &Member) {
        if !member.joined {
            sqlite::rollback(connection);
            book.open = None;
            return;
        }
        if let Err(error) = execute(connection, "ROLLBACK TO member")
            .and_then(|()| execute(connection, "RELEASE member"))
        {
            tracing::debug!(%error, "undoing a member of a group");
        }
        if let Some(open) = &mut book.open {
            open.members -= 1;
        }
    }

    /// When SQLite rolled the group's transaction back by itself (a full disk, an I/O error in
    /// one member's statement), the group failed: its members learn it.
    fn lost(&self, book: &mut Book, connection: &Connection) -> Option<StoreError> {
        if book.open.is_none() || !connection.is_autocommit() {
            return None;
        }
        let error = StoreError::unavailable(format!(
            "the database at {} rolled back a transaction after an error in it (a full disk, an \
             I/O error): what it held was not saved; check the disk, then try again",
            self.location
        ));
        self.end(book, Err(error.clone()));
        Some(error)
    }

    fn commit(&self, book: &mut Book, connection: &Connection) -> Result<(), StoreError> {
        let result = sqlite::commit(connection).map_err(|error| self.error(error));
        if result.is_err() {
            sqlite::rollback(connection);
        }
        self.end(book, result.clone());
        result
    }

    /// Closes the open group with `result`, kept for its members that will ask, and tells them.
    fn end(&self, book: &mut Book, result: Result<(), StoreError>) {
        let Some(open) = book.open.take() else {
            return;
        };
        self.ended.send_replace(open.number);
        if let Err(error) = result
            && open.awaiting > 0
        {
            if book.failed.len() >= FAILURES_KEPT {
                book.failed.remove(0);
            }
            book.failed.push(Failure {
                group: open.number,
                error,
                awaiting: open.awaiting,
            });
        }
    }

    fn ended_early(&self) -> StoreError {
        StoreError::query(format!(
            "a transaction on the database at {} ended before its work was kept (a bug: please \
             report it)",
            self.location
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sqlite::{Open as Target, open};

    /// A file database with a table `t`, and a second connection that sees what was committed.
    fn database() -> (tempfile::TempDir, Connection, Connection) {
        let dir = tempfile::tempdir().unwrap();
        let uri = format!("file:{}?mode=rwc", dir.path().join("g.db").display());
        let writer = open(&Target::Uri(uri.clone())).unwrap();
        writer
            .execute_batch(
                "CREATE TABLE t (a BIGINT); CREATE TABLE p (id BIGINT PRIMARY KEY); \
                 CREATE TABLE c (p BIGINT REFERENCES p (id) DEFERRABLE INITIALLY DEFERRED);",
            )
            .unwrap();
        let reader = open(&Target::Uri(uri)).unwrap();
        (dir, writer, reader)
    }

    fn rows(reader: &Connection, table: &str) -> Vec<i64> {
        let column = if table == "t" { "a" } else { "*" };
        reader
            .prepare(&format!("SELECT {column} FROM {table} ORDER BY 1"))
            .unwrap()
            .query_map([], |row| row.get(0))
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap()
    }

    /// Begins a group whose first member does `work` and hands it on (a transaction waits when
    /// it is done); the group's number.
    fn handed_on(groups: &Groups, writer: &Connection, work: impl FnOnce(&Connection)) -> u64 {
        let first = groups.join(writer).unwrap();
        assert!(!first.joined);
        work(writer);
        let _another = groups.wait();
        let Kept::HandedOn(group) = groups.keep(writer, &first) else {
            panic!("a transaction waits: the group must be handed on");
        };
        group
    }

    fn insert(connection: &Connection, a: i64) {
        connection
            .execute("INSERT INTO t (a) VALUES (?1)", [a])
            .unwrap();
    }

    #[test]
    fn a_transaction_with_nobody_waiting_commits_at_once() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        let first = groups.join(&writer).unwrap();
        assert!(!first.joined);
        insert(&writer, 1);
        assert!(matches!(groups.keep(&writer, &first), Kept::Done(Ok(()))));
        assert_eq!(rows(&reader, "t"), [1]);
        assert!(writer.is_autocommit());
        let second = groups.join(&writer).unwrap();
        assert_ne!(second.group, first.group, "a new group after a commit");
    }

    #[test]
    fn a_group_handed_on_is_committed_by_its_last_member_for_all() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        let group = handed_on(&groups, &writer, |writer| insert(writer, 1));
        assert!(rows(&reader, "t").is_empty(), "nothing committed yet");
        let second = groups.join(&writer).unwrap();
        assert!(second.joined);
        assert_eq!(second.group, group);
        insert(&writer, 2);
        assert!(matches!(groups.keep(&writer, &second), Kept::Done(Ok(()))));
        assert_eq!(rows(&reader, "t"), [1, 2], "one commit for both");
        assert!(groups.outcome(group).is_ok());
        assert_eq!(groups.counts(), (2, 1), "two transactions, one group");
    }

    #[test]
    fn a_member_that_fails_undoes_only_its_own_work() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        let waiting = groups.wait();
        let first = groups.join(&writer).unwrap();
        insert(&writer, 1);
        let Kept::HandedOn(group) = groups.keep(&writer, &first) else {
            panic!("handed on");
        };
        let failing = groups.join(&writer).unwrap();
        insert(&writer, 2);
        // Someone still waits: the group stays open for them.
        groups.abandon(&writer, &failing);
        assert!(!writer.is_autocommit(), "the group goes on");
        drop(waiting);
        let last = groups.join(&writer).unwrap();
        insert(&writer, 3);
        assert!(matches!(groups.keep(&writer, &last), Kept::Done(Ok(()))));
        assert_eq!(rows(&reader, "t"), [1, 3]);
        assert!(groups.outcome(group).is_ok());
    }

    #[test]
    fn a_failing_member_with_nobody_waiting_commits_the_rest_of_its_group() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        let group = handed_on(&groups, &writer, |writer| insert(writer, 1));
        let failing = groups.join(&writer).unwrap();
        insert(&writer, 2);
        groups.abandon(&writer, &failing);
        assert_eq!(rows(&reader, "t"), [1]);
        assert!(writer.is_autocommit());
        assert!(groups.outcome(group).is_ok());
    }

    #[test]
    fn a_group_whose_commit_fails_fails_every_member_and_saves_nothing() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        // A reference checked at COMMIT only: the group's commit fails.
        let group = handed_on(&groups, &writer, |writer| {
            writer
                .execute_batch("INSERT INTO c (p) VALUES (99)")
                .unwrap();
        });
        let second = groups.join(&writer).unwrap();
        writer
            .execute_batch("INSERT INTO p (id) VALUES (1)")
            .unwrap();
        let Kept::Done(Err(error)) = groups.keep(&writer, &second) else {
            panic!("the commit must fail");
        };
        assert!(error.message().contains("FOREIGN KEY"), "{error}");
        assert_eq!(groups.outcome(group), Err(error));
        assert!(rows(&reader, "p").is_empty());
        assert!(rows(&reader, "c").is_empty());
        assert!(writer.is_autocommit(), "rolled back");
        // Asked once per member that handed on: the failure is not kept beyond.
        assert!(groups.book().failed.is_empty());
    }

    #[test]
    fn the_connection_taken_without_joining_commits_the_group_left_open() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        // The transaction that waited went away (its task cancelled): nobody joins.
        let group = handed_on(&groups, &writer, |writer| insert(writer, 1));
        assert!(rows(&reader, "t").is_empty());
        groups.settle(&writer);
        assert_eq!(rows(&reader, "t"), [1]);
        assert!(groups.outcome(group).is_ok());
    }

    #[test]
    fn a_group_rolled_back_behind_its_back_is_failed_not_joined() {
        let (_dir, writer, reader) = database();
        let groups = Groups::new("g.db".into());
        let group = handed_on(&groups, &writer, |writer| insert(writer, 1));
        // What SQLite does by itself after some errors.
        writer.execute_batch("ROLLBACK").unwrap();
        let next = groups.join(&writer).unwrap();
        assert!(!next.joined, "a new group, begun with BEGIN");
        assert_ne!(next.group, group);
        let lost = groups.outcome(group).unwrap_err();
        assert!(lost.message().contains("rolled back"), "{lost}");
        insert(&writer, 2);
        assert!(matches!(groups.keep(&writer, &next), Kept::Done(Ok(()))));
        assert_eq!(rows(&reader, "t"), [2]);
    }

    #[test]
    fn a_group_takes_at_most_its_number_of_members() {
        let (_dir, writer, _reader) = database();
        let groups = Groups::new("g.db".into());
        let _always = groups.wait();
        let mut handed_on = 0;
        let mut committed = 0;
        for a in 0..(MOST_MEMBERS as i64 * 2) {
            let member = groups.join(&writer).unwrap();
            insert(&writer, a);
            match groups.keep(&writer, &member) {
                Kept::HandedOn(_) => handed_on += 1,
                Kept::Done(result) => {
                    result.unwrap();
                    committed += 1;
                }
            }
        }
        assert_eq!(committed, 2);
        assert_eq!(handed_on, MOST_MEMBERS * 2 - 2);
    }
}
