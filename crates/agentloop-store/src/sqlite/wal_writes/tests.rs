use std::path::Path;

use rusqlite::Connection;

use super::wal_writes;
use crate::sqlite::{Open, open};

fn uri(path: &Path) -> Open {
    Open::Uri(format!("file:{}?mode=rwc", path.display()))
}

/// A store's connection on a new file, with a table of rows and two indexes (so that a commit
/// writes several pages), and no checkpoints but the ones a test asks for.
fn store(dir: &Path) -> Connection {
    let connection = open(&uri(&dir.join("db.sqlite"))).unwrap();
    connection
        .execute_batch(
            "PRAGMA wal_autocheckpoint = 0;
             CREATE TABLE rows (id INTEGER PRIMARY KEY, key TEXT UNIQUE, body TEXT);
             CREATE INDEX rows_by_body ON rows (body);",
        )
        .unwrap();
    connection
}

fn insert(connection: &Connection, from: usize, count: usize, size: usize) {
    let transaction = connection.unchecked_transaction().unwrap();
    for n in from..from + count {
        transaction
            .execute(
                "INSERT INTO rows (key, body) VALUES (?1, ?2)",
                (format!("key-{n:08}"), format!("{n:08}").repeat(size / 8)),
            )
            .unwrap();
    }
    transaction.commit().unwrap();
}

fn count(connection: &Connection) -> usize {
    let rows: i64 = connection
        .query_row("SELECT count(*) FROM rows", [], |row| row.get(0))
        .unwrap();
    usize::try_from(rows).unwrap()
}

fn integrity(connection: &Connection) -> String {
    connection
        .query_row("PRAGMA integrity_check", [], |row| row.get(0))
        .unwrap()
}

fn wal_size(dir: &Path) -> u64 {
    std::fs::metadata(dir.join("db.sqlite-wal")).unwrap().len()
}

#[test]
fn a_commit_of_many_pages_reaches_the_wal_in_one_write() {
    let dir = tempfile::tempdir().unwrap();
    let connection = store(dir.path());
    insert(&connection, 0, 10, 100);
    for round in 1..5 {
        let (writes, size) = (wal_writes(), wal_size(dir.path()));
        insert(&connection, round * 1_000, 40, 400);
        let frames = (wal_size(dir.path()) - size) / (24 + 4096);
        assert!(frames >= 4, "the commit wrote {frames} frames");
        // SQLite's own VFS writes each frame in two: 2 × frames.
        assert_eq!(wal_writes() - writes, 1, "{frames} frames");
    }
}

#[test]
fn a_commit_is_in_the_file_when_it_returns() {
    let dir = tempfile::tempdir().unwrap();
    let connection = store(dir.path());
    insert(&connection, 0, 100, 200);
    // Larger than what is kept in memory (1 MiB): handed on in parts before the commit.
    insert(&connection, 1_000, 600, 4_000);
    insert(&connection, 10_000, 3, 50);
    // What a crash leaves: the files as they are, the connection never closed.
    let copy = tempfile::tempdir().unwrap();
    for file in ["db.sqlite", "db.sqlite-wal"] {
        std::fs::copy(dir.path().join(file), copy.path().join(file)).unwrap();
    }
    let recovered = Connection::open(copy.path().join("db.sqlite")).unwrap();
    assert_eq!(count(&recovered), 703);
    assert_eq!(integrity(&recovered), "ok");
    drop(connection);
}

#[test]
fn another_connection_sees_each_commit_and_no_rolled_back_one() {
    let dir = tempfile::tempdir().unwrap();
    let writer = store(dir.path());
    // SQLite's own VFS, as another process would read.
    let reader = Connection::open(dir.path().join("db.sqlite")).unwrap();
    let mut expected = 0;
    for round in 0..20 {
        insert(&writer, round * 100, 5 + round, 300);
        expected += 5 + round;
        assert_eq!(count(&reader), expected);
    }
    // A transaction larger than SQLite's page cache spills pages to the WAL before it ends;
    // rolled back, none of it counts, and what follows reads and writes over it.
    writer.execute_batch("PRAGMA cache_size = 10").unwrap();
    let transaction = writer.unchecked_transaction().unwrap();
    for n in 0..500 {
        transaction
            .execute(
                "INSERT INTO rows (key, body) VALUES (?1, ?2)",
                (format!("gone-{n}"), "x".repeat(2_000)),
            )
            .unwrap();
    }
    assert_eq!(count(&transaction), expected + 500);
    transaction.rollback().unwrap();
    assert_eq!(count(&writer), expected);
    assert_eq!(count(&reader), expected);
    insert(&writer, 50_000, 300, 2_000);
    assert_eq!(count(&reader), expected + 300);
    assert_eq!(integrity(&reader), "ok");
}

#[test]
fn the_wal_is_checkpointed_truncated_and_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let writer = store(dir.path());
    let reader = Connection::open(dir.path().join("db.sqlite")).unwrap();
    insert(&writer, 0, 50, 500);
    let (busy, logged, checkpointed): (i64, i64, i64) = writer
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |row| {
            Ok((row.get(0)?, row.get(1)?, row.get(2)?))
        })
        .unwrap();
    assert_eq!((busy, logged, checkpointed), (0, 0, 0));
    assert_eq!(wal_size(dir.path()), 0);
    // The next commit starts the WAL again from its header.
    insert(&writer, 1_000, 50, 500);
    assert_eq!(count(&reader), 100);
    drop(writer);
    // The last connection's close checkpoints the WAL into the file.
    drop(reader);
    let reopened = Connection::open(dir.path().join("db.sqlite")).unwrap();
    assert_eq!(count(&reopened), 100);
}

#[test]
fn vfs_unix_in_the_url_opens_with_sqlites_own() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db.sqlite");
    let url = format!("file:{}?vfs=unix&mode=rwc", path.display());
    let connection = open(&Open::Uri(url)).unwrap();
    connection
        .execute_batch("CREATE TABLE rows (id INTEGER PRIMARY KEY, key TEXT UNIQUE, body TEXT)")
        .unwrap();
    let (writes, size) = (wal_writes(), wal_size(dir.path()));
    insert(&connection, 0, 40, 400);
    assert!(wal_size(dir.path()) > size);
    assert_eq!(wal_writes(), writes, "written through agentloop's VFS");
}
