//! Client tools: tools a run's client declares and runs itself (AG-UI's frontend tools, run in
//! the browser). The model is offered them like any other tool; a call to one is never run by
//! the driver: it pauses the run like a call that needs approval (`PendingCall.client`), and the
//! client's answer carries the call's result (`InputAnswer.results`), which the model reads as
//! the tool's output.
//!
//! They belong to one run: its input keeps them (so a paused or adopted run still has them),
//! and its machine offers the agent's catalog with them added ([`ToolCatalog::with_client_tools`]).

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::{Tool, ToolContext, ToolError, ToolInfo, ToolOutput};

/// A tool the client declared for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClientTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object (an empty object schema when the client gave none).
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
}

impl ClientTool {
    pub fn new(name: impl Into<String>, description: impl Into<String>, parameters: Value) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            parameters,
        }
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// A client tool as the catalog holds it: it declares the tool and is never called (the
/// machine resolves its calls with the client's results).
pub(crate) struct ClientToolStub {
    info: ToolInfo,
}

impl ClientToolStub {
    /// Client tools act in the client, not on the server's data: agentloop's policies
    /// (read-only runs, workflow allowlists, rate limits) guard the server's tools and leave
    /// them be (`policy_refusal`); they are declared read-only.
    pub(crate) fn new(tool: &ClientTool) -> Self {
        let parameters = match &tool.parameters {
            Value::Object(_) => tool.parameters.clone(),
            _ => empty_object_schema(),
        };
        Self {
            info: ToolInfo::new(tool.name.clone(), tool.description.clone(), parameters)
                .read_only(true),
        }
    }
}

#[async_trait]
impl Tool for ClientToolStub {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(
        &self,
        _arguments: Value,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Err(ToolError::Unavailable(format!(
            "{} runs in the client; its result comes with the client's answer",
            self.info.name
        )))
    }
}
