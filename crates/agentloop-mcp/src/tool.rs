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
    /// The tool's `outputSchema`, compiled: a structured result that does not fit it fails the
    /// call. `None` without one, or when it does not compile (said once, in the log).
    output: Option<jsonschema::Validator>,
    /// Shared with the source and the server's other tools: after a new HTTP session, tools
    /// listed before it still reach the server.
    connection: Arc<Connection>,
}

impl McpTool {
    pub(crate) fn new(tool: &rmcp::model::Tool, connection: Arc<Connection>) -> Self {
        let info = tool_info(connection.server(), tool);
        let output = info.output_schema.as_ref().and_then(|schema| {
            jsonschema::validator_for(schema)
                .inspect_err(|error| {
                    tracing::warn!(tool = %info.name, %error,
                        "the output schema of the MCP tool does not compile; its structured \
                         results are not checked");
                })
                .ok()
        });
        Self {
            info,
            remote_name: tool.name.to_string(),
            output,
            connection,
        }
    }

    /// A structured result that does not fit the tool's `outputSchema` is a tool error the model
    /// reads (MCP: clients should validate it). A result without one is left as it is: its
    /// text still says what happened.
    fn check_output(&self, output: ToolOutput) -> Result<ToolOutput, ToolError> {
        let (Some(validator), Some(structured)) = (&self.output, &output.structured) else {
            return Ok(output);
        };
        let problems: Vec<String> = validator
            .iter_errors(structured)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("at {path}: {error}")
                }
            })
            .collect();
        if problems.is_empty() {
            return Ok(output);
        }
        Err(ToolError::Failed(format!(
            "the tool's structured result does not match its output schema: {}",
            problems.join("; ")
        )))
    }
}

fn tool_info(server: &str, tool: &rmcp::model::Tool) -> ToolInfo {
    let annotations = tool.annotations.as_ref();
    let title = tool
        .title
        .clone()
        .or_else(|| annotations.and_then(|annotations| annotations.title.clone()));
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
        open_world_hint: annotations.and_then(|annotations| annotations.open_world_hint),
        title,
        output_schema: tool
            .output_schema
            .as_ref()
            .map(|schema| Value::Object(schema.as_ref().clone())),
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
        // Takes the server's questions and sampling requests while it runs.
        let _in_flight = self
            .connection
            .notices()
            .calls
            .enter(context.run_id, context.asks.clone());
        let call =
            self.connection
                .call_tool(&self.remote_name, arguments, Some(meta), context.progress);
        let output = match self.connection.max_duration() {
            // Dropped at the limit, the call tells the server it is cancelled.
            Some(limit) => tokio::time::timeout(limit, call).await.map_err(|_| {
                ToolError::Failed(format!(
                    "the call took longer than mcp_servers.{server}.max_duration_s ({} s) \
                     allows; agentloop cancelled it",
                    limit.as_secs_f64(),
                    server = self.connection.server(),
                ))
            })?,
            None => call.await,
        }?;
        self.check_output(output)
    }
}
