//! `SqlStore`: the `Store` and the `KeyStore` of agentloop on SQLite or PostgreSQL.

use std::fmt;
use std::time::Duration;

use agentloop_core::protocol::{Event, RunInfo, SessionInfo, SessionMessage, ToolExecutionRecord};
use agentloop_core::{
    ApiKeyInfo, KeyStore, NewApiKey, NewRun, NewSession, SessionLock, StepRecord, Store, StoreError,
};
use async_trait::async_trait;
use uuid::Uuid;

use crate::db::Db;
use crate::{connect, events, keys, locks, messages, records, runs, sessions, step};

/// Sessions, messages, runs, tool executions, events and API keys in a SQL database, through one
/// pool.
/// The same queries serve SQLite and PostgreSQL (see the portable schema in `migrations/`).
pub struct SqlStore {
    db: Db,
}

impl fmt::Debug for SqlStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SqlStore")
            .field("backend", &self.backend())
            .field("location", &self.db.location)
            .finish_non_exhaustive()
    }
}

impl SqlStore {
    /// Connects to `url` and brings its schema up to date.
    ///
    /// `sqlite://PATH` (relative to the working directory; the file is created when missing),
    /// `sqlite::memory:`, or `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (`postgresql://`
    /// too; `?options=-c%20search_path%3DSCHEMA` selects a schema).
    pub async fn connect(url: &str) -> Result<SqlStore, StoreError> {
        let db = connect::open(url).await?;
        for migration in connect::apply_migrations(&db).await? {
            tracing::info!(database = %db.location, %migration, "applied schema migration");
        }
        Ok(SqlStore { db })
    }

    /// Brings the schema of the database at `url` up to date and returns the migrations it
    /// applied now, as `"<version> <description>"` (empty when it was up to date).
    pub async fn migrate(url: &str) -> Result<Vec<String>, StoreError> {
        let db = connect::open(url).await?;
        let applied = connect::apply_migrations(&db).await;
        db.pool.close().await;
        applied
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.db.backend.name()
    }

    /// Checks that the database still answers, for health checks.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.db
            .query("SELECT 1")
            .execute(&self.db.pool)
            .await
            .map(drop)
            .map_err(|error| self.db.error(error))
    }

    /// Waits for the queries in flight and closes every connection.
    pub async fn close(&self) {
        self.db.pool.close().await;
    }
}

#[async_trait]
impl Store for SqlStore {
    async fn create_session(&self, session: &NewSession) -> Result<SessionInfo, StoreError> {
        sessions::create(&self.db, session).await
    }

    async fn session(&self, id: Uuid) -> Result<Option<SessionInfo>, StoreError> {
        sessions::get(&self.db, id).await
    }

    async fn list_sessions(
        &self,
        user_id: Option<&str>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        sessions::list(&self.db, user_id, limit).await
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        sessions::delete(&self.db, id).await
    }

    async fn messages(&self, session_id: Uuid) -> Result<Vec<SessionMessage>, StoreError> {
        messages::all(&self.db, session_id).await
    }

    async fn history(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        messages::history(&self.db, session_id, dialogue_messages).await
    }

    async fn lock_session(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<SessionLock, StoreError> {
        locks::lock(&self.db, session_id, run_id, lease).await
    }

    async fn renew_session_lock(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<(), StoreError> {
        locks::renew(&self.db, session_id, run_id, lease).await
    }

    async fn start_run(&self, run: &NewRun) -> Result<(), StoreError> {
        runs::start(&self.db, run).await
    }

    async fn save_step(&self, step: &StepRecord) -> Result<(), StoreError> {
        step::save(&self.db, step).await
    }

    async fn run(&self, id: Uuid) -> Result<Option<RunInfo>, StoreError> {
        runs::get(&self.db, id).await
    }

    async fn session_runs(&self, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError> {
        runs::of_session(&self.db, session_id).await
    }

    async fn tool_executions(&self, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError> {
        records::of_run(&self.db, run_id).await
    }

    async fn paused_run(&self, id: Uuid) -> Result<Option<serde_json::Value>, StoreError> {
        runs::paused(&self.db, id).await
    }

    async fn claim_paused_run(&self, id: Uuid) -> Result<bool, StoreError> {
        runs::claim_paused(&self.db, id).await
    }

    async fn events(&self, run_id: Uuid, after_seq: u64) -> Result<Vec<Event>, StoreError> {
        events::after(&self.db, run_id, after_seq).await
    }
}

#[async_trait]
impl KeyStore for SqlStore {
    async fn create_api_key(&self, user_id: &str) -> Result<NewApiKey, StoreError> {
        keys::create(&self.db, user_id).await
    }

    async fn authenticate(&self, secret: &str) -> Result<Option<String>, StoreError> {
        keys::authenticate(&self.db, secret).await
    }

    async fn revoke_api_key(&self, id_or_secret: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
        keys::revoke(&self.db, id_or_secret).await
    }

    async fn list_api_keys(&self, user_id: Option<&str>) -> Result<Vec<ApiKeyInfo>, StoreError> {
        keys::list(&self.db, user_id).await
    }
}
