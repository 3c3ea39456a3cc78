//! MCP tool sources: agentloop's bridge to MCP servers, through the official `rmcp` crate.
//!
//! Each `[mcp_servers.NAME]` table of `agentloop.toml` becomes an [`McpServerConfig`];
//! [`McpSource::connect`] starts the server as a child process speaking MCP over stdio, or
//! connects to it over streamable HTTP, and offers its tools to the loop as `NAME.tool`. When
//! the server changes its tools, [`agentloop_core::ToolSource::changes`] moves. A server that
//! stops is restarted with backoff (a new HTTP session is opened once it answers again), and
//! [`agentloop_core::ToolSource::status`] says how it is doing. `rmcp` stays
//! behind these types: it has broken its API across major versions, and no other crate should
//! have to follow it.

mod client;
mod config;
mod connection;
mod elicit;
mod error;
mod http;
mod http_client;
mod http_failure;
mod http_limit;
mod in_flight;
mod lifeline;
mod line_limit;
mod message_limit;
mod notices;
pub mod oauth;
mod offer;
mod process;
mod read_resource;
mod resources;
mod result;
mod sampling;
mod source;
mod stderr;
mod stdio;
mod supervisor;
mod tool;
mod top_level;

pub use config::{ElicitationPolicy, McpServerConfig, SamplingPolicy};
pub use error::McpError;
pub use message_limit::MAX_MESSAGE_BYTES;
pub use read_resource::{READ_RESOURCE_SOURCE, ReadResource};
pub use resources::{
    McpPrompt, McpPromptArgument, McpPromptMessage, McpPromptRole, McpResource, McpResourceContent,
    McpResourceTemplate,
};
pub use result::COST_META_KEY;
pub use source::{McpSource, connect_all};
pub use tool::{IDEMPOTENCY_KEY_META, TRACEPARENT_META};
