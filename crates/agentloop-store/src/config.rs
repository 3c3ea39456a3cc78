//! The `[store]` section of agentloop.toml.

use agentloop_core::InvalidSetting;
use serde::{Deserialize, Serialize};

use crate::dialect::Backend;

pub const DEFAULT_STORE_URL: &str = "sqlite://agentloop.db";

/// Where sessions and runs are kept. An empty `[store]` section (or none) means a SQLite file
/// `agentloop.db` in the working directory.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StoreConfig {
    /// `sqlite://path` (relative to the working directory), `sqlite::memory:`, or
    /// `postgres://user:password@host:port/database`.
    pub url: String,
    /// How long finished runs keep their trail (`[store.retention]`); none by default.
    pub retention: Retention,
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_STORE_URL.into(),
            retention: Retention::default(),
        }
    }
}

/// `[store.retention]`: when a finished run's trail (its events, its checkpoint, tool outputs
/// nothing names any more) is deleted. A run loses it when either rule says so; with neither
/// set nothing is pruned. The session's messages, the run's row (status, usage, cost, typed
/// answer) and its tool call records are always kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Retention {
    /// Runs that finished more than this many days ago.
    pub max_age_days: Option<u32>,
    /// Runs older than the last this many runs of their session.
    pub keep_per_session: Option<u32>,
    /// Seconds between the passes of a server's background pruner.
    pub interval_s: u64,
    /// Runs pruned in one transaction: small batches keep each one short, so runs never wait
    /// long for it.
    pub batch: u32,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            max_age_days: None,
            keep_per_session: None,
            interval_s: 300,
            batch: 100,
        }
    }
}

impl Retention {
    /// Whether any rule is set (else there is nothing to prune).
    pub fn is_set(&self) -> bool {
        self.max_age_days.is_some() || self.keep_per_session.is_some()
    }

    fn validate(&self) -> Result<(), InvalidSetting> {
        if self.max_age_days == Some(0) {
            return Err(InvalidSetting::new(
                "store.retention.max_age_days",
                "store.retention.max_age_days must be at least 1 (days after a run finished)",
            ));
        }
        if self.interval_s == 0 {
            return Err(InvalidSetting::new(
                "store.retention.interval_s",
                "store.retention.interval_s must be at least 1 (seconds between pruning passes)",
            ));
        }
        if !(1..=10_000).contains(&self.batch) {
            return Err(InvalidSetting::new(
                "store.retention.batch",
                "store.retention.batch must be between 1 and 10000 (runs per transaction)",
            ));
        }
        Ok(())
    }
}

impl StoreConfig {
    /// Checks what a TOML parser cannot; the message names the offending key.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.url.trim().is_empty() {
            return Err(InvalidSetting::new(
                "store.url",
                format!("store.url must not be empty; use for example {DEFAULT_STORE_URL:?}"),
            ));
        }
        if Backend::of_url(&self.url).is_none() {
            return Err(InvalidSetting::new(
                "store.url",
                unsupported_url_message(&self.url),
            ));
        }
        self.retention.validate()
    }

    /// Whether the URL names a PostgreSQL database.
    pub fn is_postgres(&self) -> bool {
        Backend::of_url(&self.url) == Some(Backend::Postgres)
    }
}

/// Shared with `SqlStore::connect`, so that a bad URL reads the same from the config check and
/// from a `DATABASE_URL` that bypassed it.
pub(crate) fn unsupported_url_message(url: &str) -> String {
    const ACCEPTED: &str = "set store.url (or DATABASE_URL) to sqlite://PATH (e.g. \
        sqlite://agentloop.db), sqlite::memory: or postgres://USER:PASSWORD@HOST:PORT/DATABASE";
    match url.split_once(':') {
        // Only the scheme is shown: the rest may hold a password.
        Some((scheme, _)) => format!("unsupported database URL scheme {scheme:?}: {ACCEPTED}"),
        None => format!("the database URL {url:?} has no scheme: {ACCEPTED}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_means_a_local_sqlite_file() {
        let config: StoreConfig = serde_json::from_str("{}").unwrap();
        assert_eq!(config.url, "sqlite://agentloop.db");
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        assert!(serde_json::from_str::<StoreConfig>(r#"{"uri": "sqlite://x.db"}"#).is_err());
    }

    #[test]
    fn other_databases_are_refused_with_the_accepted_forms() {
        let config = StoreConfig {
            url: "mysql://root@localhost/agentloop".into(),
            ..StoreConfig::default()
        };
        let message = config.validate().unwrap_err().message;
        assert!(message.contains("\"mysql\""), "{message}");
        assert!(message.contains("store.url"), "{message}");
        assert!(message.contains("postgres://"), "{message}");
        assert!(!message.contains("root@"), "{message}");
    }

    #[test]
    fn a_bare_path_is_refused_with_the_accepted_forms() {
        let config = StoreConfig {
            url: "agentloop.db".into(),
            ..StoreConfig::default()
        };
        let message = config.validate().unwrap_err().message;
        assert!(message.contains("has no scheme"), "{message}");
        assert!(message.contains("sqlite://PATH"), "{message}");
    }

    #[test]
    fn retention_is_off_unless_a_rule_is_set_and_its_bounds_are_checked() {
        let config: StoreConfig = serde_json::from_str("{}").unwrap();
        assert!(!config.retention.is_set());
        let config: StoreConfig =
            serde_json::from_str(r#"{"retention": {"keep_per_session": 0}}"#).unwrap();
        assert!(config.retention.is_set());
        assert_eq!(config.validate(), Ok(()));
        for (retention, key) in [
            (r#"{"max_age_days": 0}"#, "store.retention.max_age_days"),
            (r#"{"interval_s": 0}"#, "store.retention.interval_s"),
            (r#"{"batch": 0}"#, "store.retention.batch"),
            (r#"{"batch": 10001}"#, "store.retention.batch"),
        ] {
            let config: StoreConfig =
                serde_json::from_str(&format!(r#"{{"retention": {retention}}}"#)).unwrap();
            assert_eq!(config.validate().unwrap_err().key, key, "{retention}");
        }
        assert!(serde_json::from_str::<StoreConfig>(r#"{"retention": {"days": 3}}"#).is_err());
    }

    #[test]
    fn postgres_urls_are_accepted() {
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5433/db"] {
            let config = StoreConfig {
                url: url.into(),
                ..StoreConfig::default()
            };
            assert_eq!(config.validate(), Ok(()), "{url}");
        }
    }
}
