//! A connected MCP server and the tools it offers.

use std::{collections::BTreeMap, fmt, sync::Arc, time::Duration};

use agentloop_core::{InvalidSetting, Tool, ToolError, ToolSource, protocol::SourceHealth};
use async_trait::async_trait;
use tokio::sync::watch;

use crate::{
    McpError, McpServerConfig,
    config::unusable_startup_timeout,
    connection::{Connection, Link},
    http::HttpLink,
    notices::Notices,
    oauth::OAuthContext,
    resources::{
        self, McpPrompt, McpPromptMessage, McpResource, McpResourceContent, McpResourceTemplate,
    },
    stdio::launch,
    supervisor::supervise,
    tool::McpTool,
};

/// A connected MCP server: its tools are named `NAME.tool`. Dropping it stops a server started
/// as a child process, and ends the session with a server reached over HTTP.
///
/// A server that stops is started again (over HTTP: a new session is opened once it can be
/// reached), as `[mcp_servers.NAME]` says; [`ToolSource::status`] tells how it is doing, and
/// [`ToolSource::changes`] moves whenever that changes.
pub struct McpSource {
    name: String,
    connection: Arc<Connection>,
    /// One listing at a time; the value of the change counter it was made at.
    listed: tokio::sync::Mutex<Listed>,
}

struct Listed {
    at_change: u64,
    tools: Vec<Arc<dyn Tool>>,
}

impl McpSource {
    /// Starts the server `name` (or connects to it, over HTTP), performs the MCP handshake and
    /// lists its tools, all within `startup_timeout_s`.
    pub async fn connect(name: &str, config: &McpServerConfig) -> Result<McpSource, McpError> {
        Self::connect_with(name, config, &OAuthContext::in_memory()).await
    }

    /// Like [`McpSource::connect`], with a server over HTTP authorized through `oauth` when it
    /// asks for OAuth: its tokens kept there, and its authorizations approved there.
    pub async fn connect_with(
        name: &str,
        config: &McpServerConfig,
        oauth: &OAuthContext,
    ) -> Result<McpSource, McpError> {
        config.validate(name)?;
        let Some(timeout) = config.startup_timeout() else {
            return Err(unusable_startup_timeout(name).into());
        };
        let source = match (&config.command, &config.url) {
            (Some(program), None) => connect_stdio(name, program, config, timeout).await,
            (None, Some(url)) => connect_http(name, url, config, timeout, oauth).await,
            // `validate` refused both of these already.
            _ => Err(McpError::InvalidConfig(InvalidSetting::new(
                format!("mcp_servers.{name}"),
                format!("mcp_servers.{name} needs exactly one of command and url"),
            ))),
        }?;
        // Ends when the source is shut down or dropped.
        tokio::spawn(supervise(source.connection.clone(), config.clone()));
        Ok(source)
    }

    /// Whether the server can be used: its process still runs, or, over HTTP, the session is
    /// open and the server answered the last request.
    pub fn is_running(&self) -> bool {
        self.connection.is_running()
    }

    /// Stops the server: closes its stdin, then terminates it if it does not exit by itself;
    /// over HTTP, ends the session. Calls of its tools fail with [`ToolError::Unavailable`]
    /// from now on.
    pub async fn shutdown(&self) {
        self.connection.shutdown().await;
    }

    /// Whether the server offers resources (its `initialize` answer has the capability).
    pub async fn offers_resources(&self) -> bool {
        resources::offers(&self.connection).await.resources
    }

    /// Whether the server offers prompts.
    pub async fn offers_prompts(&self) -> bool {
        resources::offers(&self.connection).await.prompts
    }

    /// The resources the server lists now (`resources/list`, every page).
    pub async fn resources(&self) -> Result<Vec<McpResource>, ToolError> {
        resources::list_resources(&self.connection).await
    }

    /// The resource templates the server lists now (`resources/templates/list`).
    pub async fn resource_templates(&self) -> Result<Vec<McpResourceTemplate>, ToolError> {
        resources::list_resource_templates(&self.connection).await
    }

    /// Reads the resource `uri` (`resources/read`): each of its contents.
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<McpResourceContent>, ToolError> {
        resources::read_resource(&self.connection, uri).await
    }

    /// The prompts the server lists now (`prompts/list`).
    pub async fn prompts(&self) -> Result<Vec<McpPrompt>, ToolError> {
        resources::list_prompts(&self.connection).await
    }

    /// The messages of the prompt `name` with `arguments` (`prompts/get`).
    pub async fn prompt(
        &self,
        name: &str,
        arguments: serde_json::Map<String, serde_json::Value>,
    ) -> Result<Vec<McpPromptMessage>, ToolError> {
        resources::get_prompt(&self.connection, name, arguments).await
    }

    /// A counter that moves when the server's resources change (`resources/list_changed`,
    /// `resources/updated`, a new session); closed once the source shuts down.
    pub fn resource_changes(&self) -> watch::Receiver<u64> {
        self.connection.notices().resources.subscribe()
    }

    /// A counter that moves when the server's prompts change (`prompts/list_changed`, a new
    /// session); closed once the source shuts down.
    pub fn prompt_changes(&self) -> watch::Receiver<u64> {
        self.connection.notices().prompts.subscribe()
    }

