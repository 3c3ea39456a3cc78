//! `SqlStore`: the `Store` and the `KeyStore` of agentloop on SQLite or PostgreSQL.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use agentloop_core::protocol::{Event, RunInfo, SessionInfo, SessionMessage, ToolExecutionRecord};
use agentloop_core::{
    ApiKeyInfo, Clock, Instance, KeyStore, NewApiKey, NewRun, NewSession, OAuthTokenStore,
    OrphanRun, PushDelivery, PushOutbox, PushTarget, RunBegin, RunStart, SavedRun, SessionCursor,
    SessionLock, StepRecord, Store, StoreError, SystemClock,
};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::FutureExt;
use uuid::Uuid;

use crate::Retention;
use crate::connect::IfMissing;
use crate::db::Db;
use crate::notices::Notices;
use crate::retention::{self, Pruned};
use crate::{
    attachments, begin, connect, durable, events, keys, locks, messages, oauth_tokens, push,
    records, runs, sessions, step,
};

/// A call the database does not answer at all (a network that drops packets without closing the
/// connection) fails after this long instead of hanging its run or request. PostgreSQL's own
/// statement timeout (15 s) reports first while the server still answers.
const CALL_TIMEOUT: Duration = Duration::from_secs(20);

/// A health check answers within this, healthy or not.
const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Sessions, messages, runs, tool executions, events and API keys in a SQL database, through one
/// pool.
/// The same queries serve SQLite and PostgreSQL (see the portable schema in `migrations/`).
///
/// Every call is bounded: waiting for a connection fails after 5 s, a call that gets no answer
/// after 20 s, and [`ping`](SqlStore::ping) after 2 s, each with an `Unavailable` error that
/// names the database. Free text holding U+0000 is stored exactly on both backends (see
/// `text.rs`).
pub struct SqlStore {
    db: Db,
    clock: Arc<dyn Clock>,
    notices: Arc<Notices>,
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
    /// `sqlite://PATH` (relative to the working directory; the file is created when missing,
    /// with a warning in the log naming it, since an empty store where sessions were expected
    /// means the file was lost or the URL is wrong), `sqlite::memory:`, or
    /// `postgres://USER:PASSWORD@HOST:PORT/DATABASE` (`postgresql://` too;
    /// `?options=-c%20search_path%3DSCHEMA` selects a schema). A PostgreSQL server that does not
    /// answer within 5 s fails the connection with a message saying what to check.
    pub async fn connect(url: &str) -> Result<SqlStore, StoreError> {
        Self::open(url, IfMissing::Create).await
    }

    /// Like [`connect`](SqlStore::connect), for commands that only read: a SQLite file that is
    /// not there is not created, and the answer is `Ok(None)` (its path is
    /// [`missing_file`](SqlStore::missing_file)). Any other database is opened as by `connect`,
    /// its schema brought up to date, so that its queries work.
    ///
    /// A listing run in the wrong directory, or with another `--config`, would otherwise leave
    /// an empty database behind and report "nothing yet" from it.
    pub async fn open_existing(url: &str) -> Result<Option<SqlStore>, StoreError> {
        if connect::missing_file(url).is_some() {
            return Ok(None);
        }
        Self::open(url, IfMissing::Fail).await.map(Some)
    }

    /// The SQLite file `url` names, as an absolute path, when that file does not exist; `None`
    /// otherwise (an existing file, `sqlite::memory:`, PostgreSQL).
    pub fn missing_file(url: &str) -> Option<std::path::PathBuf> {
        connect::missing_file(url)
    }

    /// Where the database at `url` is, for people: the absolute path of a SQLite file,
    /// `sqlite::memory:`, or the PostgreSQL URL with its password masked. Several stores are
    /// easy to mix up (another `--config`, another directory, `DATABASE_URL`); messages name
    /// the one in use with this.
    pub fn describe_url(url: &str) -> Result<String, StoreError> {
        connect::describe(url)
    }

