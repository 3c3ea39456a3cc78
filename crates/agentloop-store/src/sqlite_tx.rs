//! Transactions on a SQLite store, and group commit: the steps of several runs saved while
//! others wait for the connection share one transaction and one COMMIT.
//!
//! Most of what a step costs SQLite is its COMMIT: writing every page the step changed to the
//! WAL (the run's row, the messages, the events, their indexes). Under load, many runs save a
//! step at the same moment, and their rows sit on the same pages (ids are time-ordered). So a
//! step that finds the steps' transaction open joins it, inside a savepoint of its own (its
//! failure undoes only its own work); when it is done and another task waits for the
//! connection, it leaves the transaction open for that task and waits its turn again; whoever
//! finds nobody waiting, or the group full, or its own group still open when its turn comes,
//! commits for everyone. Anything else that needs the connection commits the group first. A
//! step returns only once its group is committed: every step is still saved before its events
//! are emitted. Alone (one run at a time) a step is its own group, committed at once.

use std::collections::VecDeque;

use rusqlite::Connection;
use tokio::sync::MutexGuard;

use crate::sqlite::{self, Lite};

/// Steps in one group at most: a step waits for at most this many others.
const MAX_GROUP: usize = 64;

/// Failed groups remembered for their members (each member asks once, right after).
const FAILURES_KEPT: usize = 64;

/// What the store's mutex guards: the connection, and the steps' transaction when open.
pub(crate) struct Inner {
    /// `None` once the store is closed.
    pub(crate) connection: Option<Connection>,
    group: Option<Group>,
    next_epoch: u64,
    /// Every group up to this epoch has ended.
    ended: u64,
    /// Groups that ended without their COMMIT, and why.
    failures: VecDeque<(u64, String)>,
}

/// The steps' open transaction.
struct Group {
    epoch: u64,
    members: usize,
}

impl Inner {
    pub(crate) fn new(connection: Connection) -> Self {
        Self {
            connection: Some(connection),
            group: None,
            next_epoch: 1,
            ended: 0,
            failures: VecDeque::new(),
        }
    }

    #[cfg(test)]
    pub(crate) fn groups_opened(&self) -> u64 {
        self.next_epoch - 1
    }

    /// Commits the steps' transaction if one is open; its members learn how it went.
    pub(crate) fn commit_group(&mut self) {
        let Some(group) = self.group.take() else {
            return;
        };
        let committed = match &self.connection {
            Some(connection) => sqlite::commit(connection).map_err(|error| {
                sqlite::rollback(connection);
                format!(
                    "the commit of {} steps saved together failed: {error}",
                    group.members.max(1)
                )
            }),
            None => Err("the store was closed before the step was committed".to_string()),
        };
        self.end(group.epoch, committed.err());
    }

    fn end(&mut self, epoch: u64, failure: Option<String>) {
        self.ended = self.ended.max(epoch);
        if let Some(failure) = failure {
            if self.failures.len() == FAILURES_KEPT {
                self.failures.pop_front();
            }
            self.failures.push_back((epoch, failure));
        }
    }

    /// How the group `epoch` ended; `None` while it is open.
    fn outcome(&self, epoch: u64) -> Option<Result<(), String>> {
        if self.ended < epoch {
            return None;
        }
        Some(
            match self.failures.iter().find(|(failed, _)| *failed == epoch) {
                Some((_, failure)) => Err(failure.clone()),
                None => Ok(()),
            },
        )
    }
}

/// Why a transaction could not be committed.
#[derive(Debug)]
pub(crate) enum CommitError {
    Sqlite(rusqlite::Error),
    /// The group of steps this one was saved with failed, or the store closed.
    Group(String),
    Closed,
}

/// What a transaction is.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// On its own: BEGIN IMMEDIATE ... COMMIT, the steps' group committed before.
    Alone,
    /// A step that opened the steps' transaction: only its own work is in it while it runs.
    Opener { epoch: u64 },
    /// A step that joined it, inside a savepoint.
    Member { epoch: u64 },
}

/// A transaction on a SQLite store: see the module's header.
pub(crate) struct SqliteTx<'d> {
    lite: &'d Lite,
    /// Held until the transaction is done with the connection.
    inner: Option<MutexGuard<'d, Inner>>,
    kind: Kind,
    /// Until committed, or handed to the group.
    open: bool,
}

