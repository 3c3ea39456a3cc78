//! The wire types of agentloop.
//!
//! Everything here is plain serde data shared by the core loop, the store, the HTTP server, the
//! CLI and the web panel: chat messages, tool execution records and the typed run events of
//! DESIGN §6. No behaviour lives here.

mod attachment;
mod elicitation;
mod error_code;
mod event;
mod guardrail;
mod message;
mod output;
mod plan;
mod record;
mod session;
mod source;

pub use attachment::Attachment;
pub use elicitation::{
    Elicitation, ElicitationAction, ElicitationAnswer, ElicitationMode, ElicitationPurpose,
};
pub use error_code::ErrorCode;
pub use event::{
    Event, EventKind, FinalizeReason, InputAnswer, InputKind, InputRequest, LlmCallPurpose,
    PendingCall, ResumeReason, RunStatus, Usage,
};
pub use guardrail::{GuardrailAction, GuardrailSide};
pub use message::{ChatMessage, Role, ToolCall};
pub use output::{OutputMode, OutputSpec, is_valid_output_name};
pub use plan::{Plan, SubTask, SubTaskStatus};
pub use record::{ToolExecutionRecord, ToolLog, ToolStatus};
pub use session::{MessageKind, RunInfo, SessionInfo, SessionMessage};
pub use source::{SourceHealth, SourceState, SourceStatus, SourceTransport};
