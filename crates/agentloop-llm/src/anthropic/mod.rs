//! [`AnthropicClient`]: Claude through Anthropic's native Messages API
//! (`POST {base_url}/v1/messages`), with prompt caching, parallel tool blocks, streaming, and
//! the shared retry policy (429, 5xx and Anthropic's 529 `overloaded_error` are retried,
//! honouring `retry-after`; 400, 401 and 403 are not, and show Anthropic's message).

mod reply;
mod request;

use std::fmt;
use std::time::Duration;

use agentloop_core::{Llm, LlmError, ModelReply, ModelRequest, TextSink};
use async_trait::async_trait;

use crate::config::LlmConfig;
use crate::transport::{KeyHeader, Transport, encode, resolve_api_key};
use reply::{MessagesDialect, PAUSE_TURN};
use request::{MessagesRequest, Options, assistant_message};

/// The API version agentloop speaks (`anthropic-version`).
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// How often a turn Anthropic paused (`pause_turn`) is continued before the call fails.
const MAX_CONTINUATIONS: usize = 3;

/// A client of Anthropic's Messages API.
pub struct AnthropicClient {
    config: LlmConfig,
    transport: Transport,
    /// `cache_control` breakpoints on the tools and the system prompt.
    cache: bool,
}

impl AnthropicClient {
    /// A client that reads its key from `llm.api_key_env`, else `ANTHROPIC_API_KEY`.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let api_key = resolve_api_key(&config, |name| std::env::var(name).ok());
        Self::with_api_key(config, api_key)
    }

    /// A client with an explicit key (or none), ignoring the environment.
    pub fn with_api_key(config: LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        let url = config.endpoint("v1/messages");
        let transport = Transport::new(
            &config,
            url,
            api_key,
            KeyHeader::XApiKey,
            &[("anthropic-version", ANTHROPIC_VERSION)],
        )?;
        Ok(Self {
            config,
            transport,
            cache: true,
        })
    }

    /// See [`crate::OpenAiClient::with_retry_base_delay`].
    pub fn with_retry_base_delay(mut self, delay: Duration) -> Self {
        self.transport.set_retry_base_delay(delay);
        self
    }

    /// Says where `base_url` came from, for errors about the server behind it: for example
    /// `"[llm] base_url in ./agentloop.toml"` or `"the ANTHROPIC_BASE_URL environment variable"`.
    /// Without it, errors name both settings.
    pub fn with_base_url_origin(mut self, origin: impl Into<String>) -> Self {
        self.transport.set_base_url_origin(origin.into());
        self
    }

    /// Turns prompt caching off (it is on by default).
    pub fn without_prompt_caching(mut self) -> Self {
        self.cache = false;
        self
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }
}

#[async_trait]
impl Llm for AnthropicClient {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let max_tokens = self.config.anthropic_max_tokens();
        let options = Options {
            model: &self.config.model,
            max_tokens,
            stream: self.config.stream,
            cache: self.cache,
        };
        let dialect = MessagesDialect { max_tokens };
        let mut body = MessagesRequest::new(request, options);
        let mut whole: Option<ModelReply> = None;
        let mut continued = false;
        for _ in 0..=MAX_CONTINUATIONS {
            let reply = self
                .transport
                .send(&dialect, &encode(&body)?, &mut *on_text)
                .await?;
            let paused = reply.finish_reason.as_deref() == Some(PAUSE_TURN);
            let reply = match whole.take() {
                Some(earlier) => joined(earlier, reply),
                None => reply,
            };
            if !paused {
                return Ok(reply);
            }
            // Anthropic paused a long turn: sending it back as is lets the model go on. The
            // turn so far replaces the one sent with the previous continuation.
            if continued {
                body.messages.pop();
            }
            body.messages.push(assistant_message(
                reply.content.as_deref(),
                &reply.tool_calls,
            ));
            continued = true;
            whole = Some(reply);
        }
        Err(LlmError::Protocol(format!(
            "Anthropic paused the turn (stop reason pause_turn) {} times in a row",
            MAX_CONTINUATIONS + 1
        )))
    }
}

/// A paused turn and its continuation, as one reply.
fn joined(earlier: ModelReply, later: ModelReply) -> ModelReply {
    let content = match (earlier.content, later.content) {
        (Some(mut first), Some(second)) => {
            first.push_str(&second);
            Some(first)
        }
        (first, second) => first.or(second),
    };
    let mut tool_calls = earlier.tool_calls;
    tool_calls.extend(later.tool_calls);
    let usage = match (earlier.usage, later.usage) {
        (Some(mut first), Some(second)) => {
            first.add(second);
            Some(first)
        }
        (first, second) => first.or(second),
    };
    ModelReply {
        content,
        tool_calls,
        finish_reason: later.finish_reason,
        usage,
        model: None,
        id: later.id.or(earlier.id),
    }
}

impl fmt::Debug for AnthropicClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicClient")
            .field("url", &self.transport.url())
            .field("model", &self.config.model)
            .field("api_key", &self.transport.has_key().then_some("<redacted>"))
            .field("stream", &self.config.stream)
            .field("prompt_caching", &self.cache)
            .finish_non_exhaustive()
    }
}
