//! A PostgreSQL schema of its own for each test, at `DATABASE_URL` (default
//! `postgres://postgres@127.0.0.1:5432/test`). PostgreSQL must be running: tests that need it
//! fail with a clear message, never skip.
#![allow(clippy::panic, clippy::expect_used)] // test support: failing loudly is the point

use std::time::{SystemTime, UNIX_EPOCH};

use sqlx::{AssertSqlSafe, Connection, PgConnection};
use tokio::sync::OnceCell;

pub const DEFAULT_DATABASE_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const SCHEMA_PREFIX: &str = "agentloop_test_";
/// Schemas of test runs that died before dropping theirs are removed after this long.
const LEFTOVER_AGE_SECS: u64 = 3600;

static SWEPT: OnceCell<()> = OnceCell::const_new();

/// The server the tests use.
pub fn database_url() -> String {
    std::env::var("DATABASE_URL").unwrap_or_else(|_| DEFAULT_DATABASE_URL.into())
}

/// A fresh schema; its URL points the store at it through the `search_path` option.
pub struct TestSchema {
    url: String,
    schema: String,
    admin: PgConnection,
}

impl TestSchema {
    /// A fresh schema; panics with what to do when PostgreSQL is not running.
    pub async fn create() -> TestSchema {
        match Self::try_create().await {
            Ok(schema) => schema,
            Err(message) => panic!("{message}"),
        }
    }

    /// A fresh schema, or why PostgreSQL cannot give one (for benchmarks that may skip it).
    pub async fn try_create() -> Result<TestSchema, String> {
        let base = database_url();
        let mut admin = PgConnection::connect(&base).await.map_err(|error| {
            format!(
                "PostgreSQL is not reachable at {base}: {error}. Start it (e.g. `pg_ctlcluster \
                 --skip-systemctl-redirect $(ls /etc/postgresql) main start`) or set DATABASE_URL"
            )
        })?;
        SWEPT.get_or_init(|| sweep_leftovers(&mut admin)).await;
        let random = uuid::Uuid::new_v4().simple().to_string();
        let schema = format!("{SCHEMA_PREFIX}{}_{}", unix_secs(), &random[..12]);
        execute(&mut admin, format!("CREATE SCHEMA {schema}")).await;
        Ok(TestSchema {
            url: with_search_path(&base, &schema),
            schema,
            admin,
        })
    }

    /// The database URL of this schema.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The schema's name.
    pub fn name(&self) -> &str {
        &self.schema
    }

    /// A connection to the database outside the schema, for checks of the test's own.
    pub fn admin(&mut self) -> &mut PgConnection {
        &mut self.admin
    }

    /// Drops the schema (a test that panics keeps it for inspection; it is swept later).
    pub async fn drop_schema(mut self) {
        let drop = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema);
        if let Err(error) = sqlx::query(AssertSqlSafe(drop))
            .execute(&mut self.admin)
            .await
        {
            eprintln!("could not drop the test schema {}: {error}", self.schema);
        }
        let _ = self.admin.close().await;
    }
}

/// `url` with the schema as its search path, through libpq's `options` parameter.
pub fn with_search_path(url: &str, schema: &str) -> String {
    let separator = if url.contains('?') { '&' } else { '?' };
    format!("{url}{separator}options=-c%20search_path%3D{schema}")
}

async fn execute(connection: &mut PgConnection, sql: String) {
    sqlx::query(AssertSqlSafe(sql.clone()))
        .execute(&mut *connection)
        .await
        .unwrap_or_else(|error| panic!("{sql}: {error}"));
}

/// Drops the schemas of earlier test runs that could not drop their own.
async fn sweep_leftovers(connection: &mut PgConnection) {
    let names: Vec<String> =
        sqlx::query_scalar("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE $1")
            .bind(format!("{SCHEMA_PREFIX}%"))
            .fetch_all(&mut *connection)
            .await
            .expect("list the test schemas");
    let cutoff = unix_secs().saturating_sub(LEFTOVER_AGE_SECS);
    for name in names {
        let created = name
            .strip_prefix(SCHEMA_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|secs| secs.parse::<u64>().ok());
        if created.is_some_and(|created| created < cutoff) {
            execute(connection, format!("DROP SCHEMA IF EXISTS {name} CASCADE")).await;
        }
    }
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|elapsed| elapsed.as_secs())
        .unwrap_or_default()
}