    /// Where this store's database is: see [`describe_url`](SqlStore::describe_url).
    pub fn location(&self) -> String {
        match &self.db.file {
            Some(file) => file.path.display().to_string(),
            None => self.db.location.clone(),
        }
    }

    async fn open(url: &str, if_missing: IfMissing) -> Result<SqlStore, StoreError> {
        let db = connect::open(url, if_missing).await?;
        for migration in connect::apply_migrations(&db).await? {
            tracing::info!(database = %db.location, %migration, "applied schema migration");
        }
        let notices = Notices::new(db.listen_url.clone());
        Ok(SqlStore {
            db,
            clock: Arc::new(SystemClock),
            notices,
        })
    }

    /// The same store, keeping `clock`'s time instead of the system's: what it records and what
    /// it compares leases with. Tests of leases and ordering move a clock instead of sleeping.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> SqlStore {
        self.clock = clock;
        self
    }

    /// Brings the schema of the database at `url` up to date and returns the migrations it
    /// applied now, as `"<version> <description>"` (empty when it was up to date).
    pub async fn migrate(url: &str) -> Result<Vec<String>, StoreError> {
        let db = connect::open(url, IfMissing::Create).await?;
        let applied = connect::apply_migrations(&db).await;
        db.close().await;
        applied
    }

    /// Whether opening the store created its SQLite file (there was none): a server says so
    /// loudly, since an empty store where sessions were expected means a lost file or a wrong
    /// `store.url`.
    pub fn created_new_file(&self) -> bool {
        self.db.created
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend(&self) -> &'static str {
        self.db.backend.name()
    }

    /// Checks that the database still answers, within 2 s, for health checks: PostgreSQL runs
    /// `SELECT 1`; a SQLite file must still be the file the store opened (not deleted, not
    /// replaced) and must take a write (one that changes nothing). Cheap enough to call every
    /// few seconds; the error says what is wrong and what to check.
    pub async fn ping(&self) -> Result<(), StoreError> {
        self.bounded(PING_TIMEOUT, self.db.ping()).await
    }

    /// `call`, failed with `Unavailable` after `limit`. The call is dropped then: a transaction
    /// it had begun is rolled back with its connection (see `Tx`).
    /// `call`, failing `Unavailable` after `limit`. Made of combinators rather than an `async fn`,
    /// which would keep `call`'s state three times over (the argument, the timeout, the clock's
    /// scope): every step's save is boxed with it, at every run in flight.
    fn bounded<'s, T: 's>(
        &'s self,
        limit: Duration,
        call: impl Future<Output = Result<T, StoreError>> + 's,
    ) -> impl Future<Output = Result<T, StoreError>> + 's {
        let call =
            crate::columns::with_clock(self.clock.clone(), tokio::time::timeout(limit, call));
        call.map(move |result| match result {
            Ok(result) => result,
            Err(_) => Err(StoreError::unavailable(format!(
                "the database at {} did not answer within {} s; check that it is running and \
                 reachable, and not stalled (disk, locks), or set store.url (or DATABASE_URL)",
                self.db.location,
                limit.as_secs()
            ))),
        })
    }

    /// How many finished runs `rules` would prune now (`agentloop prune --dry-run`).
    pub async fn prunable(&self, rules: &Retention) -> Result<u64, StoreError> {
        self.bounded(CALL_TIMEOUT, async {
            retention::count(&self.db, rules, crate::columns::now()).await
        })
        .await
    }

    /// Prunes one batch of at most `rules.batch` finished runs, oldest first, in one short
    /// transaction: see `retention.rs` for what goes and what stays.
    pub async fn prune_batch(&self, rules: &Retention) -> Result<Pruned, StoreError> {
        self.bounded(CALL_TIMEOUT, async {
            retention::batch(&self.db, rules, crate::columns::now()).await
        })
        .await
    }

    /// Prunes batch after batch until no run is left to prune, letting other work run between
    /// batches; what was deleted, in all.
    pub async fn prune(&self, rules: &Retention) -> Result<Pruned, StoreError> {
        let mut pruned = Pruned::default();
        loop {
            let batch = self.prune_batch(rules).await?;
            pruned += batch;
            if batch.runs < u64::from(rules.batch) {
                return Ok(pruned);
            }
            tokio::task::yield_now().await;
        }
    }

    /// Waits for the queries in flight and closes every connection.
    pub async fn close(&self) {
        self.db.close().await;
    }
}

