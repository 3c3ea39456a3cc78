//! The store's test suite, written once and run against every backend: `tests/sqlite.rs` and
//! `tests/postgres.rs` each build a [`Fixture`] and expand [`suite_tests!`] with it.

#![allow(dead_code)] // each test binary uses its own part of the helpers

mod attachments;
mod begin;
mod data;
mod durable;
mod keys;
mod locks;
mod messages;
mod oauth_tokens;
mod outputs;
mod push;
mod regenerate;
mod retention;
mod runs;
mod schema;
mod sessions;
mod text;

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use agentloop_store::SqlStore;
use agentloop_test_support::clock::ManualClock;
use sqlx::any::AnyPoolOptions;
use sqlx::{Any, AnyPool, AssertSqlSafe, Row};

#[allow(unused_imports)] // the backend-specific tests of some binaries build data too
pub use attachments::*;
pub use begin::*;
pub use data::*;
pub use durable::*;
pub use keys::*;
pub use locks::*;
pub use messages::*;
pub use oauth_tokens::*;
pub use outputs::*;
pub use push::*;
pub use regenerate::*;
pub use retention::*;
pub use runs::*;
pub use schema::*;
pub use sessions::*;
pub use text::*;

/// One `#[tokio::test]` per suite function, each on a fresh database from `$fixture().await`
/// (`None` when the backend is missing: the test is skipped).
macro_rules! suite_tests {
    ($fixture:path) => {
        suite_tests!(@each $fixture;
            reports_its_backend,
            creates_and_reads_a_session,
            lists_sessions_newest_first_filtered_and_limited,
            pages_of_sessions_hold_every_session_once,
            counts_the_messages_of_a_session,
            a_session_is_updated_by_its_questions_and_the_end_of_its_runs,
            deletes_a_session_with_everything_it_owns,
            deleting_an_unknown_session_reports_false,
            messages_keep_their_order_and_every_field,
            one_message_is_read_by_its_id_in_its_session,
            history_starts_at_the_nth_last_dialogue_message,
            history_of_zero_or_of_an_unknown_session_is_empty,
            history_leaves_out_blocked_messages,
            a_session_lock_is_exclusive_until_released_or_expired,
            renewing_extends_only_the_holders_lease,
            a_session_without_a_row_is_always_acquired,
            the_last_step_releases_the_lock_of_its_run_only,
            a_step_that_ends_or_pauses_with_messages_moves_the_session_and_its_lock,
            unlocking_frees_the_session_of_its_holder_only,
            a_run_keeps_its_counters_status_and_outcome,
            runs_of_a_session_come_oldest_first,
            a_users_runs_since_a_time_add_up_their_tokens_and_cost,
            a_run_row_keeps_its_cost,
            push_targets_are_set_listed_replaced_and_deleted,
            a_push_is_queued_once_claimed_by_one_and_sent_in_order,
            tool_records_are_upserted_in_their_first_order,
            events_replay_after_a_seq_and_saving_twice_is_harmless,
            hundreds_of_events_in_one_step_are_all_stored,
            events_of_an_unknown_run_are_empty,
            a_run_that_does_not_save_the_chat_needs_no_session_row,
            a_step_of_an_unknown_run_is_not_found,
            a_failing_step_writes_nothing,
            a_paused_run_keeps_its_checkpoint_and_its_session_until_claimed,
            undecodable_rows_are_corrupt_errors,
            pruning_keeps_unfinished_runs_and_every_message,
            a_session_with_pruned_runs_is_still_deleted_whole,
            migrating_an_up_to_date_database_applies_nothing,
            a_schema_from_a_newer_agentloop_is_refused,
            an_api_key_authenticates_its_user,
            a_key_of_a_new_user_creates_the_user,
            the_secret_of_a_key_is_never_stored,
            wrong_malformed_and_revoked_keys_do_not_authenticate,
            a_key_is_revoked_by_id_or_by_itself_once,
            keys_are_listed_newest_first_and_filtered_by_user,
            two_keys_of_one_user_both_work,
            keys_survive_the_deletion_of_their_users_sessions,
            an_undecodable_key_row_is_a_corrupt_error,
            malformed_keys_are_refused_without_a_query,
            migrating_a_database_of_the_first_schema_adds_api_keys,
            any_text_round_trips_exactly,
            ordinary_text_is_stored_as_it_is,
            ping_answers_at_once_on_a_healthy_database,
            a_large_tool_output_is_stored_once,
            tool_outputs_read_back_exactly_as_written,
            a_run_without_chat_keeps_its_large_outputs,
            a_missing_tool_output_is_a_corrupt_error,
            exactly_one_instance_adopts_each_run_left_behind,
            a_retired_instance_leaves_its_runs_at_once_and_a_cli_keeps_its_own,
            a_cancel_request_reaches_the_owner_of_a_run_in_progress,
            a_run_keeps_its_trace_context,
            a_run_begins_with_a_new_session_taken_for_it,
            a_run_begins_on_its_session_with_its_history,
            a_run_refused_at_its_beginning_writes_nothing,
            a_run_that_cannot_be_recorded_leaves_its_session_free,
            a_run_begins_with_its_first_checkpoint,
            a_run_begins_with_its_first_step,
            a_run_without_chat_begins_with_its_first_step,
            a_first_step_replaces_the_checkpoint_of_the_beginning,
            a_run_for_an_existing_session_is_refused_whatever_its_first_step,
            a_regenerated_answer_supersedes_the_last_exchange,
            a_regenerated_answer_replaces_the_exchanges_from_the_run_named,
            a_regeneration_refused_at_its_beginning_supersedes_nothing,
            an_attachment_is_stored_once_and_read_back_for_the_model,
            oauth_records_are_kept_per_server_and_user,
        );
    };
    (@each $fixture:path; $($name:ident),* $(,)?) => {
        $(
            #[tokio::test]
            async fn $name() {
                // `None`: the backend is missing, and the fixture said so.
                let Some(fixture) = suite::MaybeFixture::get($fixture().await) else {
                    return;
                };
                suite::$name(&fixture).await;
                fixture.teardown().await;
            }
        )*
    };
}

