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
}

impl Default for StoreConfig {
    fn default() -> Self {
        Self {
            url: DEFAULT_STORE_URL.into(),
        }
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
        Ok(())
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
        };
        let message = config.validate().unwrap_err().message;
        assert!(message.contains("has no scheme"), "{message}");
        assert!(message.contains("sqlite://PATH"), "{message}");
    }

    #[test]
    fn postgres_urls_are_accepted() {
        for url in ["postgres://u@h/db", "postgresql://u:p@h:5433/db"] {
            let config = StoreConfig { url: url.into() };
            assert_eq!(config.validate(), Ok(()), "{url}");
        }
    }
}
