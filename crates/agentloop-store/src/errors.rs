//! Turning sqlx's and rusqlite's errors into `StoreError`s that tell the user what to fix.
//!
//! `Unavailable` means "not now": the database cannot be reached, or cannot take a write for a
//! reason outside the statement (a full disk, an I/O error, a lock held elsewhere, a server
//! shutting down), so the same call may succeed later. `Query` is a statement the database
//! refuses, which would fail again.

use agentloop_core::StoreError;
#[cfg(feature = "postgres")]
use sqlx::error::DatabaseError;
use sqlx::migrate::MigrateError;

#[cfg(feature = "postgres")]
use crate::postgres::ACQUIRE_TIMEOUT;

#[cfg(feature = "postgres")]
const SET_THE_URL: &str = "or set store.url (or DATABASE_URL)";

/// The error of a statement, keeping sqlx's error as its cause.
#[cfg(feature = "postgres")]
pub(crate) fn from_sqlx(error: sqlx::Error, location: &str) -> StoreError {
    if let Some(advice) = unavailable_advice(&error) {
        let message = format!("the database at {location} is unavailable: {error}; {advice}");
        return StoreError::unavailable(message).caused_by(error);
    }
    match error {
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::corrupt(error.to_string()).caused_by(error)
        }
        sqlx::Error::Migrate(migrate) => from_migrate(*migrate, location),
        _ => StoreError::query(error.to_string()).caused_by(error),
    }
}

/// What to check when the database could not be reached, stopped answering, or cannot take a
/// write for now; `None` when the statement itself was refused.
#[cfg(feature = "postgres")]
fn unavailable_advice(error: &sqlx::Error) -> Option<String> {
    let reachable = format!("check that it is running and reachable, {SET_THE_URL}");
    match error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::Configuration(_)
        | sqlx::Error::WorkerCrashed => Some(reachable),
        sqlx::Error::PoolTimedOut => Some(format!(
            "no connection could be had within {} s (every one busy, or none could be opened); \
             {reachable}",
            ACQUIRE_TIMEOUT.as_secs()
        )),
        sqlx::Error::PoolClosed => Some("the store was closed (agentloop is stopping)".into()),
        sqlx::Error::Database(database) => database_advice(database.as_ref()).map(str::to_owned),
        _ => None,
    }
}

/// Whether `error` is the refusal of a session's row because a session of that id exists: a
/// session said to be new (`RunStart::session_is_new`) that another run made meanwhile, or one
/// two runs found missing and both inserted. The run then begins the general way, which finds
/// the session and its lock.
pub(crate) fn is_session_taken(error: &StoreError) -> bool {
    let StoreError::Query {
        source: Some(source),
        ..
    } = error
    else {
        return false;
    };
    let source: &(dyn std::error::Error + Send + Sync) = source.as_ref();
    #[cfg(feature = "postgres")]
    if let Some(sqlx::Error::Database(database)) = source.downcast_ref::<sqlx::Error>() {
        return database.is_unique_violation() && database.constraint() == Some("sessions_pkey");
    }
    #[cfg(feature = "sqlite")]
    if let Some(failure) = source.downcast_ref::<rusqlite::Error>() {
        // SQLITE_CONSTRAINT_PRIMARYKEY, SQLITE_CONSTRAINT_UNIQUE
        let unique = failure
            .sqlite_error()
            .is_some_and(|code| matches!(code.extended_code, 1555 | 2067));
        return unique && failure.to_string().contains("sessions.id");
    }
    false
}

/// SQLite's primary result code of a failed call (the low byte of the extended code).
#[cfg(feature = "sqlite")]
pub(crate) fn primary_code(error: &rusqlite::Error) -> Option<i32> {
    error
        .sqlite_error()
        .map(|failure| failure.extended_code & 0xff)
}

