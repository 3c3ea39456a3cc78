//! A connected server, whichever way it is reached: what its tools and its source share.

use agentloop_core::{
    ToolError, ToolOutput,
    protocol::{SourceHealth, SourceState, SourceTransport},
};
use rmcp::{
    Peer, RoleClient,
    model::{CallToolRequestParams, JsonObject, MetaObject, RequestMetaObject},
};
use tokio::sync::watch;

use crate::{
    client::Changes,
    http::HttpLink,
    result::call_output,
    stdio::{StdioLink, StdioSlot},
};

pub(crate) struct Connection {
    server: String,
    changes: Changes,
    link: Link,
    /// How the server is doing; the supervisor moves it.
    health: watch::Sender<SourceHealth>,
    /// Set once the server is shut down: nothing restarts it after that.
    closing: watch::Sender<bool>,
}

pub(crate) enum Link {
    Stdio(StdioSlot),
    Http(Box<HttpLink>),
}

impl Connection {
    pub(crate) fn new(server: &str, changes: Changes, link: Link) -> Self {
        let transport = match &link {
            Link::Stdio(_) => SourceTransport::Stdio,
            Link::Http(_) => SourceTransport::Http,
        };
        Self {
            server: server.to_owned(),
            changes,
            link,
            health: watch::Sender::new(SourceHealth::up(transport)),
            closing: watch::Sender::new(false),
        }
    }

    /// A connection to a server started as a child process.
    pub(crate) fn stdio(server: &str, changes: Changes, link: StdioLink) -> Self {
        Self::new(server, changes, Link::Stdio(StdioSlot::new(link)))
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn changes(&self) -> &Changes {
        &self.changes
    }

    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// How the server is doing now.
    pub(crate) fn status(&self) -> SourceHealth {
        let mut health = self.health.borrow().clone();
        if let Link::Http(link) = &self.link {
            // A session opened again because the server forgot it counts too, not only the ones
            // the supervisor opened.
            health.restarts = u32::try_from(link.generation()).unwrap_or(u32::MAX);
        }
        health
    }

    /// Moves the state; the tools follow (they are offered only while the server is up), so
    /// whoever follows [`Changes`] is told.
    pub(crate) fn set_state(&self, state: SourceState) {
        let changed = self.health.send_if_modified(|health| {
            let changed = health.state != state;
            health.state = state;
            changed
        });
        if changed {
            self.changes.bump();
        }
    }

    /// Counts a restart that brought the server back.
    pub(crate) fn count_restart(&self) {
        self.health
            .send_modify(|health| health.restarts = health.restarts.saturating_add(1));
    }

    pub(crate) fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// Resolves once the server is shut down.
    pub(crate) async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        // The sender lives as long as `self`.
        let _ = closing.wait_for(|closing| *closing).await;
    }

    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        meta: Option<JsonObject>,
    ) -> Result<ToolOutput, ToolError> {
        let request = |peer: Peer<RoleClient>| {
            let mut params = CallToolRequestParams::new(name.to_owned());
            params.arguments = arguments.clone();
            params.meta = meta.clone().map(|meta| RequestMetaObject(MetaObject(meta)));
            async move { peer.call_tool_once(params).await }
        };
        let response = match &self.link {
            Link::Stdio(slot) => slot.current().run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        call_output(response.map_err(|error| self.explain(error))?)
    }

    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, ToolError> {
        let request = |peer: Peer<RoleClient>| async move { peer.list_all_tools().await };
        let listed = match &self.link {
            Link::Stdio(slot) => slot.current().run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        listed.map_err(|error| match error {
            ToolError::Failed(why) => ToolError::Failed(format!(
                "MCP server '{}' could not list its tools: {why}",
                self.server
            )),
            other => self.explain(other),
        })
    }

    /// Adds to why the server cannot be reached what agentloop does about it, so that the model
    /// knows whether trying again later may help.
    fn explain(&self, error: ToolError) -> ToolError {
        let ToolError::Unavailable(message) = error else {
            return error;
        };
        if self.is_closing() {
            return ToolError::Unavailable(message);
        }
        let note = match &self.health.borrow().state {
            SourceState::Restarting { attempt, .. } => format!(
                "; agentloop is restarting it (attempt {attempt}), and its tools come back once \
                 it is up"
            ),
            SourceState::Down { .. } => "; agentloop gave up restarting it".to_owned(),
            SourceState::Up | SourceState::Starting => String::new(),
        };
        ToolError::Unavailable(message + &note)
    }

    pub(crate) fn is_running(&self) -> bool {
        match &self.link {
            Link::Stdio(slot) => slot.current().is_running(),
            Link::Http(link) => link.is_running(),
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.close_before_stopping();
        match &self.link {
            Link::Stdio(slot) => slot.close().shutdown().await,
            Link::Http(link) => link.shutdown().await,
        }
    }

    pub(crate) fn close_now(&self) {
        self.close_before_stopping();
        match &self.link {
            Link::Stdio(slot) => slot.close().close_now(),
            Link::Http(link) => link.close_now(),
        }
    }

    /// Before the server stops: the supervisor must see that it was shut down, not that it
    /// crashed.
    fn close_before_stopping(&self) {
        self.closing.send_replace(true);
        self.health.send_modify(|health| {
            health.state = SourceState::Down {
                reason: "it was shut down".to_owned(),
            };
        });
        self.changes.close();
    }
}
