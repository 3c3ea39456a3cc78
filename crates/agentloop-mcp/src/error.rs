//! Why an MCP server could not be started or reached.

use agentloop_core::InvalidSetting;

/// A server that could not be started: the message says what to check.
///
/// `details` carries what the server left behind when it died (its exit status and the last
/// lines of its stderr), already formatted as indented lines; it is empty when there is nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum McpError {
    #[error("invalid MCP server configuration: {0}")]
    InvalidConfig(#[from] InvalidSetting),

    #[error("could not start MCP server '{server}': {reason}")]
    Spawn {
        server: String,
        command: String,
        reason: String,
    },

    #[error(
        "MCP server '{server}' failed the MCP handshake: {reason}; check that \
         mcp_servers.{server}.command and args start an MCP server speaking MCP over \
         stdio{details}"
    )]
    Handshake {
        server: String,
        reason: String,
        details: String,
    },

    #[error(
        "MCP server '{server}' did not start within {seconds} s; check that it starts without \
         waiting for input, or raise mcp_servers.{server}.startup_timeout_s{details}"
    )]
    StartupTimeout {
        server: String,
        seconds: f64,
        details: String,
    },

    /// A server reached over HTTP that could not be connected to; `reason` ends with what to
    /// check.
    #[error("cannot connect to MCP server '{server}' at {url}: {reason}")]
    Connect {
        server: String,
        url: String,
        reason: String,
    },

    #[error(
        "MCP server '{server}' at {url} did not complete the MCP handshake within {seconds} s; \
         check that mcp_servers.{server}.url is reachable from here, or raise \
         mcp_servers.{server}.startup_timeout_s"
    )]
    ConnectTimeout {
        server: String,
        url: String,
        seconds: f64,
    },

    #[error("MCP server '{server}' started but could not list its tools: {reason}{details}")]
    ListTools {
        server: String,
        reason: String,
        details: String,
    },
}

impl McpError {
    /// The name of the server the error is about, when it is known.
    pub fn server(&self) -> Option<&str> {
        match self {
            Self::InvalidConfig(_) => None,
            Self::Spawn { server, .. }
            | Self::Handshake { server, .. }
            | Self::StartupTimeout { server, .. }
            | Self::Connect { server, .. }
            | Self::ConnectTimeout { server, .. }
            | Self::ListTools { server, .. } => Some(server),
        }
    }
}
