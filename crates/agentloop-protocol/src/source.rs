//! How each tool source (an MCP server) is doing: what `/healthz` and `agentloop tools` report.

use serde::{Deserialize, Serialize};

/// How a source is reached.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SourceTransport {
    /// A child process speaking MCP over its stdin and stdout.
    Stdio,
    /// A server reached over streamable HTTP.
    Http,
    /// Anything else: tools of the process itself, a source written in Rust.
    Other,
}

/// Where a source is in its life. Only an `up` source has its tools offered.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum SourceState {
    /// Not ready yet (a slow MCP server); its tools join when it is.
    Starting,
    Up,
    /// It stopped (or cannot be reached) and is being started again (over HTTP: a new session
    /// is being opened); `attempt` counts from 1 since it was last up long enough.
    Restarting {
        reason: String,
        attempt: u32,
    },
    /// It stopped and nothing will start it again: it failed to start, every restart failed,
    /// or it was shut down.
    Down {
        reason: String,
    },
}

impl SourceState {
    pub fn is_up(&self) -> bool {
        matches!(self, Self::Up)
    }
}

/// What a source says about itself.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceHealth {
    pub transport: SourceTransport,
    #[serde(flatten)]
    pub state: SourceState,
    /// How often it was started again (over HTTP: how often a new session replaced one).
    pub restarts: u32,
}

impl SourceHealth {
    /// A source that is up and was never restarted.
    pub fn up(transport: SourceTransport) -> Self {
        Self {
            transport,
            state: SourceState::Up,
            restarts: 0,
        }
    }
}

/// One source as the agent sees it: its health and how many tools it offers now.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceStatus {
    /// The namespace of its tools (`name.tool`): the `[mcp_servers.NAME]` of a server.
    pub name: String,
    #[serde(flatten)]
    pub health: SourceHealth,
    /// How many of its tools new runs are offered (none unless it is up).
    pub tools: usize,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn a_status_is_one_flat_object() {
        let status = SourceStatus {
            name: "files".to_owned(),
            health: SourceHealth {
                transport: SourceTransport::Stdio,
                state: SourceState::Restarting {
                    reason: "it exited with status 3".to_owned(),
                    attempt: 2,
                },
                restarts: 1,
            },
            tools: 0,
        };
        let value = serde_json::to_value(&status).unwrap();
        assert_eq!(
            value,
            json!({
                "name": "files",
                "transport": "stdio",
                "state": "restarting",
                "reason": "it exited with status 3",
                "attempt": 2,
                "restarts": 1,
                "tools": 0,
            })
        );
        assert_eq!(
            serde_json::from_value::<SourceStatus>(value).unwrap(),
            status
        );
        let up = serde_json::to_value(SourceHealth::up(SourceTransport::Http)).unwrap();
        assert_eq!(
            up,
            json!({"transport": "http", "state": "up", "restarts": 0})
        );
    }
}
