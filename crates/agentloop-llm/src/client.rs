//! [`OpenAiClient`]: the [`Llm`] implementation for Chat Completions.

use std::fmt;
use std::time::Duration;

use agentloop_core::{Llm, LlmError, ModelReply, ModelRequest, TextSink};
use async_trait::async_trait;

use crate::completion::ChatDialect;
use crate::config::LlmConfig;
use crate::transport::{KeyHeader, Transport, encode, resolve_api_key};
use crate::wire::ChatRequest;

/// A client of any OpenAI-compatible Chat Completions server.
pub struct OpenAiClient {
    config: LlmConfig,
    transport: Transport,
}

impl OpenAiClient {
    /// A client that reads its API key from the variable named by `llm.api_key_env`, falling back
    /// to `OPENAI_API_KEY`.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let api_key = resolve_api_key(&config, |name| std::env::var(name).ok());
        Self::with_api_key(config, api_key)
    }

    /// A client with an explicit key (or none), ignoring the environment.
    pub fn with_api_key(config: LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        let url = config.completions_url();
        let transport = Transport::new(&config, url, api_key, KeyHeader::Bearer, &[])?;
        Ok(Self { config, transport })
    }

    /// Sets the first retry's backoff (500 ms by default; it doubles per retry). Tests shrink
    /// it to stay fast; a server's `Retry-After` is honoured regardless.
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

    #[cfg(test)]
    fn request(&self, body: &'static [u8]) -> reqwest::RequestBuilder {
        self.transport.request(&bytes::Bytes::from_static(body))
    }
}

#[async_trait]
impl Llm for OpenAiClient {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let body = encode(&ChatRequest::new(
            request,
            &self.config.model,
            self.config.stream,
            self.config.max_tokens,
        ))?;
        self.transport.send(&ChatDialect, &body, on_text).await
    }
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.transport.url())
            .field("model", &self.config.model)
            .field("api_key", &self.transport.has_key().then_some("<redacted>"))
            .field("stream", &self.config.stream)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::AUTHORIZATION;
    use std::collections::HashMap;

    fn local_config() -> LlmConfig {
        LlmConfig {
            base_url: Some("http://127.0.0.1:9/v1".into()),
            ..LlmConfig::default()
        }
    }

    fn lookup(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| vars.get(name).cloned()
    }

    #[test]
    fn the_configured_variable_wins_and_openai_api_key_is_the_fallback() {
        let config = LlmConfig {
            api_key_env: Some("MY_KEY".into()),
            ..LlmConfig::default()
        };
        let both = lookup(&[("MY_KEY", "mine"), ("OPENAI_API_KEY", "openai")]);
        assert_eq!(resolve_api_key(&config, both).as_deref(), Some("mine"));
        let fallback = lookup(&[("MY_KEY", "  "), ("OPENAI_API_KEY", "openai")]);
        assert_eq!(
            resolve_api_key(&config, fallback).as_deref(),
            Some("openai")
        );
        assert_eq!(resolve_api_key(&config, lookup(&[])), None);
    }

    #[test]
    fn the_key_is_sent_as_a_bearer_token_and_never_printed() {
        let client =
            OpenAiClient::with_api_key(local_config(), Some("sk-secret\n".into())).unwrap();
        let request = client.request(b"{}").build().unwrap();
        let authorization = request.headers().get(AUTHORIZATION).unwrap();
        assert_eq!(authorization.to_str().unwrap(), "Bearer sk-secret");
        assert!(authorization.is_sensitive());
        assert!(!format!("{client:?}").contains("sk-secret"));
    }

    #[test]
    fn without_a_key_no_authorization_header_is_sent() {
        let client = OpenAiClient::with_api_key(local_config(), None).unwrap();
        let request = client.request(b"{}").build().unwrap();
        assert!(request.headers().get(AUTHORIZATION).is_none());
        assert_eq!(
            request.url().as_str(),
            "http://127.0.0.1:9/v1/chat/completions"
        );
    }

    #[test]
    fn an_invalid_config_is_refused_with_the_validation_message() {
        let config = LlmConfig {
            base_url: Some("not a url".into()),
            ..LlmConfig::default()
        };
        let error = OpenAiClient::with_api_key(config, None).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("llm.base_url must be an http(s) URL"),
            "{error}"
        );
    }
}
