//! A running MCP server and the tools it offers.

use std::{
    collections::BTreeMap,
    fmt,
    sync::{Arc, Mutex, MutexGuard},
};

use agentloop_core::{Tool, ToolError, ToolSource};
use async_trait::async_trait;
use rmcp::{
    RoleClient, ServiceExt,
    model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion},
    service::{ClientInitializeError, RunningService},
};

use crate::{
    McpError, McpServerConfig,
    lifeline::Lifeline,
    process::{self, ChildTransport},
    tool::McpTool,
};

type Service = RunningService<RoleClient, ClientConfig>;

/// A connected MCP server: its tools are named `NAME.tool`. Dropping it stops the server.
pub struct McpSource {
    name: String,
    lifeline: Arc<Lifeline>,
    tools: Vec<Arc<dyn Tool>>,
    /// `None` once shut down.
    service: Mutex<Option<Service>>,
}

impl McpSource {
    /// Starts the server `name`, performs the MCP handshake and lists its tools, all within
    /// `startup_timeout_s`.
    pub async fn connect(name: &str, config: &McpServerConfig) -> Result<McpSource, McpError> {
        config.validate(name).map_err(McpError::InvalidConfig)?;
        let Some(timeout) = config.startup_timeout() else {
            return Err(McpError::InvalidConfig(format!(
                "mcp_servers.{name}.startup_timeout_s is not a usable duration"
            )));
        };
        let (transport, lifeline) = process::spawn(name, config)?;
        match tokio::time::timeout(timeout, start(name, transport, &lifeline)).await {
            Ok(started) => started,
            Err(_elapsed) => Err(McpError::StartupTimeout {
                server: name.to_owned(),
                seconds: config.startup_timeout_s,
                // Stopped by the timeout itself: only its stderr can tell why it was slow.
                details: lifeline.report().await.without_reason().as_details(),
            }),
        }
    }

    /// Whether the server's process still runs.
    pub fn is_running(&self) -> bool {
        self.lifeline.is_running()
    }

    /// Stops the server: closes its stdin, then terminates it if it does not exit by itself.
    /// Calls of its tools fail with [`ToolError::Unavailable`] from now on.
    pub async fn shutdown(&self) {
        let service = self.lock_service().take();
        if let Some(mut service) = service {
            self.lifeline.mark_gone("it was shut down");
            if let Err(error) = service.close().await {
                tracing::debug!(server = %self.name, %error, "MCP client task failed while closing");
            }
        }
    }

    fn lock_service(&self) -> MutexGuard<'_, Option<Service>> {
        // The guarded value is only ever taken whole, so a poisoned lock holds nothing broken.
        self.service
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

async fn start(
    name: &str,
    transport: ChildTransport,
    lifeline: &Arc<Lifeline>,
) -> Result<McpSource, McpError> {
    let service = match client_config().serve(transport).await {
        Ok(service) => service,
        Err(error) => {
            let details = lifeline.report().await.as_details();
            return Err(McpError::Handshake {
                server: name.to_owned(),
                reason: describe_handshake_error(&error, lifeline.is_running()),
                details,
            });
        }
    };
    let listed = match service.list_all_tools().await {
        Ok(listed) => listed,
        Err(error) => {
            return Err(McpError::ListTools {
                server: name.to_owned(),
                reason: error.to_string(),
                details: lifeline.report().await.as_details(),
            });
        }
    };
    let peer = service.peer().clone();
    let tools = listed
        .iter()
        .map(|tool| Arc::new(McpTool::new(tool, peer.clone(), lifeline.clone())) as Arc<dyn Tool>)
        .collect();
    tracing::debug!(server = %name, tools = listed.len(), "MCP server started");
    Ok(McpSource {
        name: name.to_owned(),
        lifeline: lifeline.clone(),
        tools,
        service: Mutex::new(Some(service)),
    })
}

fn describe_handshake_error(error: &ClientInitializeError, running: bool) -> String {
    if !running {
        // A broken pipe or a closed connection is only the symptom; the details say why.
        return "the server stopped before answering".to_owned();
    }
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("cannot {context}: {}", error.error)
        }
        ClientInitializeError::ConnectionClosed(awaited) => {
            format!("the server closed the connection before sending its {awaited}")
        }
        ClientInitializeError::JsonRpcError(error) => {
            format!("the server refused to initialize: {}", error.message)
        }
        other => other.to_string(),
    }
}

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("agentloop", env!("CARGO_PKG_VERSION")),
    )
    // The legacy `initialize` handshake is what every stdio server speaks today; it must name a
    // version that still has one.
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

/// Starts every server at the same time; returns those that started and why the others did not,
/// so that the caller can warn and go on without them.
pub async fn connect_all(
    servers: &BTreeMap<String, McpServerConfig>,
) -> (Vec<Arc<McpSource>>, Vec<(String, McpError)>) {
    let attempts = servers.iter().map(|(name, config)| async move {
        (name.clone(), McpSource::connect(name, config).await)
    });
    let mut sources = Vec::new();
    let mut failures = Vec::new();
    for (name, attempt) in futures::future::join_all(attempts).await {
        match attempt {
            Ok(source) => sources.push(Arc::new(source)),
            Err(error) => failures.push((name, error)),
        }
    }
    (sources, failures)
}

#[async_trait]
impl ToolSource for McpSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
        Ok(self.tools.clone())
    }
}

impl Drop for McpSource {
    fn drop(&mut self) {
        // Dropping the rmcp service cancels it, which closes the transport and stops the child;
        // tools still held elsewhere must fail at once rather than wait for that.
        self.lifeline.mark_gone("it was shut down");
    }
}

impl fmt::Debug for McpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tools: Vec<&str> = self
            .tools
            .iter()
            .map(|tool| tool.info().name.as_str())
            .collect();
        f.debug_struct("McpSource")
            .field("name", &self.name)
            .field("running", &self.is_running())
            .field("tools", &tools)
            .finish()
    }
}
