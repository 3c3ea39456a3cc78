//! What a request may bring from the MCP servers into its run (`POST /v1/runs` with
//! `resources` or `prompt`): resources read and added to the question, or a server's prompt as
//! its opening. The server knows MCP only through [`McpContext`], which the program that serves
//! implements over its servers.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::{
    body::{RunBody, RunBodyPrompt, RunBodyResource},
    error::ApiError,
};

/// Who says a message of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptRole {
    User,
    Assistant,
}

/// Why a resource or a prompt could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpContextError {
    #[error("no MCP server {0} is up")]
    NoServer(String),
    #[error("{0}")]
    Failed(String),
}

/// The MCP servers of the program that serves, for what requests bring into their runs.
#[async_trait]
pub trait McpContext: Send + Sync {
    /// The text of the resource `uri` of `server` (a binary one as a short note).
    async fn read_resource(&self, server: &str, uri: &str) -> Result<String, McpContextError>;

    /// The messages of the prompt `name` of `server` with `arguments`.
    async fn prompt(
        &self,
        server: &str,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Vec<(PromptRole, String)>, McpContextError>;
}

/// The question of a run whose body names resources or a prompt: the prompt's messages (an
/// assistant's marked as such), then the body's query, then each resource in a
/// `<resource server="..." uri="...">` block. A body without either keeps its query.
pub(crate) async fn opening(
    context: Option<&dyn McpContext>,
    body: &RunBody,
) -> Result<String, ApiError> {
    if body.resources.is_empty() && body.prompt.is_none() {
        return Ok(body.query.clone());
    }
    let Some(context) = context else {
        return Err(ApiError::bad_request(
            "mcp_unavailable",
            "this server has no MCP servers to read resources or prompts from",
        ));
    };
    let mut parts = Vec::new();
    if let Some(prompt) = &body.prompt {
        parts.extend(prompt_text(context, prompt).await?);
    }
    if !body.query.trim().is_empty() {
        parts.push(body.query.clone());
    }
    for (index, resource) in body.resources.iter().enumerate() {
        parts.push(resource_block(context, index, resource).await?);
    }
    Ok(parts.join("\n\n"))
}

async fn prompt_text(
    context: &dyn McpContext,
    prompt: &RunBodyPrompt,
) -> Result<Vec<String>, ApiError> {
    let messages = context
        .prompt(&prompt.server, &prompt.name, prompt.arguments.clone())
        .await
        .map_err(|error| {
            ApiError::bad_request(
                "prompt_unavailable",
                format!(
                    "prompt: cannot get the prompt {} of MCP server {}: {error}",
                    prompt.name, prompt.server
                ),
            )
            .with_details(json!({"field": "prompt"}))
        })?;
    Ok(messages
        .into_iter()
        .map(|(role, text)| match role {
            PromptRole::User => text,
            PromptRole::Assistant => format!("(assistant) {text}"),
        })
        .collect())
}

async fn resource_block(
    context: &dyn McpContext,
    index: usize,
    resource: &RunBodyResource,
) -> Result<String, ApiError> {
    let text = context
        .read_resource(&resource.server, &resource.uri)
        .await
        .map_err(|error| {
            let field = format!("resources[{index}]");
            ApiError::bad_request(
                "resource_unreadable",
                format!(
                    "{field}: cannot read {} of MCP server {}: {error}",
                    resource.uri, resource.server
                ),
            )
            .with_details(json!({"field": field}))
        })?;
    Ok(format!(
        "<resource server={} uri={}>\n{text}\n</resource>",
        json!(resource.server),
        json!(resource.uri)
    ))
}
