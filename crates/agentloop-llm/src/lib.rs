//! OpenAI-compatible Chat Completions client: [`OpenAiClient`] implements
//! [`agentloop_core::Llm`] over HTTP, streaming text and tool-call deltas, and retrying rate
//! limits, server errors and broken connections. [`JsonToolCalling`] wraps any `Llm` for models
//! without tool calling.

mod client;
mod completion;
mod config;
mod exchange;
mod json_planner;
mod not_openai;
mod retry;
mod stream;
mod tokens;
mod wire;

pub use client::OpenAiClient;
pub use config::{DEFAULT_API_KEY_ENV, LlmConfig, ToolCalling};
pub use json_planner::JsonToolCalling;
pub use tokens::{TiktokenCounter, token_counter_for};
