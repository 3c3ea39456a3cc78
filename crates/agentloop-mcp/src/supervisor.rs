//! Keeps a server up: restarts a server process that stopped, and opens a new session with a
//! server reached over HTTP that could not be reached, waiting longer after each failure and
//! giving up after `max_restarts` in a row. While it is not up, its tools are withdrawn
//! ([`Connection::set_state`] moves the source's changes, and the registry offers the tools of
//! a source only while it is up).

use std::{sync::Arc, time::Duration};

use agentloop_core::{InvalidSetting, ToolError, protocol::SourceState};
use rmcp::{Peer, RoleClient};
use tokio::time::Instant;

use crate::{
    McpError, McpServerConfig,
    config::unusable_startup_timeout,
    connection::{Connection, Link},
    stdio::StdioLink,
};

/// A server that stays up this long has recovered: the next stop starts the restarts over,
/// from the first delay.
const STABLE_AFTER: Duration = Duration::from_secs(60);

/// How often and how soon a server is started again.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct RestartPolicy {
    max_restarts: u32,
    first_delay: Duration,
    max_delay: Duration,
}

impl RestartPolicy {
    /// The policy of a validated configuration (defaults for what does not validate).
    pub(crate) fn of(config: &McpServerConfig) -> Self {
        let first_delay = config
            .restart_backoff()
            .unwrap_or(Duration::from_millis(500));
        Self {
            max_restarts: config.max_restarts,
            first_delay,
            max_delay: config
                .restart_backoff_max()
                .unwrap_or(Duration::from_secs(30))
                .max(first_delay),
        }
    }

    /// How long to wait before restart `attempt` (counted from 1), or `None` past the limit:
    /// the first delay, doubled for each attempt before, at most the longest delay.
    pub(crate) fn delay(&self, attempt: u32) -> Option<Duration> {
        if attempt == 0 || attempt > self.max_restarts {
            return None;
        }
        let doublings = i32::try_from(attempt - 1).unwrap_or(i32::MAX).min(62);
        let seconds = self.first_delay.as_secs_f64() * 2f64.powi(doublings);
        Some(
            Duration::try_from_secs_f64(seconds)
                .unwrap_or(self.max_delay)
                .min(self.max_delay),
        )
    }
}

/// The restarts in a row: counted until the server stays up for [`STABLE_AFTER`].
#[derive(Debug, Default)]
struct Attempts {
    count: u32,
}

impl Attempts {
    /// The server stopped after being up for `up_for`: a server that was up long enough starts
    /// the count over.
    fn stopped_after(&mut self, up_for: Duration) {
        if up_for >= STABLE_AFTER {
            self.count = 0;
        }
    }

    fn next(&mut self) -> u32 {
        self.count = self.count.saturating_add(1);
        self.count
    }
}

/// Watches the server of `connection` until it is shut down; started once it is up.
pub(crate) async fn supervise(connection: Arc<Connection>, config: McpServerConfig) {
    let watched = async {
        match connection.link() {
            Link::Stdio(_) => supervise_stdio(&connection, &config).await,
            Link::Http(_) => supervise_http(&connection, &config).await,
        }
    };
    tokio::select! {
        () = watched => {}
        () = connection.closed() => {}
    }
}

async fn supervise_stdio(connection: &Connection, config: &McpServerConfig) {
    let Link::Stdio(slot) = connection.link() else {
        return;
    };
    let server = connection.server();
    let policy = RestartPolicy::of(config);
    let mut attempts = Attempts::default();
    loop {
        let link = slot.current();
        let up_since = Instant::now();
        link.lifeline().stopped().await;
        if connection.is_closing() {
            return;
        }
        let report = link.lifeline().report().await;
        drop(link);
        attempts.stopped_after(up_since.elapsed());
        tracing::warn!(
            server,
            reason = report.why(),
            stderr = ?report.stderr(),
            "MCP server stopped"
        );
        let mut why = report.why().to_owned();
        loop {
            let attempt = attempts.next();
            let Some(delay) = policy.delay(attempt) else {
                give_up(connection, config, &why, attempt.saturating_sub(1));
                return;
            };
            connection.set_state(SourceState::Restarting {
                reason: why.clone(),
                attempt,
            });
            tokio::time::sleep(delay).await;
            match restart_stdio(connection, config).await {
                Ok(link) => {
                    if let Err(link) = slot.replace(Arc::new(link)) {
                        // Shut down meanwhile: the new process goes too.
                        link.shutdown().await;
                        return;
                    }
                    connection.count_restart();
                    connection.set_state(SourceState::Up);
                    tracing::info!(server, attempt, "MCP server restarted");
                    break;
                }
                Err(failure) => {
                    tracing::warn!(server, attempt, reason = %failure, "MCP server did not restart");
                    why = failure.to_string();
                }
            }
        }
    }
}

