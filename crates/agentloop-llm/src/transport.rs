//! [`Transport`]: what every provider's client shares: the HTTP client, the key in its header,
//! the endpoint and where its `base_url` came from, the call's deadline, and the retry loop
//! around [`exchange`].

use std::time::{Duration, Instant};

use agentloop_core::{InvalidSetting, LlmError, ModelReply, TextSink};
use bytes::Bytes;
use reqwest::Url;
use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::config::LlmConfig;
use crate::exchange::{Dialect, error_chain, exchange};
use crate::not_openai::Endpoint;
use crate::pools::Pools;
use crate::retry::{Backoff, DEFAULT_BASE_DELAY};

/// A slow connect is a dead server; do not spend the whole `timeout_s` finding out.
const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// How a provider wants its key.
#[derive(Debug, Clone, Copy)]
pub(crate) enum KeyHeader {
    /// `Authorization: Bearer KEY` (OpenAI).
    Bearer,
    /// `x-api-key: KEY` (Anthropic).
    XApiKey,
}

/// One endpoint of one provider, with the retry policy of `[llm]`.
pub(crate) struct Transport {
    /// The URL, its `base_url` and the setting that came from, for the error about a server
    /// that does not speak the provider's API.
    endpoint: Endpoint,
    /// `endpoint.url` parsed once, not at every request.
    parsed_url: Url,
    /// Where the key was looked for, and what overrides the URL, to name in errors.
    key_env: String,
    base_url_env: &'static str,
    /// The key's header (marked sensitive, so no HTTP-level logging prints it) and the
    /// provider's fixed headers.
    headers: HeaderMap,
    has_key: bool,
    requires_key: bool,
    timeout: Duration,
    timeout_s: f64,
    max_retries: u32,
    backoff: Backoff,
    http: Pools,
}

impl Transport {
    /// A transport to `url` with `api_key` (or none) in `key_header`, plus `fixed` headers.
    pub fn new(
        config: &LlmConfig,
        url: String,
        api_key: Option<String>,
        key_header: KeyHeader,
        fixed: &[(&'static str, &'static str)],
    ) -> Result<Self, LlmError> {
        config.validate()?;
        let timeout = config.timeout().ok_or_else(|| {
            InvalidSetting::new("llm.timeout_s", "llm.timeout_s must be positive")
        })?;
        let key_env = config.api_key_env().to_owned();
        let mut headers = HeaderMap::new();
        for (name, value) in fixed {
            headers.insert(
                HeaderName::from_static(name),
                HeaderValue::from_static(value),
            );
        }
        let has_key = match api_key.as_deref().map(str::trim) {
            Some(key) if !key.is_empty() => {
                let (name, value) =
                    key_value(key_header, key).ok_or_else(|| LlmError::Unauthorized {
                        url: url.clone(),
                        status: 0,
                        message: "the API key contains characters an HTTP header cannot carry"
                            .into(),
                        key_env: key_env.clone(),
                    })?;
                headers.insert(name, value);
                true
            }
            _ => false,
        };
        let parsed_url = Url::parse(&url).map_err(|error| {
            InvalidSetting::new(
                "llm.base_url",
                format!("the LLM's URL {url:?} is not a URL: {error}"),
            )
        })?;
        let http = Pools::new(timeout.min(MAX_CONNECT_TIMEOUT)).map_err(|error| {
            LlmError::Unreachable {
                url: url.clone(),
                detail: error_chain(&error),
            }
        })?;
        Ok(Self {
            endpoint: Endpoint::new(config, url),
            parsed_url,
            key_env,
            base_url_env: config.provider.base_url_env(),
            headers,
            has_key,
            requires_key: config.requires_api_key(),
            timeout,
            timeout_s: config.timeout_s,
            max_retries: config.max_retries,
            backoff: Backoff {
                base: DEFAULT_BASE_DELAY,
            },
            http,
        })
    }

    pub fn set_retry_base_delay(&mut self, delay: Duration) {
        self.backoff = Backoff { base: delay };
    }

    /// Says where `base_url` came from (`"[llm] base_url in ./agentloop.toml"`, `"the
    /// ANTHROPIC_BASE_URL environment variable"`); without it, errors name both settings.
    pub fn set_base_url_origin(&mut self, origin: String) {
        self.endpoint.origin = origin;
    }

    pub fn url(&self) -> &str {
        &self.endpoint.url
    }

    pub fn has_key(&self) -> bool {
        self.has_key
    }

    /// The request of one attempt: the URL and the body are shared with the others, not
    /// parsed or copied again.
    pub(crate) fn request(&self, body: &Bytes) -> reqwest::RequestBuilder {
        self.http
            .client()
            .post(self.parsed_url.clone())
            .header(CONTENT_TYPE, "application/json")
            .headers(self.headers.clone())
            .body(body.clone())
    }

    /// Sends `body` until a reply comes, an error that is not worth retrying comes, the
    /// retries are spent, or `llm.timeout_s` is.
    pub async fn send<D: Dialect>(
        &self,
        dialect: &D,
        body: &Bytes,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        if !self.has_key && self.requires_key {
            return Err(LlmError::MissingApiKey {
                url: self.endpoint.url.clone(),
                key_env: self.key_env.clone(),
                base_url_env: self.base_url_env.to_owned(),
            });
        }
        tokio::time::timeout(self.timeout, self.with_retries(dialect, body, on_text))
            .await
            .unwrap_or(Err(LlmError::Timeout {
                seconds: self.timeout_s,
            }))
    }

    async fn with_retries<D: Dialect>(
        &self,
        dialect: &D,
        body: &Bytes,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let started = Instant::now();
        let mut retries = 0;
        loop {
            let mut shown = false;
            let failure = match exchange(
                dialect,
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
            let error = failure.into_llm_error(&self.endpoint.url, &self.key_env, retries);
            // Text already shown cannot be taken back, so a retry would duplicate it.
            if shown || !error.is_retryable() || retries >= self.max_retries {
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

fn key_value(header: KeyHeader, key: &str) -> Option<(HeaderName, HeaderValue)> {
    let (name, text) = match header {
        KeyHeader::Bearer => (reqwest::header::AUTHORIZATION, format!("Bearer {key}")),
        KeyHeader::XApiKey => (HeaderName::from_static("x-api-key"), key.to_owned()),
    };
    let mut value = HeaderValue::from_str(&text).ok()?;
    value.set_sensitive(true);
    Some((name, value))
}

/// The key from `llm.api_key_env`, else from the provider's own variable; an empty variable
/// counts as unset.
pub(crate) fn resolve_api_key(
    config: &LlmConfig,
    lookup: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    let non_empty = |name: &str| lookup(name).filter(|key| !key.trim().is_empty());
    non_empty(config.api_key_env()).or_else(|| non_empty(config.provider.default_api_key_env()))
}

/// The request body as JSON bytes.
pub(crate) fn encode(body: &impl serde::Serialize) -> Result<Bytes, LlmError> {
    serde_json::to_vec(body)
        .map(Bytes::from)
        .map_err(|error| LlmError::Protocol(format!("cannot encode the request: {error}")))
}
