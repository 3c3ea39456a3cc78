//! `mcp.read_resource {server, uri}`: the model reads a resource of an MCP server (one a server
//! lists, or one a tool's result links). Offered only while some server offers resources; a tool
//! like any other for policies, workflows and sub-agents' allowlists.

use std::sync::{Arc, Mutex, MutexGuard};

use agentloop_core::{Tool, ToolContext, ToolError, ToolInfo, ToolOutput, ToolSource};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::watch;

use crate::McpSource;

/// The namespace of agentloop's own MCP tools: `mcp.read_resource`. No server may take it.
pub const READ_RESOURCE_SOURCE: &str = "mcp";

/// The source of `mcp.read_resource` over the servers it is given (and those that join later:
/// [`ReadResource::joined`]).
pub struct ReadResource {
    servers: Arc<Mutex<Vec<Arc<McpSource>>>>,
    changes: watch::Sender<u64>,
}

impl ReadResource {
    pub fn new(servers: Arc<Mutex<Vec<Arc<McpSource>>>>) -> Self {
        Self {
            servers,
            changes: watch::Sender::new(0),
        }
    }

    /// A server joined the list: the tool may be offered now, or name it.
    pub fn joined(&self) {
        self.changes
            .send_modify(|count| *count = count.wrapping_add(1));
    }

    fn servers(&self) -> Vec<Arc<McpSource>> {
        lock(&self.servers).clone()
    }
}

fn lock(servers: &Mutex<Vec<Arc<McpSource>>>) -> MutexGuard<'_, Vec<Arc<McpSource>>> {
    // Servers are only pushed whole.
    servers
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[async_trait]
impl ToolSource for ReadResource {
    fn name(&self) -> &str {
        READ_RESOURCE_SOURCE
    }

    /// The tool, naming the servers that offer resources; none when no server does.
    async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError> {
        let mut offering = Vec::new();
        for server in self.servers() {
            if server.offers_resources().await {
                offering.push(server);
            }
        }
        if offering.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![Arc::new(ReadResourceTool::new(offering))])
    }

    fn changes(&self) -> Option<watch::Receiver<u64>> {
        Some(self.changes.subscribe())
    }
}

struct ReadResourceTool {
    info: ToolInfo,
    servers: Vec<Arc<McpSource>>,
}

impl ReadResourceTool {
    fn new(servers: Vec<Arc<McpSource>>) -> Self {
        let names: Vec<&str> = servers.iter().map(|server| server.name()).collect();
        let schema = json!({
            "type": "object",
            "properties": {
                "server": {
                    "type": "string",
                    "enum": names,
                    "description": "The MCP server that has the resource"
                },
                "uri": {
                    "type": "string",
                    "description": "The resource's URI, as the server lists it or a tool's \
                                    result links it"
                }
            },
            "required": ["server", "uri"],
            "additionalProperties": false
        });
        let description = format!(
            "Reads a resource of an MCP server (a file, a record, a document) by its URI: one a \
             server lists, or one a tool's result links ([resource link: URI]). Servers with \
             resources: {}.",
            names.join(", ")
        );
        let info = ToolInfo::new(
            format!("{READ_RESOURCE_SOURCE}.read_resource"),
            description,
            schema,
        )
        .read_only(true)
        .idempotent(true);
        Self { info, servers }
    }
}

#[async_trait]
impl Tool for ReadResourceTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, arguments: Value, _context: ToolContext) -> Result<ToolOutput, ToolError> {
        let server = arguments["server"].as_str().unwrap_or_default();
        let uri = arguments["uri"].as_str().unwrap_or_default();
        let Some(source) = self.servers.iter().find(|source| source.name() == server) else {
            return Err(ToolError::InvalidArguments(format!(
                "no MCP server {server:?} offers resources"
            )));
        };
        let contents = source.read_resource(uri).await?;
        if contents.is_empty() {
            return Err(ToolError::Failed(format!("the resource {uri} is empty")));
        }
        let text: Vec<String> = contents.iter().map(|content| content.as_text()).collect();
        Ok(ToolOutput::text(text.join("\n")))
    }
}
