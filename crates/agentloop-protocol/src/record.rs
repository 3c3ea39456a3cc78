use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How a tool call ended.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolStatus {
    /// The tool ran and returned a result.
    Success,
    /// The call failed: unknown tool, invalid arguments, timeout, or the tool reported an error.
    Error,
    /// A policy refused the call; the tool never ran.
    Blocked,
    /// The call was not executed because it repeated an earlier one.
    Skipped,
}

impl ToolStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolStatus::Success => "success",
            ToolStatus::Error => "error",
            ToolStatus::Blocked => "blocked",
            ToolStatus::Skipped => "skipped",
        }
    }
}

/// The full account of one tool call: what was asked, how it ended, and the whole output (the
/// model may have seen only a bounded part of it).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolExecutionRecord {
    pub call_id: String,
    pub iteration: u32,
    /// Internal tool name (`server.tool`), or the name the model used when it matched no tool.
    pub tool: String,
    /// The arguments as parsed JSON, or the raw text when the model sent something unparseable.
    pub arguments: Value,
    pub started_at: DateTime<Utc>,
    pub duration_ms: u64,
    pub status: ToolStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_result: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What the call cost in USD, when the tool reported it (MCP result
    /// `_meta["agentloop/cost_usd"]`, a sub-agent's LLM calls).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
    /// What the tool's MCP server logged while the call ran (`notifications/message`), when it
    /// was the server's only call in flight.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub logs: Vec<ToolLog>,
}

/// One log message of a call's MCP server (`notifications/message`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolLog {
    /// `debug`, `info`, `notice`, `warning`, `error`, `critical`, `alert` or `emergency`.
    pub level: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// The message's `data`: its text, or its JSON.
    pub message: String,
}
