//! The model side of a run: what the loop asks an LLM and what it reads back.

use std::sync::Arc;

use agentloop_protocol::{ChatMessage, ErrorCode, ToolCall, Usage};
use async_trait::async_trait;

use crate::invalid::InvalidSetting;
use serde_json::Value;

/// Whether the model may call tools in this reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    /// Used for the forced summary: the model must answer in text.
    None,
}

/// Why the loop makes this call; decides how streamed text is reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallPurpose {
    /// A normal iteration: the reply may be tool calls or the answer.
    Step,
    /// The forced summary: the reply is the answer.
    Finalize,
    /// The planning phase: the reply is a plan in JSON, not shown to the user.
    Plan,
    /// A review of the progress: the reply is a JSON verdict, not shown to the user.
    Review,
    /// An `llm` guardrail's verdict on a question or an answer, not shown to the user.
    Guardrail,
    /// An MCP server's sampling request, answered for one of the run's tool calls; not
    /// shown to the user.
    Sampling,
}

/// A tool as offered to the model, under its provider-safe name. The schema is shared: it is
/// offered on every call of every run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: Arc<Value>,
}

/// One Chat Completions call. Tool names in `messages` and `tools` are already provider-safe.
#[derive(Debug, Clone)]
pub struct ModelRequest {
    /// Overrides the configured model for this call.
    pub model: Option<String>,
    /// Shared with the run's own view of the conversation, so a call does not copy it.
    pub messages: Vec<Arc<ChatMessage>>,
    /// Shared with the catalog, so a call does not copy the tools' names and descriptions.
    pub tools: Vec<Arc<ToolSpec>>,
    pub tool_choice: ToolChoice,
    pub purpose: CallPurpose,
    /// Set when this call's text may be the run's typed answer (runs with an output schema).
    pub output: Option<OutputFormat>,
}

/// How a call asks for the run's typed answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputFormat {
    pub spec: Arc<agentloop_protocol::OutputSpec>,
    /// Ask the provider's structured output for this call's text (`response_format`,
    /// `text.format`, Anthropic's `output_config.format`). Only ever set on a call that offers
    /// no tools: a format on a turn that may call tools stops tool calling on some servers.
    pub native: bool,
}

impl ModelRequest {
    /// The schema the provider must hold this call's text to, when the call asks for it.
    pub fn native_output(&self) -> Option<&agentloop_protocol::OutputSpec> {
        self.output
            .as_ref()
            .filter(|output| output.native && self.tools.is_empty())
            .map(|output| output.spec.as_ref())
    }
}

/// What the model answered. Tool call names are as the model wrote them (provider-safe).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelReply {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub finish_reason: Option<String>,
    pub usage: Option<Usage>,
    /// The model that answered, as the provider names it (often a dated snapshot of the one
    /// asked for); it names the call's price.
    pub model: Option<String>,
    /// The provider's id of this reply (`chatcmpl-...`, `msg_...`, `resp_...`), for the
    /// call's span (`gen_ai.response.id`).
    pub id: Option<String>,
}

impl ModelReply {
    /// The reply's text when it has any non-blank text.
    pub fn text(&self) -> Option<&str> {
        self.content
            .as_deref()
            .filter(|text| !text.trim().is_empty())
    }
}

/// Receives text as the model streams it.
pub type TextSink<'a> = &'a mut (dyn FnMut(&str) + Send);

/// An LLM that speaks in chat completions. Implementations retry what is worth retrying
/// themselves; an error returned here ends the run.
#[async_trait]
pub trait Llm: Send + Sync {
    /// Sends one request. Text is passed to `on_text` as it arrives (once, whole, when the
    /// implementation does not stream).
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError>;
}

