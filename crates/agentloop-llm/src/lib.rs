//! OpenAI-compatible Chat Completions client: [`OpenAiClient`] implements
//! [`agentloop_core::Llm`] over HTTP, streaming text and tool-call deltas, and retrying rate
//! limits, server errors and broken connections.

mod client;
mod completion;
mod config;
mod exchange;
mod retry;
mod stream;
mod tokens;
mod wire;

pub use client::OpenAiClient;
pub use config::{DEFAULT_API_KEY_ENV, LlmConfig};
pub use tokens::{TiktokenCounter, token_counter_for};
