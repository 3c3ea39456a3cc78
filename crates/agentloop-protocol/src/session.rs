use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{ChatMessage, ErrorCode, FinalizeReason, RunStatus, Usage};

/// What a stored message is to the conversation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MessageKind {
    /// A user question or an assistant answer: what a person reads.
    Dialogue,
    /// An assistant turn that asked for tool calls.
    ToolCall,
    /// The result of one tool call.
    ToolResult,
    /// The execution trace of a run (a system message, never sent back to the model).
    Trace,
    /// A system note added during a run (side effects, clarifications).
    Note,
    /// An answer a guardrail refused, or the note that told the model why: kept in the
    /// session, never read back to the model by a later run.
    Blocked,
}

impl MessageKind {
    pub fn as_str(self) -> &'static str {
        match self {
            MessageKind::Dialogue => "dialogue",
            MessageKind::ToolCall => "tool_call",
            MessageKind::ToolResult => "tool_result",
            MessageKind::Trace => "trace",
            MessageKind::Note => "note",
            MessageKind::Blocked => "blocked",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            MessageKind::Dialogue,
            MessageKind::ToolCall,
            MessageKind::ToolResult,
            MessageKind::Trace,
            MessageKind::Note,
            MessageKind::Blocked,
        ]
        .into_iter()
        .find(|kind| kind.as_str() == text)
    }
}

/// A message of a session, as the store keeps it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionMessage {
    pub id: Uuid,
    pub session_id: Uuid,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<Uuid>,
    pub kind: MessageKind,
    #[serde(flatten)]
    pub message: ChatMessage,
    /// The execution trace and documents of a trace message; free-form otherwise.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub metadata: Value,
    pub created_at: DateTime<Utc>,
    /// The run that replaced this message (the AI SDK's regenerate): a superseded message is
    /// kept, but no longer part of the conversation the model or a listing sees. `None` for the
    /// session's current messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub superseded_by_run: Option<Uuid>,
}

/// A session: one conversation of one user.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionInfo {
    pub id: Uuid,
    pub user_id: String,
    /// The first question, shortened.
    pub title: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub message_count: u64,
    /// The run holding the session right now, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_run_id: Option<Uuid>,
}

/// A run as the store knows it: where it stands or how it ended.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunInfo {
    pub id: Uuid,
    pub session_id: Uuid,
    pub user_id: String,
    pub query: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    pub iterations: u32,
    pub tools_used: u32,
    pub usage: Usage,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finalize_reason: Option<FinalizeReason>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answer_message_id: Option<Uuid>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<ErrorCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_message: Option<String>,
    /// The typed answer of a run with an output schema, valid against it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    pub save_chat: bool,
    pub started_at: DateTime<Utc>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<DateTime<Utc>>,
    /// When the run's events and checkpoint were deleted by `[store.retention]` (its row, its
    /// tool call records and its session's messages stay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pruned_at: Option<DateTime<Utc>>,
}