    /// Lists the tools and keeps them with the value of the change counter read before asking,
    /// so that a change arriving during the listing is listed again next time.
    async fn list(&self, listed: &mut Listed) -> Result<(), ToolError> {
        let at_change = self.connection.changes().current();
        let tools = self.connection.list_tools().await?;
        *listed = Listed {
            at_change,
            tools: tools
                .iter()
                .map(|tool| Arc::new(McpTool::new(tool, self.connection.clone())) as Arc<dyn Tool>)
                .collect(),
        };
        Ok(())
    }
}

async fn connect_stdio(
    name: &str,
    program: &str,
    config: &McpServerConfig,
    timeout: Duration,
) -> Result<McpSource, McpError> {
    let notices = Notices::new();
    let started = tokio::time::Instant::now();
    let link = launch(name, program, config, notices.clone()).await?;
    let lifeline = link.lifeline().clone();
    let connection =
        Connection::stdio(name, notices, link).with_max_duration(config.max_duration());
    let listed = start(name, connection);
    match tokio::time::timeout(timeout.saturating_sub(started.elapsed()), listed).await {
        Ok(listed) => listed,
        Err(_elapsed) => Err(McpError::StartupTimeout {
            server: name.to_owned(),
            seconds: config.startup_timeout_s,
            details: lifeline.report().await.without_reason().as_details(),
        }),
    }
}

async fn connect_http(
    name: &str,
    url: &str,
    config: &McpServerConfig,
    timeout: Duration,
    oauth: &OAuthContext,
) -> Result<McpSource, McpError> {
    let notices = Notices::new();
    let started = async {
        let link = HttpLink::connect(name, url, config, timeout, notices.clone(), oauth).await?;
        start(
            name,
            Connection::new(name, notices, Link::Http(Box::new(link)))
                .with_max_duration(config.max_duration()),
        )
        .await
    };
    match tokio::time::timeout(timeout, started).await {
        Ok(started) => started,
        Err(_elapsed) => Err(McpError::ConnectTimeout {
            server: name.to_owned(),
            url: url.to_owned(),
            seconds: config.startup_timeout_s,
        }),
    }
}

/// Lists the tools of a server that completed the handshake.
async fn start(name: &str, connection: Connection) -> Result<McpSource, McpError> {
    let source = McpSource {
        name: name.to_owned(),
        connection: Arc::new(connection),
        listed: tokio::sync::Mutex::new(Listed {
            at_change: 0,
            tools: Vec::new(),
        }),
    };
    let mut listed = source.listed.lock().await;
    if let Err(error) = source.list(&mut listed).await {
        let details = match (source.connection.link(), &error) {
            // An unavailable server's message already tells why it stopped.
            (Link::Stdio(slot), ToolError::Failed(_)) => {
                slot.current().lifeline().report().await.as_details()
            }
            _ => String::new(),
        };
        let reason = match error {
            ToolError::Failed(why)
            | ToolError::InvalidArguments(why)
            | ToolError::Unavailable(why) => why,
            other => other.to_string(),
        };
        return Err(McpError::ListTools {
            server: name.to_owned(),
            reason,
            details,
        });
    }
    tracing::debug!(server = %name, tools = listed.tools.len(), "MCP server started");
    drop(listed);
    Ok(source)
}

/// Starts every server at the same time; returns those that started and why the others did not,
/// so that the caller can warn and go on without them.
pub async fn connect_all(
    servers: &BTreeMap<String, McpServerConfig>,
    oauth: &OAuthContext,
) -> (Vec<Arc<McpSource>>, Vec<(String, McpError)>) {
    let attempts = servers.iter().map(|(name, config)| async move {
        (
            name.clone(),
            McpSource::connect_with(name, config, oauth).await,
        )
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

    /// The tools listed last, or listed anew when the server said they changed (or a new HTTP
    /// session replaced the old one) since.
    async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
        let mut listed = self.listed.lock().await;
        if listed.at_change != self.connection.changes().current() {
            self.list(&mut listed).await?;
        }
        Ok(listed.tools.clone())
    }

    /// Moves when the server sends `notifications/tools/list_changed`, and when a new HTTP
    /// session replaced one the server forgot. Closed (`changed()` fails) once the source is
    /// shut down or dropped, so that whoever waits for changes can stop.
    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.connection.changes().subscribe())
    }

    /// Up, restarting (after it stopped or could not be reached) or down (shut down, or every
    /// restart failed), with how often it was restarted.
    fn status(&self) -> SourceHealth {
        self.connection.status()
    }
}

impl Drop for McpSource {
    fn drop(&mut self) {
        // Tools held elsewhere keep the connection; the server must still end with its source.
        self.connection.close_now();
    }
}

impl fmt::Debug for McpSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut debug = f.debug_struct("McpSource");
        debug
            .field("name", &self.name)
            .field("running", &self.is_running());
        if let Link::Http(link) = self.connection.link() {
            debug.field("url", &link.url());
        }
        match self.listed.try_lock() {
            Ok(listed) => {
                let tools: Vec<&str> = listed
                    .tools
                    .iter()
                    .map(|tool| tool.info().name.as_str())
                    .collect();
                debug.field("tools", &tools)
            }
            Err(_) => debug.field("tools", &"(being listed)"),
        };
        debug.finish()
    }
}
