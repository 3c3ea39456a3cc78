//! The runtime's MCP servers as the HTTP server's [`McpContext`]: the resources and prompts a
//! request brings into its run.

use std::sync::{Arc, Mutex, PoisonError};

use agentloop_core::ToolSource;
use agentloop_mcp::{McpPromptRole, McpSource};
use agentloop_server::{McpContext, McpContextError, PromptRole};
use async_trait::async_trait;
use serde_json::{Map, Value};

/// Over the servers that are up, those that joined late included.
pub(crate) struct Servers(pub(crate) Arc<Mutex<Vec<Arc<McpSource>>>>);

impl Servers {
    fn find(&self, server: &str) -> Result<Arc<McpSource>, McpContextError> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .find(|source| source.name() == server)
            .cloned()
            .ok_or_else(|| McpContextError::NoServer(server.to_owned()))
    }
}

#[async_trait]
impl McpContext for Servers {
    async fn read_resource(&self, server: &str, uri: &str) -> Result<String, McpContextError> {
        let contents = self
            .find(server)?
            .read_resource(uri)
            .await
            .map_err(|error| McpContextError::Failed(error.to_string()))?;
        let text: Vec<String> = contents.iter().map(|content| content.as_text()).collect();
        Ok(text.join("\n"))
    }

    async fn prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Vec<(PromptRole, String)>, McpContextError> {
        let messages = self
            .find(server)?
            .prompt(name, arguments)
            .await
            .map_err(|error| McpContextError::Failed(error.to_string()))?;
        Ok(messages
            .into_iter()
            .map(|message| {
                let role = match message.role {
                    McpPromptRole::User => PromptRole::User,
                    McpPromptRole::Assistant => PromptRole::Assistant,
                };
                (role, message.text)
            })
            .collect())
    }
}