/// Why an LLM call failed. The messages are written for the person running agentloop: they
/// say what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
    /// No connection could be made (refused): a wrong `base_url`, or a server that is not
    /// running.
    #[error(
        "cannot reach the LLM at {url} ({detail}). Point llm.base_url in agentloop.toml (or the \
         OPENAI_BASE_URL environment variable) at a running OpenAI-compatible server"
    )]
    Unreachable { url: String, detail: String },
    /// The LLM's host could not be resolved, or no network route leads to it: this machine is
    /// offline or has no DNS (or the host name is misspelt), which no server at `base_url` can
    /// fix.
    #[error(
        "cannot reach the LLM at {url}: no network, or no DNS answer for {host} ({detail}). \
         Check this machine's network connection and DNS, and the host name in llm.base_url"
    )]
    NoNetwork {
        url: String,
        host: String,
        detail: String,
    },
    /// The connection broke before an answer came (reset, closed before the status line).
    #[error(
        "cannot reach the LLM at {url} ({detail}). Point llm.base_url in agentloop.toml (or the \
         OPENAI_BASE_URL environment variable) at a running OpenAI-compatible server"
    )]
    ConnectionLost { url: String, detail: String },
    /// agentloop could not open a connection for lack of its own resources (file descriptors,
    /// local ports): the server may be fine; `detail` says what to raise.
    #[error("cannot open a connection to the LLM at {url}: {detail}")]
    NoConnection { url: String, detail: String },
    /// `key_env` is the variable the key was looked for in (`llm.api_key_env`, else the
    /// provider's own: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`); `base_url_env` the variable
    /// that overrides `llm.base_url` (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`).
    #[error(
        "no API key for {url}: set {key_env} (or the variable named by llm.api_key_env), or \
         point llm.base_url / {base_url_env} at a server that needs no key"
    )]
    MissingApiKey {
        url: String,
        key_env: String,
        base_url_env: String,
    },
    #[error(
        "the LLM at {url} refused the API key (HTTP {status}): {message}. Set {key_env} (or \
         the variable named by llm.api_key_env) to a valid key"
    )]
    Unauthorized {
        url: String,
        status: u16,
        message: String,
        key_env: String,
    },
    #[error("the LLM rejected the request (HTTP {status}): {message}")]
    Rejected { status: u16, message: String },
    #[error("the LLM is still rate limiting after {retries} retries (HTTP 429): {message}")]
    RateLimited { retries: u32, message: String },
    #[error("the LLM failed with HTTP {status} after {retries} retries: {message}")]
    Server {
        status: u16,
        retries: u32,
        message: String,
    },
    #[error("the LLM did not answer within {seconds} s (llm.timeout_s)")]
    Timeout { seconds: f64 },
    /// The stream ended in good order but without a `finish_reason`: the reply may miss text
    /// or half a tool call.
    #[error(
        "the LLM's reply was cut: the stream ended before the reply was complete (no \
         finish_reason was sent)"
    )]
    TruncatedStream,
    /// The LLM answered, then the connection broke inside the body (a stream cut mid-delta, a
    /// body shorter than its `Content-Length`): the server was reached, so this is no
    /// `Unreachable`.
    #[error(
        "the LLM at {url} answered, but its reply was cut before it was complete ({detail}). \
         The server was reached: look at its logs, or at a proxy between agentloop and it (a \
         read timeout, a body size limit)"
    )]
    CutReply { url: String, detail: String },
    /// The reply stopped at the output limit the request set (Anthropic's `max_tokens`, the
    /// Responses API's `max_output_tokens`): its text or tool call is incomplete.
    #[error(
        "the LLM's reply reached the output limit of {limit} tokens before it was complete: \
         raise llm.max_tokens in agentloop.toml"
    )]
    MaxTokens { limit: u32 },
    #[error("the LLM sent a reply agentloop cannot read: {0}")]
    Protocol(String),
    /// The client was given a configuration it cannot work with.
    #[error("invalid LLM configuration: {0}")]
    InvalidConfig(#[from] InvalidSetting),
    /// A model that answers from a file has no answer for this request: a scripted model
    /// (`llm.provider = "scripted"`) whose script has no step for it, or a cassette
    /// (`llm.replay`) whose recording differs from it. The message says which and what differs.
    #[error("{0}")]
    NoAnswer(String),
}