impl<'d> SqliteTx<'d> {
    /// A transaction of its own, after the steps' group is committed.
    pub(crate) async fn begin(lite: &'d Lite) -> Result<SqliteTx<'d>, CommitError> {
        let mut inner = lite.acquire().await;
        inner.commit_group();
        let connection = inner.connection.as_ref().ok_or(CommitError::Closed)?;
        sqlite::begin(connection).map_err(CommitError::Sqlite)?;
        Ok(SqliteTx {
            lite,
            inner: Some(inner),
            kind: Kind::Alone,
            open: true,
        })
    }

    /// A step's transaction: the steps' group, joined or opened.
    pub(crate) async fn begin_step(lite: &'d Lite) -> Result<SqliteTx<'d>, CommitError> {
        let mut inner = lite.acquire().await;
        let connection = inner.connection.as_ref().ok_or(CommitError::Closed)?;
        let kind = match &inner.group {
            Some(group) => {
                connection
                    .execute_batch("SAVEPOINT step")
                    .map_err(CommitError::Sqlite)?;
                Kind::Member { epoch: group.epoch }
            }
            None => {
                sqlite::begin(connection).map_err(CommitError::Sqlite)?;
                let epoch = inner.next_epoch;
                inner.next_epoch += 1;
                inner.group = Some(Group { epoch, members: 0 });
                Kind::Opener { epoch }
            }
        };
        Ok(SqliteTx {
            lite,
            inner: Some(inner),
            kind,
            open: true,
        })
    }

    /// The connection, while the transaction holds it.
    pub(crate) fn connection(&self) -> Result<&Connection, CommitError> {
        self.inner
            .as_ref()
            .and_then(|inner| inner.connection.as_ref())
            .ok_or(CommitError::Closed)
    }

    pub(crate) async fn commit(mut self) -> Result<(), CommitError> {
        let mut inner = self.inner.take().ok_or(CommitError::Closed)?;
        let epoch = match self.kind {
            Kind::Alone => {
                let connection = inner.connection.as_ref().ok_or(CommitError::Closed)?;
                let committed = sqlite::commit(connection).map_err(CommitError::Sqlite);
                if committed.is_err() {
                    sqlite::rollback(connection);
                }
                self.open = false;
                return committed;
            }
            Kind::Opener { epoch } => epoch,
            Kind::Member { epoch } => {
                let connection = inner.connection.as_ref().ok_or(CommitError::Closed)?;
                if let Err(error) = connection.execute_batch("RELEASE step") {
                    // Undone like a failed step; the caller learns why.
                    self.inner = Some(inner);
                    return Err(CommitError::Sqlite(error));
                }
                epoch
            }
        };
        // From here on the step is the group's: dropping this does not undo it.
        self.open = false;
        let full = inner.group.as_mut().is_some_and(|group| {
            group.members += 1;
            group.members >= MAX_GROUP
        });
        if full || !self.lite.contended() {
            inner.commit_group();
        } else {
            // Someone waits: they join, or commit for us. Our turn comes again after them.
            drop(inner);
            inner = self.lite.acquire().await;
            if inner.outcome(epoch).is_none() {
                inner.commit_group();
            }
        }
        match inner.outcome(epoch) {
            Some(Ok(())) => Ok(()),
            Some(Err(failure)) => Err(CommitError::Group(failure)),
            // Not reached: the group was committed above if it was still open.
            None => Err(CommitError::Group(
                "the step's group of steps was never committed".into(),
            )),
        }
    }
}

impl Drop for SqliteTx<'_> {
    /// Unfinished (an error returned early, a cancelled call): only this transaction's own work
    /// is undone.
    fn drop(&mut self) {
        if !self.open {
            return;
        }
        let Some(inner) = self.inner.as_mut() else {
            return;
        };
        let Some(connection) = inner.connection.as_ref() else {
            return;
        };
        match self.kind {
            Kind::Alone => sqlite::rollback(connection),
            Kind::Opener { epoch } => {
                // Nobody joined: the connection was held from BEGIN to here.
                sqlite::rollback(connection);
                inner.group = None;
                inner.end(epoch, None);
            }
            Kind::Member { epoch } => {
                let undone = if connection.is_autocommit() {
                    // SQLite rolled back the whole transaction (a full disk, an I/O error):
                    // the other steps in it are lost too.
                    Err("SQLite rolled back a transaction of several steps".to_string())
                } else {
                    connection
                        .execute_batch("ROLLBACK TO step; RELEASE step")
                        .map_err(|error| format!("cannot undo a failed step: {error}"))
                };
                if let Err(failure) = undone {
                    sqlite::rollback(connection);
                    inner.group = None;
                    inner.end(epoch, Some(failure));
                }
            }
        }
    }
}
