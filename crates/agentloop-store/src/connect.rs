//! Opening a database from its URL, and bringing its schema up to date.

use std::collections::HashSet;
use std::time::Duration;

use agentloop_core::StoreError;
use sqlx::AnyConnection;
use sqlx::any::AnyPoolOptions;
use sqlx::migrate::{Migrate, Migrator};
use sqlx::{Connection, Executor};

use crate::config::unsupported_url_message;
use crate::db::Db;
use crate::dialect::Backend;
use crate::errors::from_migrate;

static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// busy_timeout comes first so that switching to WAL waits for a concurrent opener instead of
/// failing. WAL lets readers proceed while a run writes; NORMAL is durable enough under WAL (a
/// power cut may lose the last steps, never corrupt the file).
const SQLITE_PRAGMAS: &str = "PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON; \
    PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;";

/// A database URL, understood.
struct Target {
    backend: Backend,
    /// The URL handed to sqlx.
    url: String,
    /// Where the database is, for messages: the path, or the URL without its password.
    location: String,
    in_memory: bool,
}

impl Target {
    fn parse(url: &str) -> Result<Target, StoreError> {
        match Backend::of_url(url) {
            Some(Backend::Sqlite) => Ok(sqlite_target(url)),
            Some(Backend::Postgres) => Ok(Target {
                backend: Backend::Postgres,
                url: url.to_owned(),
                location: without_password(url),
                in_memory: false,
            }),
            None => Err(StoreError::Unavailable(unsupported_url_message(url))),
        }
    }

    fn cannot_connect(&self, error: &sqlx::Error) -> StoreError {
        let location = &self.location;
        StoreError::Unavailable(match self.backend {
            Backend::Sqlite => format!(
                "cannot open the SQLite database at {location}: {error}; check that its directory \
                 exists and is writable, or set store.url (or DATABASE_URL)"
            ),
            Backend::Postgres => format!(
                "cannot connect to the PostgreSQL database at {location}: {error}; check that the \
                 server is running and accepts this user and database, or set store.url (or \
                 DATABASE_URL)"
            ),
        })
    }
}

fn sqlite_target(url: &str) -> Target {
    let rest = url.get("sqlite:".len()..).unwrap_or_default();
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, params) = rest.split_once('?').unwrap_or((rest, ""));
    let in_memory = path == ":memory:" || params.split('&').any(|param| param == "mode=memory");
    let has_mode = params.split('&').any(|param| param.starts_with("mode="));
    // sqlx opens an existing file only, unless told it may create it.
    let url = match (in_memory || has_mode, params.is_empty()) {
        (true, _) => url.to_owned(),
        (false, true) => format!("{url}?mode=rwc"),
        (false, false) => format!("{url}&mode=rwc"),
    };
    Target {
        backend: Backend::Sqlite,
        url,
        location: if in_memory {
            "sqlite::memory:".into()
        } else {
            path.to_owned()
        },
        in_memory,
    }
}

fn without_password(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) => {
            if parsed.password().is_some() {
                let _ = parsed.set_password(Some("***"));
            }
            parsed.to_string()
        }
        // Unparseable: show the host part only, never what may be credentials.
        Err(_) => url
            .rsplit_once('@')
            .map_or_else(|| url.to_owned(), |(_, host)| format!("…@{host}")),
    }
}

/// Connects a pool to `url`, without touching the schema.
pub(crate) async fn open(url: &str) -> Result<Db, StoreError> {
    // Idempotent: sqlx guards it with a Once of its own.
    sqlx::any::install_default_drivers();
    let target = Target::parse(url)?;
    probe(&target).await?;
    let pool = pool_options(&target)
        .connect(&target.url)
        .await
        .map_err(|error| target.cannot_connect(&error))?;
    Ok(Db {
        pool,
        backend: target.backend,
        location: target.location,
    })
}

/// A pool retries a refused connection until its acquire timeout, then reports only that it
/// timed out; one direct attempt reports the cause at once.
async fn probe(target: &Target) -> Result<(), StoreError> {
    if target.in_memory {
        return Ok(());
    }
    let connection = AnyConnection::connect(&target.url)
        .await
        .map_err(|error| target.cannot_connect(&error))?;
    if let Err(error) = connection.close().await {
        tracing::debug!(%error, "closing the probe connection failed");
    }
    Ok(())
}

