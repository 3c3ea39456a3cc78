//! One tool of an MCP server, as an agentloop [`Tool`].

use std::sync::Arc;

use agentloop_core::{Tool, ToolContext, ToolError, ToolInfo, ToolOutput};
use async_trait::async_trait;
use rmcp::{
    Peer, RoleClient, ServiceError,
    model::{CallToolRequestParams, CallToolResponse},
};
use serde_json::Value;

use crate::{lifeline::Lifeline, result::tool_output};

pub(crate) struct McpTool {
    info: ToolInfo,
    /// The name the server knows the tool by, without the `server.` namespace.
    remote_name: String,
    peer: Peer<RoleClient>,
    lifeline: Arc<Lifeline>,
}

impl McpTool {
    pub(crate) fn new(
        tool: &rmcp::model::Tool,
        peer: Peer<RoleClient>,
        lifeline: Arc<Lifeline>,
    ) -> Self {
        Self {
            info: tool_info(lifeline.server(), tool),
            remote_name: tool.name.to_string(),
            peer,
            lifeline,
        }
    }

    async fn unavailable(&self) -> ToolError {
        ToolError::Unavailable(self.lifeline.unavailable_message().await)
    }
}

fn tool_info(server: &str, tool: &rmcp::model::Tool) -> ToolInfo {
    let annotations = tool.annotations.as_ref();
    let description = tool
        .description
        .as_deref()
        .map(str::to_owned)
        .or_else(|| tool.title.clone())
        .or_else(|| annotations.and_then(|annotations| annotations.title.clone()))
        .unwrap_or_default();
    ToolInfo {
        name: format!("{server}.{}", tool.name),
        description,
        input_schema: Value::Object(tool.input_schema.as_ref().clone()),
        read_only_hint: annotations.and_then(|annotations| annotations.read_only_hint),
        destructive_hint: annotations.and_then(|annotations| annotations.destructive_hint),
    }
}

#[async_trait]
impl Tool for McpTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    /// rmcp multiplexes requests over one connection, so calls need not wait for each other.
    fn supports_parallel(&self) -> bool {
        true
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be a JSON object, not {other}"
                )));
            }
        };
        if !self.lifeline.is_running() {
            return Err(self.unavailable().await);
        }
        let mut params = CallToolRequestParams::new(self.remote_name.clone());
        params.arguments = arguments;

        // rmcp only fails pending requests after its service loop has wound down, which can take
        // seconds; the lifeline knows the moment the server's output closes.
        let response = tokio::select! {
            response = self.peer.call_tool_once(params) => response,
            () = self.lifeline.stopped() => return Err(self.unavailable().await),
        };
        match response {
            Ok(CallToolResponse::Complete(result)) => tool_output(result),
            Ok(CallToolResponse::InputRequired(_)) => Err(ToolError::Failed(
                "the MCP server asked for more input from the user, which agentloop does not \
                 support yet"
                    .to_owned(),
            )),
            Ok(CallToolResponse::Task(_)) => Err(ToolError::Failed(
                "the MCP server answered with a task to poll, which agentloop does not support yet"
                    .to_owned(),
            )),
            Ok(_) => Err(ToolError::Failed(
                "the MCP server answered with a kind of result agentloop does not know".to_owned(),
            )),
            Err(ServiceError::McpError(error)) => {
                Err(ToolError::Failed(error.message.into_owned()))
            }
            Err(_) if !self.lifeline.is_running() => Err(self.unavailable().await),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                Err(self.unavailable().await)
            }
            Err(error) => Err(ToolError::Failed(format!(
                "the call to MCP server '{}' failed: {error}",
                self.lifeline.server()
            ))),
        }
    }
}
