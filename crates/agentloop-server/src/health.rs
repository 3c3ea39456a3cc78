//! What `/readyz` and `/healthz` say: states only. They need no key, so they say nothing a
//! stranger should read: not why the store failed (a database error names hosts and users),
//! not what a failed MCP server printed (its stderr may hold a connection string with its
//! password, a host name, a stack trace). Those go to the server's log; `agentloop tools` (run
//! by the operator) shows each MCP server's reason too. A request with an API key gets the same
//! answer: a key is a user of the application, not its operator.

use std::time::{Duration, Instant};

use agentloop_core::{
    Store,
    protocol::{SourceState, SourceStatus, SourceTransport},
};
use serde::Serialize;
use utoipa::ToSchema;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable` (with status 503) when the store does not answer.
    pub status: String,
    /// Runs in progress on this instance.
    pub active_runs: usize,
    pub store: StoreHealth,
    /// Each tool source (MCP server) and its state. A source that is down does not make the
    /// instance unready: runs go on without its tools, and it is restarted meanwhile.
    pub tool_sources: Vec<ToolSourceHealth>,
}

/// Whether the store answered its last check.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StoreHealth {
    /// `ok` or `unavailable`.
    pub status: String,
    /// When it is unavailable, a fixed sentence; why is in the server's log.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A tool source (an MCP server) as the health answers show it: its state, never why (the
/// server's log and `agentloop tools` say why).
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct ToolSourceHealth {
    /// The namespace of its tools: the `[mcp_servers.NAME]` of a server.
    pub name: String,
    pub transport: SourceTransport,
    /// `starting`, `up`, `restarting` or `down`.
    pub state: &'static str,
    /// While `restarting`: the attempt, from 1.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// How often it was started again.
    pub restarts: u32,
    /// How many of its tools new runs are offered (none unless it is up).
    pub tools: usize,
}

impl ToolSourceHealth {
    /// `status` without its reason.
    pub fn of(status: &SourceStatus) -> ToolSourceHealth {
        let (state, attempt) = match &status.health.state {
            SourceState::Starting => ("starting", None),
            SourceState::Up => ("up", None),
            SourceState::Restarting { attempt, .. } => ("restarting", Some(*attempt)),
            SourceState::Down { .. } => ("down", None),
        };
        ToolSourceHealth {
            name: status.name.clone(),
            transport: status.health.transport,
            state,
            attempt,
            restarts: status.health.restarts,
            tools: status.tools,
        }
    }
}

/// How long one check of the store is trusted: health checks of a load balancer (or several)
/// cost the database one cheap query per period at most.
const STORE_CHECK_TTL: Duration = Duration::from_secs(1);
/// A store that takes longer than this to answer a trivial query is unavailable.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);
/// What the health answers say of a store that failed its check.
const STORE_UNAVAILABLE: &str =
    "the store does not answer; the server's log says why (check the database)";

/// The latest check of the store, shared by every health request.
#[derive(Default)]
pub struct HealthCheck {
    last: tokio::sync::Mutex<Option<Checked>>,
}

struct Checked {
    at: Instant,
    health: StoreHealth,
    /// Why it failed, as last logged: a new reason is logged, the same one once.
    why: Option<String>,
}

impl HealthCheck {
    /// The store's health, checked at most once per [`STORE_CHECK_TTL`]; concurrent requests
    /// wait for the same check. Why it fails is logged when it starts failing or the reason
    /// changes, and its recovery once.
    pub async fn store(&self, store: &dyn Store) -> StoreHealth {
        let mut last = self.last.lock().await;
        if let Some(checked) = last.as_ref()
            && checked.at.elapsed() < STORE_CHECK_TTL
        {
            return checked.health.clone();
        }
        let why = match tokio::time::timeout(STORE_CHECK_TIMEOUT, store.ping()).await {
            Ok(Ok(())) => None,
            Ok(Err(error)) => Some(error.to_string()),
            Err(_) => Some(format!(
                "the store did not answer within {} s; check that the database is running and \
                 reachable",
                STORE_CHECK_TIMEOUT.as_secs()
            )),
        };
        let before = last.as_ref().and_then(|checked| checked.why.as_deref());
        match (&why, before) {
            (Some(why), before) if before != Some(why.as_str()) => {
                tracing::warn!(reason = %why, "the store failed its health check");
            }
            (None, Some(_)) => tracing::info!("the store answers its health check again"),
            _ => {}
        }
        let health = StoreHealth {
            status: if why.is_none() { "ok" } else { "unavailable" }.to_string(),
            error: why.as_ref().map(|_| STORE_UNAVAILABLE.to_string()),
        };
        *last = Some(Checked {
            at: Instant::now(),
            health: health.clone(),
            why,
        });
        health
    }
}

#[cfg(test)]
mod tests {
    use agentloop_core::protocol::SourceHealth;

    use super::*;

    #[test]
    fn a_source_shows_its_state_and_never_its_reason() {
        let secret = "FATAL: cannot connect to postgres://crm:hunter2@10.0.0.5/crm";
        for (state, shown, attempt) in [
            (SourceState::Starting, "starting", None),
            (SourceState::Up, "up", None),
            (
                SourceState::Restarting {
                    reason: secret.to_string(),
                    attempt: 2,
                },
                "restarting",
                Some(2),
            ),
            (
                SourceState::Down {
                    reason: secret.to_string(),
                },
                "down",
                None,
            ),
        ] {
            let status = SourceStatus {
                name: "crm".to_string(),
                health: SourceHealth {
                    transport: SourceTransport::Stdio,
                    state,
                    restarts: 1,
                },
                tools: 0,
            };
            let health = ToolSourceHealth::of(&status);
            assert_eq!((health.state, health.attempt), (shown, attempt));
            let json = serde_json::to_string(&health).unwrap_or_default();
            assert!(
                !json.contains("hunter2") && !json.contains("reason"),
                "{json}"
            );
        }
    }
}
