//! agentloop: turns any tool-calling LLM into a dependable copilot agent.
//!
//! This crate puts the pieces together: [`Config`] reads `agentloop.toml`, and [`Runtime`]
//! starts the MCP servers it names and builds an [`Agent`] on an OpenAI-compatible LLM. Runs are
//! consumed as a `Stream` of [`Event`]s.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use agentloop::{Config, RunRequest, Runtime};
//! use futures::StreamExt;
//!
//! let (config, _origin) = Config::load(None)?;
//! let runtime = Runtime::start(&config).await?;
//! let mut run = runtime.agent().run(RunRequest::new("What is 6 x 7?"));
//! while let Some(event) = run.next().await {
//!     println!("{}", serde_json::to_string(&event)?);
//! }
//! # Ok(()) }
//! ```

mod a2a_agents;
mod config;
pub mod guardrails;
#[cfg(feature = "server")]
mod mcp_context;
mod oauth;
mod pruner;
mod runtime;
mod side_effects;
pub mod telemetry;

pub use a2a_agents::{A2aAgentConfig, RemoteAgent};
pub use agentloop_core::protocol::{
    Attachment, ChatMessage, ErrorCode, Event, EventKind, FinalizeReason, MessageKind, Role,
    RunInfo, RunStatus, SessionInfo, SessionMessage, ToolCall, ToolExecutionRecord, ToolLog,
    ToolStatus, Usage,
};
pub use agentloop_core::{
    Agent, AgentBuilder, AgentError, AgentSettings, CatalogEntry, EventSink, FnTool, KeyStore, Llm,
    LlmError, ModelReply, ModelRequest, MutationRate, OutputMode, OutputSpec, PolicySettings,
    RunContext, RunFailure, RunHandle, RunOutcome, RunRequest, Store, StoreError, Telemetry, Tool,
    ToolCatalog, ToolContext, ToolError, ToolInfo, ToolOutput, ToolSettings, ToolSource,
    TypedRunError, TypedRunHandle, WorkflowSettings,
};
pub use agentloop_llm::{
    AnthropicClient, LlmConfig, OpenAiClient, Provider, ResponsesClient, ScriptedModel,
};
pub use agentloop_mcp::{McpServerConfig, McpSource};
#[cfg(feature = "server")]
pub use agentloop_server::ServerConfig;
pub use agentloop_store::{Pruned, Retention, SqlStore, StoreConfig};
pub use config::{Config, ConfigError, ConfigOrigin, DEFAULT_CONFIG_FILE, SettingOrigin};
pub use oauth::oauth_context;
pub use runtime::{Runtime, RuntimeError};
pub use side_effects::WebhookSideEffects;

/// The pieces, for callers that need more than the facade.
pub use agentloop_core as core;
pub use agentloop_llm as llm;
pub use agentloop_mcp as mcp;
#[cfg(feature = "server")]
pub use agentloop_server as server;
pub use agentloop_store as store;