#[async_trait]
impl Store for SqlStore {
    async fn ping(&self) -> Result<(), StoreError> {
        SqlStore::ping(self).await
    }

    async fn create_session(&self, session: &NewSession) -> Result<SessionInfo, StoreError> {
        self.bounded(CALL_TIMEOUT, sessions::create(&self.db, session))
            .await
    }

    async fn session(&self, id: Uuid) -> Result<Option<SessionInfo>, StoreError> {
        self.bounded(CALL_TIMEOUT, sessions::get(&self.db, id))
            .await
    }

    async fn list_sessions_after(
        &self,
        user_id: Option<&str>,
        after: Option<SessionCursor>,
        limit: u32,
    ) -> Result<Vec<SessionInfo>, StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            sessions::list(&self.db, user_id, after, limit),
        )
        .await
    }

    async fn delete_session(&self, id: Uuid) -> Result<bool, StoreError> {
        self.bounded(CALL_TIMEOUT, sessions::delete(&self.db, id))
            .await
    }

    async fn messages(&self, session_id: Uuid) -> Result<Vec<SessionMessage>, StoreError> {
        self.bounded(CALL_TIMEOUT, messages::all(&self.db, session_id, false))
            .await
    }

    async fn messages_with_superseded(
        &self,
        session_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.bounded(CALL_TIMEOUT, messages::all(&self.db, session_id, true))
            .await
    }

    async fn supersede_messages(
        &self,
        session_id: Uuid,
        from_run: Option<Uuid>,
        by_run: Uuid,
    ) -> Result<u64, StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            messages::supersede(&self.db, &self.db, session_id, from_run, by_run),
        )
        .await
    }

    async fn message(
        &self,
        session_id: Uuid,
        id: Uuid,
    ) -> Result<Option<SessionMessage>, StoreError> {
        self.bounded(CALL_TIMEOUT, messages::one(&self.db, session_id, id))
            .await
    }

    async fn attachment(&self, sha256: &str) -> Result<Option<(String, Vec<u8>)>, StoreError> {
        self.bounded(CALL_TIMEOUT, attachments::one(&self.db, sha256))
            .await
    }

    async fn history(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.bounded(CALL_TIMEOUT, async {
            let mut history =
                messages::history(&self.db, &self.db, session_id, dialogue_messages, None).await?;
            attachments::fill(&self.db, &self.db, &mut history).await?;
            Ok(history)
        })
        .await
    }

    async fn history_before_run(
        &self,
        session_id: Uuid,
        dialogue_messages: usize,
        run_id: Uuid,
    ) -> Result<Vec<SessionMessage>, StoreError> {
        self.bounded(CALL_TIMEOUT, async {
            let mut history = messages::history(
                &self.db,
                &self.db,
                session_id,
                dialogue_messages,
                Some(run_id),
            )
            .await?;
            attachments::fill(&self.db, &self.db, &mut history).await?;
            Ok(history)
        })
        .await
    }

    async fn lock_session(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<SessionLock, StoreError> {
        let lock = async {
            let mut tx = self.db.begin().await?;
            let (session, run) = (session_id.to_string(), run_id.to_string());
            let lock = locks::take(&self.db, &mut tx, &session, &run, lease).await?;
            tx.commit().await?;
            Ok(lock)
        };
        self.bounded(CALL_TIMEOUT, lock).await
    }

    async fn renew_session_lock(
        &self,
        session_id: Uuid,
        run_id: Uuid,
        lease: Duration,
    ) -> Result<(), StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            locks::renew(&self.db, session_id, run_id, lease),
        )
        .await
    }

    async fn unlock_session(&self, session_id: Uuid, run_id: Uuid) -> Result<(), StoreError> {
        // One statement: no transaction around it (on PostgreSQL, `BEGIN` and `COMMIT` were
        // two more round trips).
        let unlock = async {
            let (session_id, run_id) = (session_id.to_string(), run_id.to_string());
            locks::release_query(&self.db, &session_id, &run_id)
                .execute(&self.db)
                .await
                .map(drop)
        };
        self.bounded(CALL_TIMEOUT, unlock).await
    }

    async fn start_run(&self, run: &NewRun) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, runs::start(&self.db, &self.db, run, None))
            .await
    }

    async fn begin_run(&self, start: &RunStart) -> Result<RunBegin, StoreError> {
        let begun = self
            .bounded(CALL_TIMEOUT, begin::begin(&self.db, start))
            .await?;
        if start.first_step.is_some() && matches!(begun, RunBegin::Begun { .. }) {
            self.notices.announce(start.run.id);
        }
        Ok(begun)
    }

    async fn save_step(&self, step: &StepRecord) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, step::save(&self.db, step))
            .await?;
        self.notices.announce(step.run_id);
        Ok(())
    }

    fn run_news(&self) -> Option<tokio::sync::broadcast::Receiver<Uuid>> {
        Some(self.notices.subscribe())
    }

    async fn run(&self, id: Uuid) -> Result<Option<RunInfo>, StoreError> {
        self.bounded(CALL_TIMEOUT, runs::get(&self.db, id)).await
    }

    async fn user_usage_since(
        &self,
        user_id: &str,
        since: chrono::DateTime<chrono::Utc>,
    ) -> Result<agentloop_core::protocol::Usage, StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            runs::user_usage_since(&self.db, user_id, since),
        )
        .await
    }

    async fn session_runs(&self, session_id: Uuid) -> Result<Vec<RunInfo>, StoreError> {
        self.bounded(CALL_TIMEOUT, runs::of_session(&self.db, session_id))
            .await
    }

    async fn tool_executions(&self, run_id: Uuid) -> Result<Vec<ToolExecutionRecord>, StoreError> {
        self.bounded(CALL_TIMEOUT, records::of_run(&self.db, run_id))
            .await
    }

    async fn tool_execution(
        &self,
        run_id: Uuid,
        call_id: &str,
    ) -> Result<Option<ToolExecutionRecord>, StoreError> {
        self.bounded(CALL_TIMEOUT, records::of_call(&self.db, run_id, call_id))
            .await
    }

    async fn saved_run(&self, id: Uuid) -> Result<Option<SavedRun>, StoreError> {
        self.bounded(CALL_TIMEOUT, durable::saved_run(&self.db, id))
            .await
    }

    async fn claim_paused_run(&self, id: Uuid, owner: Option<&str>) -> Result<bool, StoreError> {
        self.bounded(CALL_TIMEOUT, runs::claim_paused(&self.db, id, owner))
            .await
    }

    async fn register_instance(&self, instance: &Instance) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, durable::register(&self.db, instance))
            .await
    }

    async fn heartbeat(&self, instance_id: &str) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, durable::heartbeat(&self.db, instance_id))
            .await
    }

    async fn retire_instance(&self, instance_id: &str) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, durable::retire(&self.db, instance_id))
            .await
    }

    async fn orphaned_runs(
        &self,
        silent_for: Duration,
        limit: u32,
    ) -> Result<Vec<OrphanRun>, StoreError> {
        self.bounded(CALL_TIMEOUT, durable::orphaned(&self.db, silent_for, limit))
            .await
    }

    async fn adopt_run(
        &self,
        run_id: Uuid,
        to: &str,
        silent_for: Duration,
    ) -> Result<bool, StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            durable::adopt(&self.db, run_id, to, silent_for),
        )
        .await
    }

    async fn request_cancel(&self, run_id: Uuid) -> Result<bool, StoreError> {
        self.bounded(CALL_TIMEOUT, durable::request_cancel(&self.db, run_id))
            .await
    }

    async fn cancel_requests(&self, owner: &str) -> Result<Vec<Uuid>, StoreError> {
        self.bounded(CALL_TIMEOUT, durable::cancel_requests(&self.db, owner))
            .await
    }

    async fn events(&self, run_id: Uuid, after_seq: u64) -> Result<Vec<Event>, StoreError> {
        self.bounded(CALL_TIMEOUT, events::after(&self.db, run_id, after_seq))
            .await
    }
}