/// Why a server process did not come back.
#[derive(Debug, thiserror::Error)]
enum RestartFailure {
    #[error("mcp_servers.{0} has no command")]
    NoCommand(String),
    #[error(transparent)]
    Start(#[from] McpError),
    #[error(transparent)]
    Config(#[from] InvalidSetting),
    #[error("it could not list its tools: {0}")]
    ListTools(#[source] ToolError),
    #[error(
        "it did not list its tools within {seconds} s (mcp_servers.{server}.startup_timeout_s)"
    )]
    ListTimeout { server: String, seconds: f64 },
}

/// Starts the server's process again, completes the handshake and lists its tools (which the
/// registry asks for again once the server is up), within `startup_timeout_s`.
async fn restart_stdio(
    connection: &Connection,
    config: &McpServerConfig,
) -> Result<StdioLink, RestartFailure> {
    let server = connection.server();
    let Some(program) = config.command.as_deref() else {
        return Err(RestartFailure::NoCommand(server.to_owned()));
    };
    let link = crate::stdio::launch(server, program, config, connection.notices().clone()).await?;
    let Some(timeout) = config.startup_timeout() else {
        return Err(unusable_startup_timeout(server).into());
    };
    let listed = tokio::time::timeout(
        timeout,
        link.run(|peer: Peer<RoleClient>| async move { peer.list_all_tools().await }),
    )
    .await;
    match listed {
        Ok(Ok(_tools)) => Ok(link),
        Ok(Err(error)) => Err(RestartFailure::ListTools(error)),
        Err(_elapsed) => Err(RestartFailure::ListTimeout {
            server: server.to_owned(),
            seconds: config.startup_timeout_s,
        }),
    }
}

async fn supervise_http(connection: &Connection, config: &McpServerConfig) {
    let Link::Http(link) = connection.link() else {
        return;
    };
    let server = connection.server();
    let policy = RestartPolicy::of(config);
    let mut attempts = Attempts::default();
    loop {
        let up_since = Instant::now();
        let mut why = link.unreachable().await;
        if connection.is_closing() {
            return;
        }
        attempts.stopped_after(up_since.elapsed());
        tracing::warn!(server, reason = %why, "MCP server cannot be reached");
        loop {
            let attempt = attempts.next();
            let Some(delay) = policy.delay(attempt) else {
                give_up(connection, config, &why, attempt.saturating_sub(1));
                return;
            };
            connection.set_state(SourceState::Restarting {
                reason: why.clone(),
                attempt,
            });
            tokio::time::sleep(delay).await;
            // A call may have reached it meanwhile (opening a new session if it had to).
            let renewed = if link.is_running() {
                Ok(())
            } else {
                link.renew().await
            };
            match renewed {
                Ok(()) => {
                    connection.set_state(SourceState::Up);
                    tracing::info!(server, attempt, "MCP server reached again");
                    break;
                }
                Err(failure) => {
                    tracing::warn!(server, attempt, reason = %failure, "MCP server still cannot be reached");
                    why = failure.to_string();
                }
            }
        }
    }
}

fn give_up(connection: &Connection, config: &McpServerConfig, why: &str, failed: u32) {
    let server = connection.server();
    let reason = if config.max_restarts == 0 {
        format!("{why}; restarts are off (mcp_servers.{server}.max_restarts = 0)")
    } else {
        format!(
            "{why}; gave up after {failed} restarts in a row (mcp_servers.{server}.max_restarts)"
        )
    };
    tracing::error!(server, %reason, "MCP server is down; its tools are withdrawn");
    connection.set_state(SourceState::Down { reason });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy(max_restarts: u32, first: f64, max: f64) -> RestartPolicy {
        RestartPolicy::of(&McpServerConfig::new("x").with_restarts(max_restarts, first, max))
    }

    #[test]
    fn delays_double_up_to_the_longest_then_stop_at_the_limit() {
        let policy = policy(10, 0.5, 30.0);
        let delays: Vec<f64> = (1..=10)
            .map(|attempt| policy.delay(attempt).map_or(-1.0, |d| d.as_secs_f64()))
            .collect();
        assert_eq!(
            delays,
            [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0, 30.0]
        );
        assert_eq!(policy.delay(11), None);
        assert_eq!(policy.delay(0), None);

        let many = self::policy(u32::MAX, 0.5, 30.0);
        assert_eq!(many.delay(u32::MAX), Some(Duration::from_secs(30)));
    }

    #[test]
    fn no_restarts_when_the_limit_is_zero() {
        assert_eq!(policy(0, 0.5, 30.0).delay(1), None);
    }

    #[test]
    fn a_server_that_stayed_up_starts_the_count_over() {
        let mut attempts = Attempts::default();
        attempts.stopped_after(Duration::ZERO);
        assert_eq!(attempts.next(), 1);
        // Restarted, stopped again at once: still the same series.
        attempts.stopped_after(Duration::from_secs(1));
        assert_eq!(attempts.next(), 2);
        attempts.stopped_after(STABLE_AFTER);
        assert_eq!(attempts.next(), 1);
    }
}
