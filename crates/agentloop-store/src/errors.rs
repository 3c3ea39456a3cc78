//! Turning sqlx's errors into `StoreError`s that tell the user what to fix.

use agentloop_core::StoreError;
use sqlx::migrate::MigrateError;

pub(crate) fn from_sqlx(error: &sqlx::Error, location: &str) -> StoreError {
    match error {
        _ if is_unreachable(error) => StoreError::Unavailable(format!(
            "lost the database at {location}: {error}; check that it is running and reachable, \
             or set store.url (or DATABASE_URL)"
        )),
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(error.to_string())
        }
        sqlx::Error::Migrate(migrate) => from_migrate(migrate, location),
        _ => StoreError::Query(error.to_string()),
    }
}

/// The database could not be reached or stopped answering, as opposed to refusing a statement.
fn is_unreachable(error: &sqlx::Error) -> bool {
    matches!(
        error,
        sqlx::Error::Io(_)
            | sqlx::Error::Tls(_)
            | sqlx::Error::Configuration(_)
            | sqlx::Error::PoolTimedOut
            | sqlx::Error::PoolClosed
            | sqlx::Error::WorkerCrashed
    )
}

pub(crate) fn from_migrate(error: &MigrateError, location: &str) -> StoreError {
    match error {
        MigrateError::VersionMissing(version) => StoreError::Unavailable(format!(
            "the database at {location} has schema migration {version}, which this version of \
             agentloop does not know: a newer agentloop has used it; upgrade agentloop, or set \
             store.url (or DATABASE_URL) to another database"
        )),
        MigrateError::VersionMismatch(version) => StoreError::Unavailable(format!(
            "schema migration {version} of the database at {location} differs from the one this \
             version of agentloop ships; use the agentloop release that created the database, or \
             set store.url (or DATABASE_URL) to another database"
        )),
        MigrateError::Dirty(version) => StoreError::Unavailable(format!(
            "schema migration {version} of the database at {location} was left half applied; \
             repair the schema by hand and delete its row from _sqlx_migrations"
        )),
        MigrateError::Execute(inner) | MigrateError::ExecuteMigration(inner, _) => {
            match from_sqlx(inner, location) {
                StoreError::Query(message) => StoreError::Query(format!(
                    "cannot set up the schema of the database at {location}: {message}"
                )),
                other => other,
            }
        }
        other => StoreError::Unavailable(format!(
            "cannot set up the schema of the database at {location}: {other}"
        )),
    }
}