/// What a backend's fixture gives: a [`Fixture`], or `None` when the backend is missing.
pub trait MaybeFixture {
    fn get(self) -> Option<Fixture>;
}

impl MaybeFixture for Fixture {
    fn get(self) -> Option<Fixture> {
        Some(self)
    }
}

impl MaybeFixture for Option<Fixture> {
    fn get(self) -> Option<Fixture> {
        self
    }
}

pub type Cleanup = Pin<Box<dyn Future<Output = ()> + Send>>;

/// A store on a database of its own, on a clock the test moves, and a second pool on the same
/// database for what the store's API cannot do: counting rows, planting corrupt ones.
pub struct Fixture {
    pub store: SqlStore,
    /// The store's time: tests of leases and ordering advance it instead of sleeping.
    pub clock: Arc<ManualClock>,
    pub url: String,
    pub backend: &'static str,
    raw: AnyPool,
    /// Awaited at the end of a passing test (a failing one leaves its database for inspection).
    cleanup: Option<Cleanup>,
    /// Kept alive as long as the store (a temporary directory).
    _guard: Box<dyn std::any::Any + Send + Sync>,
}

impl Fixture {
    pub async fn new(
        url: String,
        backend: &'static str,
        cleanup: Option<Cleanup>,
        guard: Box<dyn std::any::Any + Send + Sync>,
    ) -> Fixture {
        let clock = Arc::new(ManualClock::new());
        let store = SqlStore::connect(&url)
            .await
            .unwrap_or_else(|error| panic!("cannot open the test store at {url}: {error}"))
            .with_clock(clock.clone());
        // The raw pool pokes at the database behind the store's back, through sqlx's `Any`.
        sqlx::any::install_default_drivers();
        let raw = AnyPoolOptions::new()
            .max_connections(1)
            .connect(&url)
            .await
            .unwrap_or_else(|error| panic!("cannot open a raw pool on {url}: {error}"));
        Fixture {
            store,
            clock,
            url,
            backend,
            raw,
            cleanup,
            _guard: guard,
        }
    }

    pub async fn execute(&self, sql: &str) {
        sqlx::query::<Any>(AssertSqlSafe(sql.to_owned()))
            .execute(&self.raw)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
    }

    pub async fn count(&self, sql: &str) -> i64 {
        sqlx::query_scalar::<Any, i64>(AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.raw)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    pub async fn text(&self, sql: &str) -> String {
        sqlx::query_scalar::<Any, String>(AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.raw)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"))
    }

    /// Every cell of the first row `sql` returns, as text: integers in decimal, NULL as `NULL`.
    pub async fn cells(&self, sql: &str) -> Vec<String> {
        let row = sqlx::query::<Any>(AssertSqlSafe(sql.to_owned()))
            .fetch_one(&self.raw)
            .await
            .unwrap_or_else(|error| panic!("{sql}: {error}"));
        (0..row.len())
            .map(|column| {
                let cell = match row.try_get::<Option<String>, _>(column) {
                    Ok(text) => text,
                    Err(_) => row
                        .try_get::<Option<i64>, _>(column)
                        .unwrap_or_else(|error| panic!("{sql}, column {column}: {error}"))
                        .map(|number| number.to_string()),
                };
                cell.unwrap_or_else(|| "NULL".into())
            })
            .collect()
    }

    pub async fn teardown(mut self) {
        self.raw.close().await;
        self.store.close().await;
        if let Some(cleanup) = self.cleanup.take() {
            cleanup.await;
        }
    }
}
