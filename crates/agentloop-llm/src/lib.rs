//! The LLM clients, each an [`agentloop_core::Llm`] over HTTP that streams text and tool calls
//! and retries rate limits, server errors and broken connections: [`OpenAiClient`] (Chat
//! Completions, any compatible server), [`ResponsesClient`] (OpenAI's Responses API) and
//! [`AnthropicClient`] (Anthropic's Messages API). [`client_for`] builds the one `[llm] provider`
//! names ([`client_for_with_origin`] also says where `base_url` came from, for the error about a
//! server that does not speak the provider's API). [`JsonToolCalling`] wraps any `Llm` for
//! models without tool calling. [`ScriptedModel`] answers from a script, with no server
//! (`provider = "scripted"`); [`cassette`] records a session's exchanges and replays them.

mod anthropic;
mod attachments;
pub mod cassette;
mod client;
mod completion;
mod config;
mod exchange;
mod json_planner;
mod not_openai;
mod offline;
mod pools;
mod provider;
mod responses;
mod retry;
pub mod scripted;
mod stream;
mod tokens;
mod transport;
mod wire;

pub use anthropic::{ANTHROPIC_VERSION, AnthropicClient};
pub use client::OpenAiClient;
pub use config::{
    ANTHROPIC_API_KEY_ENV, DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_API_KEY_ENV, LlmConfig, Provider,
    Tokenizer, ToolCalling,
};
pub use json_planner::JsonToolCalling;
pub use provider::{client_for, client_for_with_origin};
pub use responses::ResponsesClient;
pub use scripted::ScriptedModel;
#[cfg(feature = "tiktoken")]
pub use tokens::TiktokenCounter;
pub use tokens::{ClaudeTokens, token_counter, token_counter_for};
