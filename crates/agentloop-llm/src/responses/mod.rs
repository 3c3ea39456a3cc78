//! [`ResponsesClient`]: OpenAI's Responses API (`POST {base_url}/responses`), stateless
//! (`store: false`), streaming its semantic events, with the reasoning items of a reasoning
//! model sent back within a run (see `reasoning.rs`) so it keeps its chain of thought between
//! tool calls.

mod reasoning;
mod reply;
mod request;

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use agentloop_core::{Llm, LlmError, ModelReply, ModelRequest, TextSink};
use async_trait::async_trait;

use crate::config::LlmConfig;
use crate::transport::{KeyHeader, Transport, encode, resolve_api_key};
use reasoning::ReasoningCache;
use reply::ResponsesDialect;
use request::ResponsesRequest;

/// A client of OpenAI's Responses API.
pub struct ResponsesClient {
    config: LlmConfig,
    transport: Transport,
    reasoning: Arc<ReasoningCache>,
}

impl ResponsesClient {
    /// A client that reads its key from `llm.api_key_env`, else `OPENAI_API_KEY`.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let api_key = resolve_api_key(&config, |name| std::env::var(name).ok());
        Self::with_api_key(config, api_key)
    }

    /// A client with an explicit key (or none), ignoring the environment.
    pub fn with_api_key(config: LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        let url = config.endpoint("responses");
        let transport = Transport::new(&config, url, api_key, KeyHeader::Bearer, &[])?;
        Ok(Self {
            config,
            transport,
            reasoning: Arc::default(),
        })
    }

    /// See [`crate::OpenAiClient::with_retry_base_delay`].
    pub fn with_retry_base_delay(mut self, delay: Duration) -> Self {
        self.transport.set_retry_base_delay(delay);
        self
    }

    /// Says where `base_url` came from, for errors about the server behind it: for example
    /// `"[llm] base_url in ./agentloop.toml"` or `"the OPENAI_BASE_URL environment variable"`.
    /// Without it, errors name both settings.
    pub fn with_base_url_origin(mut self, origin: impl Into<String>) -> Self {
        self.transport.set_base_url_origin(origin.into());
        self
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }
}

#[async_trait]
impl Llm for ResponsesClient {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let body = encode(&ResponsesRequest::new(
            request,
            &self.config.model,
            self.config.stream,
            self.config.max_tokens,
            &self.reasoning,
        ))?;
        let dialect = ResponsesDialect {
            reasoning: Arc::clone(&self.reasoning),
            max_tokens: self.config.max_tokens,
        };
        self.transport.send(&dialect, &body, on_text).await
    }
}

impl fmt::Debug for ResponsesClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ResponsesClient")
            .field("url", &self.transport.url())
            .field("model", &self.config.model)
            .field("api_key", &self.transport.has_key().then_some("<redacted>"))
            .field("stream", &self.config.stream)
            .finish_non_exhaustive()
    }
}
