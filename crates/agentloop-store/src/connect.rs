//! Opening a database from its URL, and bringing its schema up to date.

#[cfg(feature = "postgres")]
use std::collections::HashSet;
use std::path::{Path, PathBuf};
#[cfg(feature = "postgres")]
use std::time::Duration;

use agentloop_core::StoreError;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use sqlx::migrate::Migrator;
#[cfg(feature = "postgres")]
use sqlx::{
    Connection, Executor, PgConnection, migrate::Migrate, postgres::PgPool, postgres::PgPoolOptions,
};

use crate::config::unsupported_url_message;
use crate::db::{Db, DbFile, Engine};
use crate::dialect::Backend;
#[cfg(feature = "postgres")]
use crate::errors::from_migrate;
#[cfg(feature = "postgres")]
use crate::postgres::ACQUIRE_TIMEOUT;
#[cfg(feature = "sqlite")]
use crate::sqlite::{self, Checkpointer, Lite, Open};

#[cfg(feature = "sqlite")]
static SQLITE_MIGRATIONS: Migrator = sqlx::migrate!("migrations/sqlite");
#[cfg(feature = "postgres")]
static POSTGRES_MIGRATIONS: Migrator = sqlx::migrate!("migrations/postgres");
#[cfg(any(feature = "sqlite", feature = "postgres"))]
const MIGRATIONS_TABLE: &str = "_sqlx_migrations";

/// How long opening a PostgreSQL connection at start may take: a host that accepts TCP but
/// never answers (a wrong port, a proxy with nothing behind it) would otherwise hang the start
/// for ever.
#[cfg(feature = "postgres")]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// PostgreSQL ends a statement running longer than this (lock waits included), so that one
/// stuck statement cannot hold a connection and its locks for ever. Our statements take
/// milliseconds; migrations run without it. A `statement_timeout` in the URL's `options` wins.
#[cfg(feature = "postgres")]
const POSTGRES_SESSION: &str = "SET statement_timeout = '15s'";

/// A database URL, understood.
struct Target {
    backend: Backend,
    /// PostgreSQL: the URL handed to sqlx. SQLite: what is opened, as SQLite's own URI.
    url: String,
    /// Where the database is, for messages: the path, or the URL without its password.
    location: String,
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    in_memory: bool,
    /// The file of a SQLite database (absolute).
    file: Option<PathBuf>,
}

/// What opening does when a SQLite file is not there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IfMissing {
    /// Create it (runs and servers: a first run in a new directory just works).
    Create,
    /// Fail instead (commands that only read: they must not leave an empty database behind).
    Fail,
}

impl Target {
    fn parse(url: &str, if_missing: IfMissing) -> Result<Target, StoreError> {
        match Backend::of_url(url) {
            Some(Backend::Sqlite) => Ok(sqlite_target(url, if_missing)),
            Some(Backend::Postgres) => Ok(Target {
                backend: Backend::Postgres,
                url: url.to_owned(),
                location: without_password(url),
                in_memory: false,
                file: None,
            }),
            None => Err(StoreError::unavailable(unsupported_url_message(url))),
        }
    }

    fn cannot_connect<E>(&self, error: E) -> StoreError
    where
        E: std::error::Error + Send + Sync + 'static,
    {
        let location = &self.location;
        let message = match self.backend {
            Backend::Sqlite => format!(
                "cannot open the SQLite database at {location}: {error}; check that its directory \
                 exists and is writable, or set store.url (or DATABASE_URL)"
            ),
            Backend::Postgres => format!(
                "cannot connect to the PostgreSQL database at {location}: {error}; check that the \
                 server is running and accepts this user and database, or set store.url (or \
                 DATABASE_URL)"
            ),
        };
        StoreError::unavailable(message).caused_by(error)
    }

    #[cfg(feature = "postgres")]
    fn no_answer(&self) -> StoreError {
        StoreError::unavailable(format!(
            "cannot connect to the PostgreSQL database at {}: no answer within {} s; check that \
             the host and port are those of a PostgreSQL server (not another service, or a \
             proxy or firewall that holds connections), or set store.url (or DATABASE_URL)",
            self.location,
            CONNECT_TIMEOUT.as_secs()
        ))
    }
}