/// The error of a statement on a SQLite store (rusqlite), keeping it as the cause.
#[cfg(feature = "sqlite")]
pub(crate) fn from_sqlite(error: rusqlite::Error, location: &str) -> StoreError {
    if let Some(advice) = primary_code(&error).and_then(sqlite_advice) {
        let message = format!("the database at {location} is unavailable: {error}; {advice}");
        return StoreError::unavailable(message).caused_by(error);
    }
    match error {
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::Utf8Error(..)
        | rusqlite::Error::InvalidColumnType(..) => {
            StoreError::corrupt(error.to_string()).caused_by(error)
        }
        _ => StoreError::query(error.to_string()).caused_by(error),
    }
}

/// sqlx serves PostgreSQL only (SQLite's errors come from rusqlite: `from_sqlite`).
#[cfg(feature = "postgres")]
fn database_advice(error: &dyn DatabaseError) -> Option<&'static str> {
    let code = error.code()?;
    // PostgreSQL SQLSTATE classes: 08 connection exception, 53 insufficient resources (disk,
    // memory, connections), 57 operator intervention (shutdown, statement timeout), 58 system
    // error (I/O).
    match code.get(..2)? {
        "08" | "57" => Some("check that the server is running and reachable, and its log"),
        "53" | "58" => {
            Some("check the server's free disk space, memory and connection limit, and its log")
        }
        _ => None,
    }
}

/// What to check after a SQLite failure with this primary result code; `None` when the
/// statement itself was refused.
#[cfg(feature = "sqlite")]
fn sqlite_advice(primary: i32) -> Option<&'static str> {
    match primary {
        // SQLITE_BUSY, SQLITE_LOCKED
        5 | 6 => Some(
            "another connection or process held the database locked for too long; check \
                 for another agentloop (or a tool) using the same file",
        ),
        // SQLITE_READONLY
        8 => Some(
            "the file cannot be written; check its permissions and those of its directory, \
                 and that the file was not deleted or replaced",
        ),
        // SQLITE_IOERR, SQLITE_FULL, SQLITE_CANTOPEN
        10 | 13 | 14 => Some(
            "check free disk space, that the file and its directory are still there and \
                 writable, and the system log for disk errors",
        ),
        _ => None,
    }
}

pub(crate) fn from_migrate(error: MigrateError, location: &str) -> StoreError {
    let unavailable = match &error {
        MigrateError::VersionMissing(version) => format!(
            "the database at {location} has schema migration {version}, which this version of \
             agentloop does not know: a newer agentloop has used it; upgrade agentloop, or set \
             store.url (or DATABASE_URL) to another database"
        ),
        MigrateError::VersionMismatch(version) => format!(
            "schema migration {version} of the database at {location} differs from the one this \
             version of agentloop ships; use the agentloop release that created the database, or \
             set store.url (or DATABASE_URL) to another database"
        ),
        MigrateError::Dirty(version) => format!(
            "schema migration {version} of the database at {location} was left half applied; \
             repair the schema by hand and delete its row from _sqlx_migrations"
        ),
        MigrateError::Execute(_) | MigrateError::ExecuteMigration(..) => {
            return schema_statement_failed(error, location);
        }
        other => format!("cannot set up the schema of the database at {location}: {other}"),
    };
    StoreError::unavailable(unavailable).caused_by(error)
}

/// A statement of a migration failed: said as a failed schema set-up unless the database is
/// unavailable.
#[cfg(feature = "postgres")]
fn schema_statement_failed(error: MigrateError, location: &str) -> StoreError {
    let (MigrateError::Execute(inner) | MigrateError::ExecuteMigration(inner, _)) = error else {
        return StoreError::unavailable(format!(
            "cannot set up the schema of the database at {location}: {error}"
        ))
        .caused_by(error);
    };
    match from_sqlx(inner, location) {
        StoreError::Query { message, source } => StoreError::Query {
            message: format!("cannot set up the schema of the database at {location}: {message}"),
            source,
        },
        other => other,
    }
}

/// Without PostgreSQL, a migration's statement fails on SQLite only, through rusqlite, which
/// never gets here.
#[cfg(not(feature = "postgres"))]
fn schema_statement_failed(error: MigrateError, location: &str) -> StoreError {
    StoreError::query(format!(
        "cannot set up the schema of the database at {location}: {error}"
    ))
    .caused_by(error)
}
