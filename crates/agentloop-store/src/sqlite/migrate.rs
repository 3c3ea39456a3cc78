//! The schema migrations of a SQLite store, applied on its rusqlite connection.
//!
//! The migrations are sqlx's (`sqlx::migrate!` embeds them, PostgreSQL's are applied by sqlx
//! itself), and so is the bookkeeping: the `_sqlx_migrations` table, its columns and checksums,
//! so that a database migrated by an earlier agentloop (which used sqlx for SQLite too) is
//! recognised as it is. Like sqlx: a migration whose row says it failed stops everything
//! (dirty), an applied migration this build does not know means a newer agentloop, and one
//! whose checksum differs means another release's schema.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use agentloop_core::StoreError;
use rusqlite::{Connection, params};
use sqlx::migrate::{MigrateError, Migrator};

use crate::errors::{from_migrate, from_sqlite};

/// Why the migrations could not be applied.
#[derive(Debug)]
pub(crate) enum Failure {
    /// The recorded migrations do not fit this build's (sqlx's own verdicts).
    Refused(MigrateError),
    /// A statement failed.
    Sqlite(rusqlite::Error),
}

impl From<rusqlite::Error> for Failure {
    fn from(error: rusqlite::Error) -> Self {
        Failure::Sqlite(error)
    }
}

impl Failure {
    pub(crate) fn into_store_error(self, location: &str) -> StoreError {
        match self {
            Failure::Refused(error) => from_migrate(error, location),
            Failure::Sqlite(error) => match from_sqlite(error, location) {
                StoreError::Query { message, source } => StoreError::Query {
                    message: format!(
                        "cannot set up the schema of the database at {location}: {message}"
                    ),
                    source,
                },
                other => other,
            },
        }
    }
}

/// Applies what the database lacks, each migration in a transaction of its own with its row;
/// returns them as `"<version> <description>"`.
pub(crate) fn run(
    connection: &Connection,
    migrator: &Migrator,
    table: &str,
) -> Result<Vec<String>, Failure> {
    // The write lock is taken by the first transaction, so two processes opening an empty
    // database at once do not both create the table.
    let applied = super::transaction(connection, || {
        connection.execute_batch(&format!(
            "CREATE TABLE IF NOT EXISTS {table} (\
                 version BIGINT PRIMARY KEY, \
                 description TEXT NOT NULL, \
                 installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP, \
                 success BOOLEAN NOT NULL, \
                 checksum BLOB NOT NULL, \
                 execution_time BIGINT NOT NULL)"
        ))?;
        let mut statement =
            connection.prepare(&format!("SELECT version, checksum, success FROM {table}"))?;
        let rows = statement.query_map([], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Vec<u8>>(1)?,
                row.get::<_, bool>(2)?,
            ))
        })?;
        rows.collect::<Result<Vec<_>, _>>()
    })?;

    if let Some((version, ..)) = applied.iter().filter(|(.., success)| !success).min() {
        return Err(Failure::Refused(MigrateError::Dirty(*version)));
    }
    let known: HashMap<i64, &[u8]> = migrator
        .iter()
        .filter(|migration| !migration.migration_type.is_down_migration())
        .map(|migration| (migration.version, migration.checksum.as_ref()))
        .collect();
    for (version, checksum, _) in &applied {
        match known.get(version) {
            None => return Err(Failure::Refused(MigrateError::VersionMissing(*version))),
            Some(known) if *known != checksum.as_slice() => {
                return Err(Failure::Refused(MigrateError::VersionMismatch(*version)));
            }
            Some(_) => {}
        }
    }
    let done: HashSet<i64> = applied.iter().map(|(version, ..)| *version).collect();

    let mut now_applied = Vec::new();
    for migration in migrator.iter() {
        if migration.migration_type.is_down_migration() || done.contains(&migration.version) {
            continue;
        }
        let started = Instant::now();
        super::transaction(connection, || {
            connection.execute_batch(migration.sql.as_str())?;
            connection.execute(
                &format!(
                    "INSERT INTO {table} (version, description, success, checksum, \
                     execution_time) VALUES (?1, ?2, TRUE, ?3, ?4)"
                ),
                params![
                    migration.version,
                    migration.description.as_ref(),
                    migration.checksum.as_ref(),
                    i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX),
                ],
            )
        })?;
        now_applied.push(format!("{} {}", migration.version, migration.description));
    }
    Ok(now_applied)
}
