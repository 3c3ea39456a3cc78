//! The `[server]` section of agentloop.toml.

use std::time::Duration;

use agentloop_core::InvalidSetting;
use serde::{Deserialize, Serialize};

/// The most `server.threads` may name.
const MAX_THREADS: usize = 1024;

/// How the HTTP server listens and what it allows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerConfig {
    /// Address to listen on (`AGENTLOOP_LISTEN` overrides it).
    pub listen: String,
    /// Largest request body accepted, in bytes (413 above).
    pub max_body_bytes: usize,
    /// Runs one user may have in progress at once (429 above).
    pub max_runs_per_user: usize,
    /// Seconds between keep-alive comments on an SSE stream that has nothing to say.
    pub keep_alive_s: f64,
    /// Seconds the server waits, on shutdown, for runs to reach a safe point and be saved.
    pub shutdown_grace_s: f64,
    /// Seconds an instance may show no sign of life before another instance (or the same
    /// program started again) adopts its runs in progress.
    pub run_lease_s: f64,
    /// Whether `GET /` serves the web panel (its assets are built into the binary).
    pub panel: bool,
    /// USD one user's runs may spend per UTC day (from the price table); a new run over it is
    /// refused with 429 `budget_exceeded` until midnight UTC.
    pub user_daily_cost_usd: Option<f64>,
    /// Tokens one user's runs may spend per UTC day; like `user_daily_cost_usd`.
    pub user_daily_tokens: Option<u64>,
    /// 0: connections and runs are served by the runtime's threads, which take work from each
    /// other (tokio's multi-thread runtime, one thread per core). N: by N threads of their
    /// own, each with a runtime of one thread where the runs started through its connections
    /// work: less CPU per run when runs are few, slower under bursts of thousands. With a
    /// SQLite store only (`Config::validate` refuses it with PostgreSQL, whose pool's
    /// connections would stop with the threads that opened them).
    pub threads: usize,
    /// Seconds a client has to send a request's head, from its connection or from the head's
    /// first byte (the connection is closed after that).
    pub header_timeout_s: f64,
    /// Seconds a keep-alive connection may stay silent between requests, a request's body
    /// between its bytes, and an answer wait for the client to read it. An answer in progress
    /// (a run, an SSE stream) is not cut while it is being sent: keep-alive comments count.
    pub idle_timeout_s: f64,
    /// Connections open at once; a new one past it is answered 503 and closed. Unset: half
    /// of the open-files limit (`ulimit -n`) left after 128 for the rest of the process.
    pub max_connections: Option<usize>,
    /// Whether clients are told a failed run's detailed message (the LLM's address, the
    /// variable to set: for the operator) instead of a plain sentence chosen by its code. For
    /// development; the log has the detail either way.
    pub expose_error_details: bool,
    /// `[server.openai]`: the OpenAI-compatible API (`/v1/chat/completions`, `/v1/responses`).
    pub openai: OpenAiSettings,
    /// `[server.a2a]`: the A2A protocol's agent card and JSON-RPC endpoint (docs/a2a.md).
    pub a2a: A2aSettings,
}

/// `[server.a2a]`: what the agent card at `/.well-known/agent-card.json` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aSettings {
    /// Whether the card and `POST /a2a` are served.
    pub enabled: bool,
    /// The agent's name on its card.
    pub name: String,
    /// What the agent does, on its card.
    pub description: String,
    /// The address clients reach this server at (`https://agents.example.com`), for the
    /// card's endpoint; unset: the request's `Host` over `http`.
    pub url: Option<String>,
    /// `[[server.a2a.skills]]`: what the card says the agent can do.
    pub skills: Vec<A2aSkill>,
}

/// One skill of the agent card.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aSkill {
    pub id: String,
    pub name: String,
    pub description: String,
    pub tags: Vec<String>,
    pub examples: Vec<String>,
}

impl Default for A2aSettings {
    fn default() -> Self {
        Self {
            enabled: true,
            name: "agentloop".to_string(),
            description: "A tool-calling agent served by agentloop".to_string(),
            url: None,
            skills: Vec::new(),
        }
    }
}

/// `[server.openai]`: how the OpenAI-compatible API answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OpenAiSettings {
    /// Whether a chat completion shows the agent's steps (its working text, tool calls and
    /// results) as `reasoning_content`; a request's `X-Reasoning` header overrides it.
    pub reasoning: bool,
}

impl Default for OpenAiSettings {
    fn default() -> Self {
        Self { reasoning: true }
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:8080".to_string(),
            max_body_bytes: 1024 * 1024,
            max_runs_per_user: 8,
            keep_alive_s: 15.0,
            shutdown_grace_s: 30.0,
            run_lease_s: 10.0,
            panel: true,
            user_daily_cost_usd: None,
            user_daily_tokens: None,
            threads: 0,
            header_timeout_s: 30.0,
            idle_timeout_s: 120.0,
            max_connections: None,
            expose_error_details: false,
            openai: OpenAiSettings::default(),
            a2a: A2aSettings::default(),
        }
    }
}