fn sqlite_target(url: &str, if_missing: IfMissing) -> Target {
    let rest = url.get("sqlite:".len()..).unwrap_or_default();
    let rest = rest.strip_prefix("//").unwrap_or(rest);
    let (path, params) = rest.split_once('?').unwrap_or((rest, ""));
    let in_memory = path == ":memory:" || params.split('&').any(|param| param == "mode=memory");
    let has_mode = params.split('&').any(|param| param.starts_with("mode="));
    // `mode=rw` opens an existing file only, so that a file deleted between the check and the
    // opening is not created; `mode=rwc` may create it.
    let mode = match if_missing {
        IfMissing::Create => "mode=rwc",
        IfMissing::Fail => "mode=rw",
    };
    // SQLite's own URI keeps the path as written (percent escapes included, which SQLite
    // decodes) and the parameters, which are SQLite's.
    let url = match (in_memory || has_mode, params.is_empty()) {
        (true, true) => format!("file:{path}"),
        (true, false) => format!("file:{path}?{params}"),
        (false, true) => format!("file:{path}?{mode}"),
        (false, false) => format!("file:{path}?{params}&{mode}"),
    };
    let file = (!in_memory).then(|| {
        let path = PathBuf::from(percent_decoded(path));
        std::path::absolute(&path).unwrap_or(path)
    });
    Target {
        backend: Backend::Sqlite,
        url,
        location: if in_memory {
            "sqlite::memory:".into()
        } else {
            path.to_owned()
        },
        in_memory,
        file,
    }
}

