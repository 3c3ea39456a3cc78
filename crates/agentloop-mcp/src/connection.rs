//! A connected server, whichever way it is reached: what its tools and its source share.

use agentloop_core::{ToolError, ToolOutput};
use rmcp::{
    Peer, RoleClient,
    model::{CallToolRequestParams, JsonObject},
};

use crate::{client::Changes, http::HttpLink, result::call_output, stdio::StdioLink};

pub(crate) struct Connection {
    server: String,
    changes: Changes,
    link: Link,
}

pub(crate) enum Link {
    Stdio(StdioLink),
    Http(HttpLink),
}

impl Connection {
    pub(crate) fn new(server: &str, changes: Changes, link: Link) -> Self {
        Self {
            server: server.to_owned(),
            changes,
            link,
        }
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

    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
    ) -> Result<ToolOutput, ToolError> {
        let request = |peer: Peer<RoleClient>| {
            let mut params = CallToolRequestParams::new(name.to_owned());
            params.arguments = arguments.clone();
            async move { peer.call_tool_once(params).await }
        };
        let response = match &self.link {
            Link::Stdio(link) => link.run(request).await?,
            Link::Http(link) => link.run(request).await?,
        };
        call_output(response)
    }

    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, ToolError> {
        let request = |peer: Peer<RoleClient>| async move { peer.list_all_tools().await };
        let listed = match &self.link {
            Link::Stdio(link) => link.run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        listed.map_err(|error| match error {
            ToolError::Failed(why) => ToolError::Failed(format!(
                "MCP server '{}' could not list its tools: {why}",
                self.server
            )),
            other => other,
        })
    }

    pub(crate) fn is_running(&self) -> bool {
        match &self.link {
            Link::Stdio(link) => link.is_running(),
            Link::Http(link) => link.is_running(),
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.changes.close();
        match &self.link {
            Link::Stdio(link) => link.shutdown().await,
            Link::Http(link) => link.shutdown().await,
        }
    }

    pub(crate) fn close_now(&self) {
        self.changes.close();
        match &self.link {
            Link::Stdio(link) => link.close_now(),
            Link::Http(link) => link.close_now(),
        }
    }
}
