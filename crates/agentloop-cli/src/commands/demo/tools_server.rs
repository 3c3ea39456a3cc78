//! `agentloop demo-tools`: the MCP server of `agentloop demo`, over stdio. It is built into the
//! binary so that the demo needs nothing else (no Node.js, no network), and offers two tools
//! with the names and arguments of the reference server `everything` that
//! `examples/agentloop.toml` starts: `get-sum` and `echo`.

use std::sync::Arc;

use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
        JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig,
        Tool, ToolAnnotations,
    },
    service::RequestContext,
};
use serde_json::{Value, json};

/// Serves the demo tools on stdin and stdout until the client goes away.
pub async fn serve() -> anyhow::Result<std::process::ExitCode> {
    let running = DemoTools.serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(std::process::ExitCode::SUCCESS)
}

#[derive(Debug, Clone, Copy)]
struct DemoTools;

fn schema(value: Value) -> Arc<JsonObject> {
    match value {
        Value::Object(object) => Arc::new(object),
        _ => Arc::new(JsonObject::new()),
    }
}

fn tools() -> Vec<Tool> {
    let read_only = ToolAnnotations::new().read_only(true);
    vec![
        Tool::new(
            "get-sum",
            "Returns the sum of two numbers",
            schema(json!({
                "type": "object",
                "properties": {
                    "a": {"type": "number", "description": "First number"},
                    "b": {"type": "number", "description": "Second number"}
                },
                "required": ["a", "b"]
            })),
        )
        .with_annotations(read_only.clone()),
        Tool::new(
            "echo",
            "Echoes back the input",
            schema(json!({
                "type": "object",
                "properties": {"message": {"type": "string", "description": "Message to echo"}},
                "required": ["message"]
            })),
        )
        .with_annotations(read_only),
    ]
}

fn call(name: &str, arguments: &JsonObject) -> CallToolResult {
    let text = |text: String| CallToolResult::success(vec![ContentBlock::text(text)]);
    match name {
        "get-sum" => {
            let number = |key: &str| arguments.get(key).and_then(Value::as_f64);
            match (number("a"), number("b")) {
                (Some(a), Some(b)) => text(format!("The sum of {a} and {b} is {}.", a + b)),
                _ => CallToolResult::error(vec![ContentBlock::text("a and b must be numbers")]),
            }
        }
        "echo" => match arguments.get("message").and_then(Value::as_str) {
            Some(message) => text(format!("Echo: {message}")),
            None => CallToolResult::error(vec![ContentBlock::text("message must be a string")]),
        },
        other => CallToolResult::error(vec![ContentBlock::text(format!("no tool {other}"))]),
    }
}

impl ServerHandler for DemoTools {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build()).with_server_info(
            Implementation::new("agentloop-demo-tools", env!("CARGO_PKG_VERSION")),
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.clone().unwrap_or_default();
        Ok(CallToolResponse::Complete(call(&request.name, &arguments)))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        tools().into_iter().find(|tool| tool.name == name)
    }
}
