//! agentloop-core: the agent loop as a state machine with no I/O, the tool pipeline, and the
//! thin async driver that runs it against the [`Llm`] and [`Tool`] traits.
//!
//! ```no_run
//! # async fn demo(llm: std::sync::Arc<dyn agentloop_core::Llm>) -> Result<(), agentloop_core::AgentError> {
//! use agentloop_core::{Agent, RunRequest};
//! use futures::StreamExt;
//!
//! let agent = Agent::builder().llm(llm).build().await?;
//! let mut run = agent.run(RunRequest::new("What is 6 x 7?"));
//! while let Some(event) = run.next().await {
//!     println!("{}", serde_json::to_string(&event).unwrap_or_default());
//! }
//! # Ok(()) }
//! ```

mod agent;
mod asking;
pub mod attachments;
mod canonical;
mod catalog;
mod client_tool;
mod clock;
pub mod cost;
mod descriptions;
mod driver;
pub mod durability;
mod emitter;
pub mod guardrail;
mod hooks;
mod invalid;
mod json_text;
mod lease;
mod llm;
pub mod machine;
mod names;
mod oauth_tokens;
pub mod output;
mod partial_json;
mod policy;
mod push_outbox;
mod registry;
mod resources;
mod session_resume;
mod session_run;
mod settings;
mod steering;
mod step_writer;
mod store;
mod subagent;
mod telemetry;
mod tokens;
mod tool;
pub mod trace;
mod typed_run;

pub use agent::{Agent, AgentBuilder, AgentError, RunHandle, RunRequest};
pub use agentloop_protocol as protocol;
pub use agentloop_protocol::ErrorCode;
pub use asking::{
    AnswerError, CallAsks, Question, QuestionBoard, SamplingRefused, SamplingRequest, fill_in,
};
pub use canonical::canonical_json;
pub use catalog::{CatalogEntry, SchemaViolations, ToolCatalog};
pub use client_tool::ClientTool;
pub use clock::{Clock, SystemClock};
pub use cost::{InvalidPrice, Price, PriceTable, Pricing};
pub use descriptions::parse_tool_descriptions;
pub use driver::{InputLog, RunServices, drive, drive_from};
pub use emitter::{Emitter, EventSink};
pub use hooks::{BeforeCall, CompletedCall, SideEffect, SideEffectError, ToolHook};
pub use json_text::{ObjectError, extract_object, find_object};
pub use llm::{
    CallPurpose, Llm, LlmError, ModelReply, ModelRequest, OutputFormat, TextSink, ToolChoice,
    ToolSpec,
};
pub use machine::text::is_tool_error_message;
pub use machine::{
    CallRefusal, Handled, Input, InputAnswer, InvalidAnswer, MachineChanges, OtherStateVersion,
    RunContext, RunFailure, RunInput, RunMachine, RunOutcome, RunProgress, RunState, Step,
    UnreadableState,
};
pub use names::sanitize as provider_safe_name;
pub use oauth_tokens::OAuthTokenStore;
pub use output::{OutputMode, OutputSpec, TypedOutput};
pub use partial_json::parse_partial;
pub use policy::DEFAULT_USER;
pub use policy::{
    MutationLimiter, MutationRate, PolicySettings, Refusal, RunPolicy, UnknownWorkflow,
    WorkflowSettings,
};
pub use push_outbox::{PushDelivery, PushOutbox, PushTarget};
pub use registry::{SourceLeftOut, ToolRegistry};
pub use resources::short_of_resources;
pub use session_resume::{CorruptRun, ResumeError, Resumed};
pub use session_run::{BegunRun, StartError};
pub use settings::{
    AgentSettings, Budget, InvalidSetting, PlanningSettings, ReviewSettings, ToolSettings,
    UnknownOutcome,
};
pub use steering::{SteerError, SteeringBoard};
pub use step_writer::Persistence;
pub use store::{
    ApiKeyInfo, Checkpoint, ErrorSource, Instance, InstanceKind, KeyStore, MissingSession,
    NewApiKey, NewRun, NewSession, OrphanRun, RunBegin, RunEnd, RunStart, SESSION_LEASE, SavedRun,
    SessionCursor, SessionLock, StepRecord, Store, StoreError, Supersede,
};
pub use subagent::{AGENT_TOOL_PREFIX, SubAgentSettings};
pub use telemetry::{LlmCallReport, NoTelemetry, Telemetry};
pub use tokens::{EstimatedTokens, TokenCounter, message_tokens};
pub use tool::{
    FnTool, Tool, ToolContext, ToolError, ToolInfo, ToolOutput, ToolProgress, ToolSource,
};
pub use trace::{NoTracer, RunTrace, Tracer};
pub use typed_run::{TypedRunError, TypedRunHandle, output_spec_for, typed_value};
