//! agentloop-store: the [`Store`](agentloop_core::Store) of agentloop on SQLite or PostgreSQL,
//! and its [`KeyStore`](agentloop_core::KeyStore) of API keys (kept as SHA-256 hashes only).
//!
//! One implementation, [`SqlStore`]: SQLite through rusqlite, in the calling task (`sqlite.rs`),
//! PostgreSQL through sqlx (`postgres.rs`). The schema is portable (ids as text, times as
//! milliseconds, JSON as text) so that every query (`sql.rs`) serves both databases; only the
//! DDL of the migrations differs per backend.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agentloop_core::StoreError> {
//! use agentloop_store::SqlStore;
//!
//! let store = SqlStore::connect("sqlite://agentloop.db").await?;
//! assert_eq!(store.backend(), "sqlite");
//! # Ok(()) }
//! ```

// Built without a backend (neither `sqlite` nor `postgres`), the store is a shell that refuses
// every URL, naming the feature it needs (`connect::not_built`): what reads and writes rows is
// there, never reached.
#![cfg_attr(
    not(any(feature = "sqlite", feature = "postgres")),
    allow(dead_code, unused_variables, unreachable_code)
)]

mod attachments;
mod batch;
mod begin;
mod columns;
mod config;
mod connect;
mod db;
mod dialect;
mod durable;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod errors;
mod events;
mod execute;
mod fresh;
mod keys;
mod locks;
mod messages;
mod notices;
mod oauth_tokens;
#[cfg(feature = "postgres")]
mod one_statement;
mod outputs;
#[cfg(feature = "postgres")]
mod postgres;
mod push;
mod records;
mod retention;
mod runs;
mod sessions;
mod sql;
#[cfg(feature = "sqlite")]
mod sqlite;
mod step;
mod store;
mod text;

pub use config::{DEFAULT_STORE_URL, Retention, StoreConfig};
pub use retention::Pruned;
pub use store::SqlStore;