/// The path SQLite opens: it percent-decodes the URL's path (`%3F` for a `?` in a file name).
/// Anything that does not decode is kept as written.
fn percent_decoded(path: &str) -> String {
    let bytes = path.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                decoded.push(byte);
                i += 3;
            }
            (byte, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8(decoded).unwrap_or_else(|_| path.to_owned())
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

/// Where the database at `url` is, for people: the absolute path of a SQLite file,
/// `sqlite::memory:`, or the PostgreSQL URL without its password.
pub(crate) fn describe(url: &str) -> Result<String, StoreError> {
    let target = Target::parse(url, IfMissing::Fail)?;
    Ok(match &target.file {
        Some(path) => path.display().to_string(),
        None => target.location,
    })
}

/// The SQLite file `url` names when no such file exists (the absolute path); `None` for a
/// file that exists, an in-memory database, PostgreSQL, or a URL that is not understood.
pub(crate) fn missing_file(url: &str) -> Option<PathBuf> {
    let target = Target::parse(url, IfMissing::Fail).ok()?;
    target.file.filter(|path| !path.exists())
}

/// Opens the database at `url`, without touching the schema.
pub(crate) async fn open(url: &str, if_missing: IfMissing) -> Result<Db, StoreError> {
    let target = Target::parse(url, if_missing)?;
    let existed = target.file.as_deref().map(Path::exists);
    let engine = match target.backend {
        #[cfg(feature = "sqlite")]
        Backend::Sqlite => {
            let open = if target.in_memory {
                Open::Memory
            } else {
                Open::Uri(target.url.clone())
            };
            let connection = sqlite::open(&open).map_err(|error| target.cannot_connect(error))?;
            let checkpointer = match &open {
                Open::Memory => None,
                // The checkpointer's connection never creates the file: its thread may open it
                // after the store was closed and the file deleted, and would leave an empty
                // database where the next start must see none.
                Open::Uri(_) => Checkpointer::start(&Target::parse(url, IfMissing::Fail)?.url),
            };
            Engine::Sqlite(Lite::new(connection, checkpointer, target.location.clone()))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres => {
            probe(&target).await?;
            let pool = postgres_pool(&target)
                .connect(&target.url)
                .await
                .map_err(|error| target.cannot_connect(error))?;
            Engine::Postgres(pool)
        }
        #[allow(unreachable_patterns)]
        unbuilt => return Err(not_built(unbuilt)),
    };
    let file = match &target.file {
        Some(path) => Some(DbFile::opened(path.clone()).map_err(|error| {
            StoreError::unavailable(format!(
                "cannot find the SQLite database {} just opened: {error}; check its directory",
                path.display()
            ))
            .caused_by(error)
        })?),
        None => None,
    };
    let created = matches!((&file, existed), (Some(_), Some(false)));
    if let (true, Some(file)) = (created, &file) {
        // A store that silently starts empty looks like lost sessions. Logged here for every
        // caller; `agentloop serve` also says it in its banner (`SqlStore::created_new_file`),
        // while a first `agentloop run` in a new directory stays quiet.
        tracing::info!(
            path = %file.path.display(),
            "created a new, empty SQLite store at {}: no database file was there; if sessions \
             were expected, the file was deleted or moved, or store.url (DATABASE_URL) points \
             to another place",
            file.path.display()
        );
    }
    let listen_url = (target.backend == Backend::Postgres).then(|| target.url.clone());
    Ok(Db {
        engine,
        listen_url,
        backend: target.backend,
        location: target.location,
        file,
        created,
    })
}

/// The error for a URL of a backend this build lacks: its cargo feature was off.
fn not_built(backend: Backend) -> StoreError {
    let name = backend.name();
    let built = match (cfg!(feature = "sqlite"), cfg!(feature = "postgres")) {
        (true, true) => "both",
        (true, false) => "SQLite only",
        (false, true) => "PostgreSQL only",
        (false, false) => "no SQL database",
    };
    StoreError::unavailable(format!(
        "{name}:// needs agentloop built with the `{name}` feature (this build serves {built}); \
         rebuild it with `--features {name}`, or set store.url (or DATABASE_URL) to a database \
         this build serves"
    ))
}

/// A pool retries a refused connection until its acquire timeout, then reports only that it
/// timed out; one direct attempt reports the cause at once.
#[cfg(feature = "postgres")]
async fn probe(target: &Target) -> Result<(), StoreError> {
    let connecting = PgConnection::connect(&target.url);
    let connection = match tokio::time::timeout(CONNECT_TIMEOUT, connecting).await {
        Ok(connected) => connected,
        Err(_) => return Err(target.no_answer()),
    }
    .map_err(|error| target.cannot_connect(error))?;
    if let Err(error) = connection.close().await {
        tracing::debug!(%error, "closing the probe connection failed");
    }
    Ok(())
}

#[cfg(feature = "postgres")]
fn postgres_pool(target: &Target) -> PgPoolOptions {
    let url_sets_its_own = target.url.contains("statement_timeout");
    PgPoolOptions::new()
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .max_connections(10)
        .after_connect(move |connection, _| {
            Box::pin(async move {
                if !url_sets_its_own {
                    connection.execute(POSTGRES_SESSION).await?;
                }
                Ok(())
            })
        })
}

/// Applies the migrations the database lacks; returns them as `"<version> <description>"`.
pub(crate) async fn apply_migrations(db: &Db) -> Result<Vec<String>, StoreError> {
    match &db.engine {
        #[cfg(feature = "sqlite")]
        Engine::Sqlite(lite) => {
            let connection = db.sqlite(lite).await?;
            crate::sqlite::migrate::run(&connection, &SQLITE_MIGRATIONS, MIGRATIONS_TABLE)
                .map_err(|error| error.into_store_error(&db.location))
        }
        #[cfg(feature = "postgres")]
        Engine::Postgres(pool) => apply_postgres_migrations(db, pool).await,
        #[cfg(not(any(feature = "sqlite", feature = "postgres")))]
        Engine::Unbuilt(never) => match *never {},
    }
}

#[cfg(feature = "postgres")]
async fn apply_postgres_migrations(db: &Db, pool: &PgPool) -> Result<Vec<String>, StoreError> {
    let mut connection = pool.acquire().await.map_err(|error| db.error(error))?;
    // A migration may rewrite a large table, or wait for another process's migration. The
    // connection is closed afterwards, taking this setting with it.
    connection
        .execute("SET statement_timeout = 0")
        .await
        .map_err(|error| db.error(error))?;
    connection.close_on_drop();
    migrate_locked(&POSTGRES_MIGRATIONS, &mut connection)
        .await
        .map_err(|error| from_migrate(error, &db.location))
}

#[cfg(feature = "postgres")]
async fn migrate_locked(
    migrator: &Migrator,
    connection: &mut PgConnection,
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
        let target = sqlite_target("sqlite://data/agentloop.db", IfMissing::Create);
        assert_eq!(target.url, "file:data/agentloop.db?mode=rwc");
        assert_eq!(target.location, "data/agentloop.db");
        assert!(!target.in_memory);
        let target = sqlite_target("sqlite:x.db?cache=shared", IfMissing::Create);
        assert_eq!(target.url, "file:x.db?cache=shared&mode=rwc");
    }

    #[test]
    fn readers_never_create_a_sqlite_file() {
        let target = sqlite_target("sqlite://data/agentloop.db", IfMissing::Fail);
        assert_eq!(target.url, "file:data/agentloop.db?mode=rw");
        let target = sqlite_target("sqlite:x.db?cache=shared", IfMissing::Fail);
        assert_eq!(target.url, "file:x.db?cache=shared&mode=rw");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.db");
        let url = format!("sqlite://{}", path.display());
        assert_eq!(missing_file(&url), Some(path.clone()));
        assert_eq!(describe(&url).unwrap(), path.display().to_string());
        std::fs::write(&path, b"").unwrap();
        assert_eq!(missing_file(&url), None);
        assert_eq!(missing_file("sqlite::memory:"), None);
        assert_eq!(missing_file("postgres://a@b/c"), None);
    }

    #[test]
    fn the_file_is_the_one_sqlite_opens() {
        let target = sqlite_target("sqlite://data/a%3Fb%20c.db?mode=rwc", IfMissing::Create);
        let file = target.file.unwrap();
        assert!(file.is_absolute(), "{file:?}");
        assert!(file.ends_with("data/a?b c.db"), "{file:?}");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("%zz%41"), "%zzA");
        assert_eq!(
            sqlite_target("sqlite::memory:", IfMissing::Create).file,
            None
        );
    }

    #[test]
    fn an_explicit_sqlite_mode_is_kept() {
        let target = sqlite_target("sqlite:///var/lib/a.db?mode=ro", IfMissing::Create);
        assert_eq!(target.url, "file:/var/lib/a.db?mode=ro");
        assert_eq!(target.location, "/var/lib/a.db");
    }

    #[test]
    fn memory_databases_are_recognised() {
        assert!(sqlite_target("sqlite::memory:", IfMissing::Create).in_memory);
        assert!(sqlite_target("sqlite://?mode=memory", IfMissing::Create).in_memory);
    }

    #[test]
    fn a_backend_not_built_is_refused_with_its_feature() {
        for (backend, scheme) in [(Backend::Sqlite, "sqlite"), (Backend::Postgres, "postgres")] {
            let message = not_built(backend).to_string();
            let expected = format!("{scheme}:// needs agentloop built with the `{scheme}` feature");
            assert!(message.contains(&expected), "{message}");
            assert!(
                message.contains(&format!("--features {scheme}")),
                "{message}"
            );
        }
    }

    /// Run by `cargo test -p agentloop-store --lib --no-default-features --features sqlite`.
    #[cfg(not(feature = "postgres"))]
    #[tokio::test]
    async fn a_postgres_url_needs_the_postgres_feature() {
        let error = open("postgres://agent@127.0.0.1/agentloop", IfMissing::Create)
            .await
            .err()
            .unwrap();
        assert!(matches!(error, StoreError::Unavailable { .. }), "{error}");
        let message = error.to_string();
        assert!(message.contains("postgres:// needs agentloop built with the `postgres` feature"));
    }

    /// Run by `cargo test -p agentloop-store --lib --no-default-features --features postgres`.
    #[cfg(not(feature = "sqlite"))]
    #[tokio::test]
    async fn a_sqlite_url_needs_the_sqlite_feature() {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("a.db").display());
        let message = open(&url, IfMissing::Create)
            .await
            .err()
            .unwrap()
            .to_string();
        assert!(message.contains("sqlite:// needs agentloop built with the `sqlite` feature"));
        assert!(!dir.path().join("a.db").exists(), "no file is left behind");
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