#[async_trait]
impl KeyStore for SqlStore {
    async fn create_api_key(&self, user_id: &str) -> Result<NewApiKey, StoreError> {
        self.bounded(CALL_TIMEOUT, keys::create(&self.db, user_id))
            .await
    }

    async fn authenticate(&self, secret: &str) -> Result<Option<String>, StoreError> {
        self.bounded(CALL_TIMEOUT, keys::authenticate(&self.db, secret))
            .await
    }

    async fn revoke_api_key(&self, id_or_secret: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
        self.bounded(CALL_TIMEOUT, keys::revoke(&self.db, id_or_secret))
            .await
    }

    async fn list_api_keys(&self, user_id: Option<&str>) -> Result<Vec<ApiKeyInfo>, StoreError> {
        self.bounded(CALL_TIMEOUT, keys::list(&self.db, user_id))
            .await
    }
}

#[async_trait]
impl OAuthTokenStore for SqlStore {
    async fn load_oauth_tokens(
        &self,
        server: &str,
        user: &str,
    ) -> Result<Option<String>, StoreError> {
        self.bounded(CALL_TIMEOUT, oauth_tokens::load(&self.db, server, user))
            .await
    }

    async fn save_oauth_tokens(
        &self,
        server: &str,
        user: &str,
        sealed: &str,
    ) -> Result<(), StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            oauth_tokens::save(&self.db, server, user, sealed),
        )
        .await
    }

    async fn delete_oauth_tokens(&self, server: &str, user: &str) -> Result<bool, StoreError> {
        self.bounded(CALL_TIMEOUT, oauth_tokens::delete(&self.db, server, user))
            .await
    }
}

