//! One tool of an MCP server, as an agentloop [`Tool`].

use std::sync::Arc;

use agentloop_core::{Tool, ToolContext, ToolError, ToolInfo, ToolOutput};
use async_trait::async_trait;
use rmcp::model::JsonObject;
use serde_json::Value;

use crate::connection::Connection;

/// The `_meta` key of a `tools/call` request that carries the call's idempotency key
/// ([`ToolContext::idempotency_key`]).
pub const IDEMPOTENCY_KEY_META: &str = "agentloop/idempotency-key";

/// The `_meta` key of a `tools/call` request that carries the W3C `traceparent` of the call's
/// span (MCP SEP-414), when traces are exported.
pub const TRACEPARENT_META: &str = "traceparent";

pub(crate) struct McpTool {
    info: ToolInfo,
    /// The name the server knows the tool by, without the `server.` namespace.
    remote_name: String,
    /// Shared with the source and the server's other tools: after a new HTTP session, tools
    /// listed before it still reach the server.
    connection: Arc<Connection>,
}

impl McpTool {
    pub(crate) fn new(tool: &rmcp::model::Tool, connection: Arc<Connection>) -> Self {
        Self {
            info: tool_info(connection.server(), tool),
            remote_name: tool.name.to_string(),
            connection,
        }
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
        idempotent_hint: annotations.and_then(|annotations| annotations.idempotent_hint),
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

    /// The call carries the run's idempotency key for it in `_meta` ([`IDEMPOTENCY_KEY_META`]):
    /// the same key when a call cut off by a crash runs again, so a server can deduplicate.
    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let arguments = match arguments {
            Value::Object(arguments) => Some(arguments),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArguments(format!(
                    "the arguments must be a JSON object, not {other}"
                )));
            }
        };
        let mut meta = JsonObject::new();
        meta.insert(
            IDEMPOTENCY_KEY_META.to_owned(),
            Value::String(context.idempotency_key()),
        );
        // The call's span (MCP SEP-414); over HTTP it also goes as the `traceparent` header.
        if let Some(traceparent) = context.traceparent {
            meta.insert(TRACEPARENT_META.to_owned(), Value::String(traceparent));
        }
        self.connection
            .call_tool(&self.remote_name, arguments, Some(meta))
            .await
    }
}
