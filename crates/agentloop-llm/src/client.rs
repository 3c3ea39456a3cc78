//! [`OpenAiClient`]: the [`Llm`] implementation, with its retry policy.

use std::fmt;
use std::time::{Duration, Instant};

use agentloop_core::{InvalidSetting, Llm, LlmError, ModelReply, ModelRequest, TextSink};
use async_trait::async_trait;
use reqwest::header::{AUTHORIZATION, CONTENT_TYPE, HeaderValue};

use crate::config::{DEFAULT_API_KEY_ENV, LlmConfig};
use crate::exchange::{error_chain, exchange};
use crate::not_openai::{Endpoint, UNKNOWN_ORIGIN};
use crate::retry::{Backoff, DEFAULT_BASE_DELAY};
use crate::wire::ChatRequest;

/// A slow connect is a dead server; do not spend the whole `timeout_s` finding out.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A client of any OpenAI-compatible Chat Completions server.
pub struct OpenAiClient {
    config: LlmConfig,
    /// The Chat Completions URL, and the setting its `base_url` came from.
    endpoint: Endpoint,
    /// `Authorization: Bearer …`, marked sensitive so no HTTP-level logging prints it.
    authorization: Option<HeaderValue>,
    timeout: Duration,
    backoff: Backoff,
    http: reqwest::Client,
}

impl OpenAiClient {
    /// A client that reads its API key from the variable named by `llm.api_key_env`, falling back
    /// to `OPENAI_API_KEY`.
    pub fn new(config: LlmConfig) -> Result<Self, LlmError> {
        let api_key = resolve_api_key(&config.api_key_env, |name| std::env::var(name).ok());
        Self::with_api_key(config, api_key)
    }

    /// A client with an explicit key (or none), ignoring the environment.
    pub fn with_api_key(config: LlmConfig, api_key: Option<String>) -> Result<Self, LlmError> {
        let url = config.completions_url();
        config.validate()?;
        let timeout = config.timeout().ok_or_else(|| {
            InvalidSetting::new("llm.timeout_s", "llm.timeout_s must be positive")
        })?;
        let authorization = match api_key.as_deref().map(str::trim) {
            Some(key) if !key.is_empty() => {
                Some(bearer(key).ok_or_else(|| LlmError::Unauthorized {
                    url: url.clone(),
                    status: 0,
                    message: "the API key contains characters an HTTP header cannot carry".into(),
                })?)
            }
            _ => None,
        };
        let http = reqwest::Client::builder()
            .connect_timeout(timeout.min(MAX_CONNECT_TIMEOUT))
            .build()
            .map_err(|error| LlmError::Unreachable {
                url: url.clone(),
                detail: error_chain(&error),
            })?;
        let endpoint = Endpoint {
            url,
            base_url: config.base_url.clone(),
            origin: UNKNOWN_ORIGIN.to_string(),
        };
        Ok(Self {
            config,
            endpoint,
            authorization,
            timeout,
            backoff: Backoff {
                base: DEFAULT_BASE_DELAY,
            },
            http,
        })
    }

    /// Sets the first retry's backoff (500 ms by default; it doubles per retry). Tests shrink
    /// it to stay fast; a server's `Retry-After` is honoured regardless.
    pub fn with_retry_base_delay(mut self, delay: Duration) -> Self {
        self.backoff = Backoff { base: delay };
        self
    }

    /// Says where `base_url` came from, for errors about the server behind it: for example
    /// `"[llm] base_url in ./agentloop.toml"` or `"the OPENAI_BASE_URL environment variable"`.
    /// Without it, errors name both settings.
    pub fn with_base_url_origin(mut self, origin: impl Into<String>) -> Self {
        self.endpoint.origin = origin.into();
        self
    }

    pub fn config(&self) -> &LlmConfig {
        &self.config
    }

    fn request(&self, body: &[u8]) -> reqwest::RequestBuilder {
        let request = self
            .http
            .post(&self.endpoint.url)
            .header(CONTENT_TYPE, "application/json")
            .body(body.to_vec());
        match &self.authorization {
            Some(value) => request.header(AUTHORIZATION, value.clone()),
            None => request,
        }
    }

    async fn complete_with_retries(
        &self,
        body: &[u8],
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let started = Instant::now();
        let mut retries = 0;
        loop {
            let mut shown = false;
            let failure = match exchange(
                self.request(body),
                &self.endpoint,
                retries + 1,
                &mut *on_text,
                &mut shown,
            )
            .await
            {
                Ok(reply) => return Ok(reply),
                Err(failure) => failure,
            };
            let asked_wait = failure.retry_after();
            let error = failure.into_llm_error(&self.endpoint.url, retries);
            // Text already shown cannot be taken back, so a retry would duplicate it.
            if shown || !error.is_retryable() || retries >= self.config.max_retries {
                return Err(error);
            }
            let wait = asked_wait.unwrap_or_else(|| self.backoff.delay(retries));
            // The provider's error says more than a timeout would.
            if started.elapsed() + wait >= self.timeout {
                return Err(error);
            }
            tracing::debug!(
                retry = retries + 1,
                wait_ms = wait.as_millis() as u64,
                %error,
                "retrying the LLM request"
            );
            tokio::time::sleep(wait).await;
            retries += 1;
        }
    }
}

#[async_trait]
impl Llm for OpenAiClient {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        if self.authorization.is_none() && self.config.requires_api_key() {
            return Err(LlmError::MissingApiKey {
                url: self.endpoint.url.clone(),
            });
        }
        let body = ChatRequest::new(request, &self.config.model, self.config.stream);
        let body = serde_json::to_vec(&body)
            .map_err(|error| LlmError::Protocol(format!("cannot encode the request: {error}")))?;
        tokio::time::timeout(self.timeout, self.complete_with_retries(&body, on_text))
            .await
            .unwrap_or(Err(LlmError::Timeout {
                seconds: self.config.timeout_s,
            }))
    }
}

impl fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("url", &self.endpoint.url)
            .field("model", &self.config.model)
            .field(
                "api_key",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .field("stream", &self.config.stream)
            .finish_non_exhaustive()
    }
}

fn bearer(key: &str) -> Option<HeaderValue> {
    let mut value = HeaderValue::from_str(&format!("Bearer {key}")).ok()?;
    value.set_sensitive(true);
    Some(value)
}

/// The key from `api_key_env`, else from `OPENAI_API_KEY`; an empty variable counts as unset.
fn resolve_api_key(api_key_env: &str, lookup: impl Fn(&str) -> Option<String>) -> Option<String> {
    let non_empty = |name: &str| lookup(name).filter(|key| !key.trim().is_empty());
    non_empty(api_key_env).or_else(|| non_empty(DEFAULT_API_KEY_ENV))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn local_config() -> LlmConfig {
        LlmConfig {
            base_url: "http://127.0.0.1:9/v1".into(),
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
        let both = lookup(&[("MY_KEY", "mine"), ("OPENAI_API_KEY", "openai")]);
        assert_eq!(resolve_api_key("MY_KEY", both).as_deref(), Some("mine"));
        let fallback = lookup(&[("MY_KEY", "  "), ("OPENAI_API_KEY", "openai")]);
        assert_eq!(
            resolve_api_key("MY_KEY", fallback).as_deref(),
            Some("openai")
        );
        assert_eq!(resolve_api_key("MY_KEY", lookup(&[])), None);
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
            base_url: "not a url".into(),
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