#[async_trait]
impl PushOutbox for SqlStore {
    async fn put_push_target(&self, target: &PushTarget) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, push::put_target(&self.db, target))
            .await
    }

    async fn push_targets(&self, run_id: Uuid) -> Result<Vec<PushTarget>, StoreError> {
        self.bounded(CALL_TIMEOUT, push::targets(&self.db, run_id))
            .await
    }

    async fn delete_push_target(&self, run_id: Uuid, id: &str) -> Result<bool, StoreError> {
        self.bounded(CALL_TIMEOUT, push::delete_target(&self.db, run_id, id))
            .await
    }

    async fn open_push_targets(&self) -> Result<Vec<PushTarget>, StoreError> {
        self.bounded(CALL_TIMEOUT, push::open_targets(&self.db))
            .await
    }

    async fn queue_pushes(
        &self,
        run_id: Uuid,
        target_id: &str,
        pushes: &[(u64, String)],
        finished: bool,
    ) -> Result<(), StoreError> {
        self.bounded(
            CALL_TIMEOUT,
            push::queue(&self.db, run_id, target_id, pushes, finished),
        )
        .await
    }

    async fn claim_push(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<PushDelivery>, StoreError> {
        self.bounded(CALL_TIMEOUT, push::claim(&self.db, owner, now, until))
            .await
    }

    async fn push_sent(
        &self,
        delivery: &PushDelivery,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, push::sent(&self.db, delivery, at))
            .await
    }

    async fn push_failed(
        &self,
        delivery: &PushDelivery,
        retry_at: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError> {
        self.bounded(CALL_TIMEOUT, push::failed(&self.db, delivery, retry_at, at))
            .await
    }
}

// Both backends: the failures are provoked on each.
#[cfg(all(test, feature = "sqlite", feature = "postgres"))]
mod tests;