fn pool_options(target: &Target) -> AnyPoolOptions {
    let options = AnyPoolOptions::new().acquire_timeout(Duration::from_secs(30));
    match (target.backend, target.in_memory) {
        // Every connection to `sqlite::memory:` opens a database of its own, and the database
        // vanishes with its last connection: keep exactly one, for ever.
        (Backend::Sqlite, true) => options
            .max_connections(1)
            .min_connections(1)
            .idle_timeout(None)
            .max_lifetime(None)
            .after_connect(|connection, _| Box::pin(sqlite_pragmas(connection))),
        // SQLite has one writer at a time anyway; a few connections let reads overlap a write.
        (Backend::Sqlite, false) => options
            .max_connections(4)
            .after_connect(|connection, _| Box::pin(sqlite_pragmas(connection))),
        (Backend::Postgres, _) => options.max_connections(10),
    }
}

async fn sqlite_pragmas(connection: &mut AnyConnection) -> Result<(), sqlx::Error> {
    connection.execute(SQLITE_PRAGMAS).await.map(drop)
}

/// Applies the migrations the database lacks; returns them as `"<version> <description>"`.
pub(crate) async fn apply_migrations(db: &Db) -> Result<Vec<String>, StoreError> {
    let migrator = match db.backend {
        Backend::Sqlite => &SQLITE_MIGRATIONS,
        Backend::Postgres => &POSTGRES_MIGRATIONS,
    };
    let mut connection = db.pool.acquire().await.map_err(|error| db.error(error))?;
    let applied = migrate_locked(migrator, &mut connection)
        .await
        .map_err(|error| from_migrate(&error, &db.location));
    if applied.is_err() {
        // It may still hold PostgreSQL's advisory migration lock, which would block every
        // later migration if the connection went back to the pool.
        connection.close_on_drop();
    }
    applied
}

async fn migrate_locked(
    migrator: &Migrator,
    connection: &mut AnyConnection,
) -> Result<Vec<String>, sqlx::migrate::MigrateError> {
    // Locked around the listing too, so that two processes starting on an empty database do
    // not both create the migrations table. The lock is reentrant; `run` takes it again.
    connection.lock().await?;
    connection.ensure_migrations_table(MIGRATIONS_TABLE).await?;
    let before: HashSet<i64> = connection
        .list_applied_migrations(MIGRATIONS_TABLE)
        .await?
        .into_iter()
        .map(|migration| migration.version)
        .collect();
    migrator.run(&mut *connection).await?;
    connection.unlock().await?;
    Ok(migrator
        .iter()
        .filter(|migration| !migration.migration_type.is_down_migration())
        .filter(|migration| !before.contains(&migration.version))
        .map(|migration| format!("{} {}", migration.version, migration.description))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_files_are_created_when_missing() {
        let target = sqlite_target("sqlite://data/agentloop.db");
        assert_eq!(target.url, "sqlite://data/agentloop.db?mode=rwc");
        assert_eq!(target.location, "data/agentloop.db");
        assert!(!target.in_memory);
        let target = sqlite_target("sqlite:x.db?cache=shared");
        assert_eq!(target.url, "sqlite:x.db?cache=shared&mode=rwc");
    }

    #[test]
    fn an_explicit_sqlite_mode_is_kept() {
        let target = sqlite_target("sqlite:///var/lib/a.db?mode=ro");
        assert_eq!(target.url, "sqlite:///var/lib/a.db?mode=ro");
        assert_eq!(target.location, "/var/lib/a.db");
    }

    #[test]
    fn memory_databases_are_recognised() {
        assert!(sqlite_target("sqlite::memory:").in_memory);
        assert!(sqlite_target("sqlite://?mode=memory").in_memory);
        assert_eq!(sqlite_target("sqlite::memory:").url, "sqlite::memory:");
    }

    #[test]
    fn passwords_never_reach_messages() {
        let shown = without_password("postgres://agent:s3cret@db.internal:5432/agentloop");
        assert_eq!(shown, "postgres://agent:***@db.internal:5432/agentloop");
        assert_eq!(
            without_password("postgres://agent@db/agentloop"),
            "postgres://agent@db/agentloop"
        );
        assert!(!without_password("postgres://a:s3cret@[bad/x").contains("s3cret"));
    }
}