impl ServerConfig {
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.listen.parse::<std::net::SocketAddr>().is_err() {
            return Err(InvalidSetting::new(
                "server.listen",
                format!(
                    "server.listen must be an address such as \"127.0.0.1:8080\" (got {:?})",
                    self.listen
                ),
            ));
        }
        if self.max_body_bytes < 1024 {
            return Err(InvalidSetting::new(
                "server.max_body_bytes",
                "server.max_body_bytes must be at least 1024",
            ));
        }
        if self.max_runs_per_user == 0 {
            return Err(InvalidSetting::new(
                "server.max_runs_per_user",
                "server.max_runs_per_user must be at least 1",
            ));
        }
        for (key, seconds) in [
            ("server.keep_alive_s", self.keep_alive_s),
            ("server.shutdown_grace_s", self.shutdown_grace_s),
            ("server.run_lease_s", self.run_lease_s),
            ("server.header_timeout_s", self.header_timeout_s),
            ("server.idle_timeout_s", self.idle_timeout_s),
        ] {
            if !(seconds.is_finite() && seconds > 0.0 && seconds <= 3600.0) {
                return Err(InvalidSetting::new(
                    key,
                    format!("{key} must be between 0 and 3600 seconds (got {seconds})"),
                ));
            }
        }
        if let Some(cost) = self.user_daily_cost_usd
            && !(cost.is_finite() && cost > 0.0)
        {
            return Err(InvalidSetting::new(
                "server.user_daily_cost_usd",
                format!("server.user_daily_cost_usd must be an amount in USD above 0 (got {cost})"),
            ));
        }
        if self.user_daily_tokens == Some(0) {
            return Err(InvalidSetting::new(
                "server.user_daily_tokens",
                "server.user_daily_tokens must be at least 1",
            ));
        }
        if self.max_connections == Some(0) {
            return Err(InvalidSetting::new(
                "server.max_connections",
                "server.max_connections must be at least 1 (leave it out to follow the \
                 open-files limit)",
            ));
        }
        if let Some(url) = &self.a2a.url
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            return Err(InvalidSetting::new(
                "server.a2a.url",
                format!("server.a2a.url must be an http:// or https:// address (got {url:?})"),
            ));
        }
        if let Some(skill) = self
            .a2a
            .skills
            .iter()
            .find(|skill| skill.id.trim().is_empty())
        {
            return Err(InvalidSetting::new(
                "server.a2a.skills",
                format!(
                    "every [[server.a2a.skills]] needs an id (the skill {:?} has none)",
                    skill.name
                ),
            ));
        }
        if self.threads > MAX_THREADS {
            return Err(InvalidSetting::new(
                "server.threads",
                format!(
                    "server.threads must be at most {MAX_THREADS} (got {}); 0 leaves the \
                     connections to the runtime's threads",
                    self.threads
                ),
            ));
        }
        Ok(())
    }

    pub fn keep_alive(&self) -> Duration {
        Duration::from_secs_f64(self.keep_alive_s)
    }

    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs_f64(self.shutdown_grace_s)
    }

    pub fn run_lease(&self) -> Duration {
        Duration::from_secs_f64(self.run_lease_s)
    }

    pub fn header_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.header_timeout_s)
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.idle_timeout_s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_bad_values_name_their_key() {
        assert_eq!(ServerConfig::default().validate(), Ok(()));
        let bad = ServerConfig {
            listen: "localhost".into(),
            ..ServerConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "server.listen");
        let bad = ServerConfig {
            max_runs_per_user: 0,
            ..ServerConfig::default()
        };
        let error = bad.validate().unwrap_err();
        assert!(
            error.message.contains("server.max_runs_per_user"),
            "{error}"
        );
        let bad = ServerConfig {
            threads: MAX_THREADS + 1,
            ..ServerConfig::default()
        };
        assert_eq!(bad.validate().unwrap_err().key, "server.threads");
        for (bad, key) in [
            (
                ServerConfig {
                    header_timeout_s: 0.0,
                    ..ServerConfig::default()
                },
                "server.header_timeout_s",
            ),
            (
                ServerConfig {
                    idle_timeout_s: f64::NAN,
                    ..ServerConfig::default()
                },
                "server.idle_timeout_s",
            ),
            (
                ServerConfig {
                    max_connections: Some(0),
                    ..ServerConfig::default()
                },
                "server.max_connections",
            ),
        ] {
            assert_eq!(bad.validate().unwrap_err().key, key);
        }
    }
}