impl LlmError {
    /// Whether another attempt with the same request may succeed: the provider asked to wait
    /// (429) or failed (5xx), or the connection broke, before the answer came or in the middle
    /// of it. Not: a server that cannot be reached at all (refused, unknown host: a wrong
    /// `base_url` or a server that is not running, which retrying only hides longer), a key or
    /// a request the provider refused, a reply agentloop cannot read or that ended without a
    /// `finish_reason`, and a timeout, which means the call's whole `llm.timeout_s` is spent.
    ///
    /// This is the retry rule of the OpenAI client: it tries again while this holds, up to
    /// `llm.max_retries` times and within `llm.timeout_s`, and never once text of the reply was
    /// shown, which another attempt would show twice (tool calls never run from half a reply).
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. }
                | LlmError::Server { .. }
                | LlmError::ConnectionLost { .. }
                | LlmError::NoConnection { .. }
                | LlmError::CutReply { .. }
        )
    }

    /// The code of the `error` event that ends the run.
    pub fn code(&self) -> ErrorCode {
        match self {
            // A client that cannot be configured reaches no LLM.
            LlmError::Unreachable { .. }
            | LlmError::NoNetwork { .. }
            | LlmError::ConnectionLost { .. }
            | LlmError::NoConnection { .. }
            | LlmError::InvalidConfig(_) => ErrorCode::LlmUnreachable,
            LlmError::MissingApiKey { .. } => ErrorCode::LlmMissingApiKey,
            LlmError::Unauthorized { .. } => ErrorCode::LlmUnauthorized,
            // The "model" refuses the request: it has no answer for it.
            LlmError::Rejected { .. } | LlmError::NoAnswer(_) => ErrorCode::LlmRejected,
            LlmError::RateLimited { .. } => ErrorCode::LlmRateLimited,
            LlmError::Server { .. } => ErrorCode::LlmServerError,
            LlmError::Timeout { .. } => ErrorCode::LlmTimeout,
            // The reply was cut short, by the provider's limit rather than by the network.
            LlmError::TruncatedStream | LlmError::CutReply { .. } | LlmError::MaxTokens { .. } => {
                ErrorCode::LlmTruncatedStream
            }
            LlmError::Protocol(_) => ErrorCode::LlmProtocolError,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transient_failures_are_retryable_and_the_rest_are_not() {
        let (url, detail) = (String::from("http://llm"), String::from("reset"));
        let retryable = [
            LlmError::RateLimited {
                retries: 0,
                message: String::new(),
            },
            LlmError::Server {
                status: 502,
                retries: 0,
                message: String::new(),
            },
            LlmError::ConnectionLost {
                url: url.clone(),
                detail: detail.clone(),
            },
            LlmError::CutReply {
                url: url.clone(),
                detail: detail.clone(),
            },
            LlmError::NoConnection {
                url: url.clone(),
                detail: detail.clone(),
            },
        ];
        for error in retryable {
            assert!(error.is_retryable(), "{error:?}");
        }
        let final_ = [
            LlmError::NoNetwork {
                url: url.clone(),
                host: "llm".into(),
                detail: detail.clone(),
            },
            LlmError::Unreachable {
                url: url.clone(),
                detail,
            },
            LlmError::MissingApiKey {
                url,
                key_env: "OPENAI_API_KEY".into(),
                base_url_env: "OPENAI_BASE_URL".into(),
            },
            LlmError::MaxTokens { limit: 4096 },
            LlmError::Rejected {
                status: 400,
                message: String::new(),
            },
            LlmError::Timeout { seconds: 1.0 },
            LlmError::TruncatedStream,
            LlmError::Protocol(String::new()),
        ];
        for error in final_ {
            assert!(!error.is_retryable(), "{error:?}");
        }
    }
}
