//! The `[llm]` section of agentloop.toml.

use std::path::PathBuf;
use std::time::Duration;

use agentloop_core::InvalidSetting;
use serde::{Deserialize, Deserializer, Serialize};

/// Where and how to reach the model. Every field has a default, so an empty `[llm]` section (or
/// none at all) means "gpt-4o-mini on api.openai.com with `OPENAI_API_KEY`".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Which API the server speaks (see [`Provider`]).
    pub provider: Provider,
    /// The API root: ending before `/chat/completions` or `/responses` for OpenAI, before
    /// `/v1/messages` for Anthropic. `None`: the provider's own ([`Provider::default_base_url`]).
    pub base_url: Option<String>,
    pub model: String,
    /// The environment variable holding the API key. `None`, or a variable that is unset or
    /// empty: the provider's own ([`Provider::default_api_key_env`]).
    pub api_key_env: Option<String>,
    pub stream: bool,
    /// Deadline for one `complete` call, retries included.
    pub timeout_s: f64,
    /// Further attempts after a 429, a 5xx or a broken connection.
    pub max_retries: u32,
    /// The longest reply, in tokens. Anthropic requires one on every request
    /// ([`DEFAULT_ANTHROPIC_MAX_TOKENS`] when unset); OpenAI's APIs get it only when set.
    pub max_tokens: Option<u32>,
    /// How the model calls tools: through the API's `tools` (`"native"`), or by answering one
    /// JSON object per turn (`"json"`), for models served without tool calling.
    pub tool_calling: ToolCalling,
    /// How the context window's tokens are counted (see [`Tokenizer`]).
    pub tokenizer: Tokenizer,
    /// With `provider = "scripted"`: the script the model answers from (TOML, or JSON when the
    /// name ends in `.json`; see `ScriptedModel`).
    pub script: Option<PathBuf>,
    /// Save every LLM exchange (the request as sent, the reply as received) to this cassette.
    pub record: Option<PathBuf>,
    /// Answer from this cassette instead of the provider: no network, and a request that
    /// differs from the recorded one fails, naming the first difference.
    pub replay: Option<PathBuf>,
}

/// `llm.provider`: the wire format of the model's server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// OpenAI Chat Completions: OpenAI and any compatible server (vLLM, Ollama, llama.cpp, LM
    /// Studio, OpenRouter, ...).
    #[default]
    #[serde(rename = "openai")]
    OpenAi,
    /// OpenAI's Responses API, which carries reasoning items between the calls of a run.
    #[serde(rename = "openai_responses")]
    OpenAiResponses,
    /// Anthropic's Messages API (Claude), with prompt caching.
    Anthropic,
    /// No server: the model answers from `llm.script`, for demos and users' tests.
    Scripted,
}

impl Provider {
    /// The value of `llm.provider`.
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::OpenAiResponses => "openai_responses",
            Provider::Anthropic => "anthropic",
            Provider::Scripted => "scripted",
        }
    }

    pub fn default_base_url(self) -> &'static str {
        match self {
            // Not reached: the scripted model has no server (a placeholder for `base_url()`).
            Provider::OpenAi | Provider::OpenAiResponses | Provider::Scripted => {
                "https://api.openai.com/v1"
            }
            Provider::Anthropic => "https://api.anthropic.com",
        }
    }

    pub fn default_api_key_env(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses | Provider::Scripted => {
                DEFAULT_API_KEY_ENV
            }
            Provider::Anthropic => ANTHROPIC_API_KEY_ENV,
        }
    }

    /// The variable that overrides `llm.base_url` (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, as
    /// the providers' own SDKs read them).
    pub fn base_url_env(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses | Provider::Scripted => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
        }
    }

    /// The host that always wants a key; local servers usually want none.
    fn keyed_host(self) -> &'static str {
        match self {
            Provider::OpenAi | Provider::OpenAiResponses => "api.openai.com",
            Provider::Anthropic => "api.anthropic.com",
            Provider::Scripted => "",
        }
    }
}

impl std::fmt::Display for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

// By hand, so that a wrong value is reported under its key with the accepted ones.
impl<'de> Deserialize<'de> for Provider {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        match value.as_str() {
            "openai" => Ok(Provider::OpenAi),
            "openai_responses" => Ok(Provider::OpenAiResponses),
            "anthropic" => Ok(Provider::Anthropic),
            "scripted" => Ok(Provider::Scripted),
            other => Err(serde::de::Error::custom(format!(
                "llm.provider must be \"openai\" (Chat Completions, any compatible server), \
                 \"openai_responses\" (OpenAI's Responses API), \"anthropic\" (Claude's \
                 Messages API) or \"scripted\" (answers from llm.script, no server), got \
                 {other:?}"
            ))),
        }
    }
}

/// `llm.tool_calling`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCalling {
    /// The API's own tools (`tools` in the request, tool calls in the reply).
    #[default]
    Native,
    /// Tools described in the prompt, one JSON object per reply (see `JsonToolCalling`).
    Json,
}

// By hand, so that a wrong value is reported under its key instead of serde's bare
// "unknown variant".
impl<'de> Deserialize<'de> for ToolCalling {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        one_of(
            deserializer,
            "llm.tool_calling",
            [("native", ToolCalling::Native), ("json", ToolCalling::Json)],
        )
    }
}

/// The value of `key`, one of two names: another is reported under `key`, with both names.
fn one_of<'de, D: Deserializer<'de>, T: Copy>(
    deserializer: D,
    key: &str,
    [(first, first_value), (second, second_value)]: [(&str, T); 2],
) -> Result<T, D::Error> {
    let value = String::deserialize(deserializer)?;
    match value.as_str() {
        name if name == first => Ok(first_value),
        name if name == second => Ok(second_value),
        other => Err(serde::de::Error::custom(format!(
            "{key} must be {first:?} or {second:?}, got {other:?}"
        ))),
    }
}

/// `llm.tokenizer`: how tokens are counted to fit the context window and the budgets.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tokenizer {
    /// The model's own when known: tiktoken's encoding for OpenAI's models (its tables take
    /// about 35 MiB of memory for o200k, 18 MiB for cl100k), a conservative estimate for
    /// Claude and for the others.
    #[default]
    Model,
    /// The conservative estimate for every model: no tables in memory; it counts high, so a
    /// window fitted with it keeps fewer messages but never overflows.
    Estimate,
}

// By hand, as `ToolCalling`.
impl<'de> Deserialize<'de> for Tokenizer {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        one_of(
            deserializer,
            "llm.tokenizer",
            [
                ("model", Tokenizer::Model),
                ("estimate", Tokenizer::Estimate),
            ],
        )
    }
}

pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";
pub const ANTHROPIC_API_KEY_ENV: &str = "ANTHROPIC_API_KEY";
/// Anthropic's `max_tokens` when `llm.max_tokens` is unset: the largest output every current
/// Claude model accepts (Claude 3 Haiku's limit), enough for an agent's turn.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 4096;

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: Provider::OpenAi,
            base_url: None,
            model: "gpt-4o-mini".into(),
            api_key_env: None,
            stream: true,
            timeout_s: 120.0,
            max_retries: 3,
            max_tokens: None,
            tool_calling: ToolCalling::Native,
            tokenizer: Tokenizer::Model,
            script: None,
            record: None,
            replay: None,
        }
    }
}

impl LlmConfig {
    /// Checks the values a TOML parser cannot; the message names the offending key.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.record.is_some() && self.replay.is_some() {
            return Err(InvalidSetting::new(
                "llm.replay",
                "llm.record and llm.replay cannot both be set: record a session with a real \
                 model first, then replay it",
            ));
        }
        match (self.provider, &self.script) {
            (Provider::Scripted, None) => {
                return Err(InvalidSetting::new(
                    "llm.script",
                    "llm.provider = \"scripted\" needs llm.script = \"FILE\", the script the \
                     model answers from",
                ));
            }
            (Provider::Scripted, Some(_)) => return self.validate_common(),
            (_, Some(_)) => {
                return Err(InvalidSetting::new(
                    "llm.script",
                    format!(
                        "llm.script is read only with llm.provider = \"scripted\" (the \
                         provider is {:?})",
                        self.provider.as_str()
                    ),
                ));
            }
            (_, None) => {}
        }
        let is_http = url::Url::parse(self.base_url())
            .map(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .unwrap_or(false);
        if !is_http {
            return Err(InvalidSetting::new(
                "llm.base_url",
                format!(
                    "llm.base_url must be an http(s) URL, got {:?}",
                    self.base_url()
                ),
            ));
        }
        self.validate_common()
    }

    fn validate_common(&self) -> Result<(), InvalidSetting> {
        if self.model.trim().is_empty() {
            return Err(InvalidSetting::new(
                "llm.model",
                "llm.model must not be empty",
            ));
        }
        if self
            .api_key_env
            .as_deref()
            .is_some_and(|name| name.trim().is_empty())
        {
            return Err(InvalidSetting::new(
                "llm.api_key_env",
                "llm.api_key_env must name an environment variable",
            ));
        }
        if self.timeout().is_none() {
            return Err(InvalidSetting::new(
                "llm.timeout_s",
                format!(
                    "llm.timeout_s must be a positive number of seconds, got {}",
                    self.timeout_s
                ),
            ));
        }
        if self.max_tokens == Some(0) {
            return Err(InvalidSetting::new(
                "llm.max_tokens",
                "llm.max_tokens must be a positive number of tokens, got 0",
            ));
        }
        Ok(())
    }

    /// The provider, model and API root, as startup lines and `agentloop tools` name them:
    /// `anthropic claude-3-5-haiku-latest at https://api.anthropic.com`.
    pub fn describe(&self) -> String {
        if let Some(cassette) = &self.replay {
            return format!(
                "{} {} replayed from the cassette {}",
                self.provider,
                self.model,
                cassette.display()
            );
        }
        if self.provider == Provider::Scripted {
            let script = self.script.as_deref().unwrap_or(std::path::Path::new("?"));
            return format!("scripted model from {}", script.display());
        }
        format!("{} {} at {}", self.provider, self.model, self.base_url())
    }

    /// `base_url`, else the provider's default.
    pub fn base_url(&self) -> &str {
        self.base_url
            .as_deref()
            .unwrap_or(self.provider.default_base_url())
    }

    /// The variable the key is read from first: `api_key_env`, else the provider's.
    pub fn api_key_env(&self) -> &str {
        self.api_key_env
            .as_deref()
            .unwrap_or(self.provider.default_api_key_env())
    }

    /// Anthropic's `max_tokens`: the configured one, else [`DEFAULT_ANTHROPIC_MAX_TOKENS`].
    pub fn anthropic_max_tokens(&self) -> u32 {
        self.max_tokens.unwrap_or(DEFAULT_ANTHROPIC_MAX_TOKENS)
    }

    /// `None` when `timeout_s` is not a positive, finite number.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        if self.timeout_s > 0.0 {
            Duration::try_from_secs_f64(self.timeout_s).ok()
        } else {
            None
        }
    }

    /// `path` under `base_url` (which may end with a slash).
    pub(crate) fn endpoint(&self, path: &str) -> String {
        format!("{}/{path}", self.base_url().trim_end_matches('/'))
    }

    /// The endpoint of the Chat Completions API under `base_url`.
    pub(crate) fn completions_url(&self) -> String {
        self.endpoint("chat/completions")
    }

    /// The provider's own host always wants a key; local servers usually want none.
    pub(crate) fn requires_api_key(&self) -> bool {
        url::Url::parse(self.base_url())
            .ok()
            .and_then(|url| {
                url.host_str()
                    .map(|host| host.eq_ignore_ascii_case(self.provider.keyed_host()))
            })
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_section_takes_every_default() {
        let config: LlmConfig = toml_free_parse("{}");
        assert_eq!(config, LlmConfig::default());
        assert_eq!(config.base_url(), "https://api.openai.com/v1");
        assert_eq!(config.api_key_env(), "OPENAI_API_KEY");
        assert_eq!(config.model, "gpt-4o-mini");
        assert!(config.stream);
        assert_eq!(config.max_retries, 3);
        assert!(config.validate().is_ok());
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let parsed = serde_json::from_str::<LlmConfig>(r#"{"modle": "x"}"#);
        assert!(parsed.is_err());
    }

    #[test]
    fn validate_names_the_offending_key() {
        let cases = [
            (
                LlmConfig {
                    base_url: Some("localhost:8000".into()),
                    ..LlmConfig::default()
                },
                "llm.base_url must be an http(s) URL, got \"localhost:8000\"",
            ),
            (
                LlmConfig {
                    base_url: Some("ftp://example.com".into()),
                    ..LlmConfig::default()
                },
                "llm.base_url",
            ),
            (
                LlmConfig {
                    timeout_s: 0.0,
                    ..LlmConfig::default()
                },
                "llm.timeout_s",
            ),
            (
                LlmConfig {
                    timeout_s: f64::NAN,
                    ..LlmConfig::default()
                },
                "llm.timeout_s",
            ),
            (
                LlmConfig {
                    model: " ".into(),
                    ..LlmConfig::default()
                },
                "llm.model",
            ),
            (
                LlmConfig {
                    max_tokens: Some(0),
                    ..LlmConfig::default()
                },
                "llm.max_tokens",
            ),
            (
                LlmConfig {
                    api_key_env: Some(" ".into()),
                    ..LlmConfig::default()
                },
                "llm.api_key_env",
            ),
        ];
        for (config, expected) in cases {
            let error = config.validate().unwrap_err();
            assert!(expected.starts_with(&error.key), "{error:?}");
            assert!(
                error.message.contains(expected),
                "{error:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn completions_url_tolerates_a_trailing_slash() {
        let config = LlmConfig {
            base_url: Some("http://localhost:11434/v1/".into()),
            ..LlmConfig::default()
        };
        assert_eq!(
            config.completions_url(),
            "http://localhost:11434/v1/chat/completions"
        );
    }

    #[test]
    fn only_api_openai_com_requires_a_key() {
        assert!(LlmConfig::default().requires_api_key());
        let local = LlmConfig {
            base_url: Some("http://127.0.0.1:8000/v1".into()),
            ..LlmConfig::default()
        };
        assert!(!local.requires_api_key());
    }

    #[test]
    fn the_toml_section_parses_with_integer_seconds() {
        #[derive(Deserialize)]
        struct File {
            llm: LlmConfig,
        }
        let file: File = toml::from_str(
            "[llm]\nbase_url = \"http://localhost:8000/v1\"\nmodel = \"qwen\"\ntimeout_s = 10\nstream = false\n",
        )
        .unwrap();
        assert_eq!(file.llm.timeout_s, 10.0);
        assert!(!file.llm.stream);
        assert_eq!(file.llm.api_key_env(), "OPENAI_API_KEY");
        assert!(file.llm.validate().is_ok());
    }

    #[test]
    fn tool_calling_is_native_by_default_and_json_on_request() {
        assert_eq!(LlmConfig::default().tool_calling, ToolCalling::Native);
        let config: LlmConfig = toml_free_parse(r#"{"tool_calling": "json"}"#);
        assert_eq!(config.tool_calling, ToolCalling::Json);
        let native: LlmConfig = toml_free_parse(r#"{"tool_calling": "native"}"#);
        assert_eq!(native.tool_calling, ToolCalling::Native);
        assert_eq!(
            serde_json::to_value(ToolCalling::Json).unwrap(),
            serde_json::json!("json")
        );
    }

    #[test]
    fn the_tokenizer_is_the_models_by_default_and_the_estimate_on_request() {
        assert_eq!(LlmConfig::default().tokenizer, Tokenizer::Model);
        let config: LlmConfig = toml_free_parse(r#"{"tokenizer": "estimate"}"#);
        assert_eq!(config.tokenizer, Tokenizer::Estimate);
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            llm: LlmConfig,
        }
        let error = toml::from_str::<File>("[llm]\ntokenizer = \"bpe\"\n").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("llm.tokenizer must be \"model\" or \"estimate\", got \"bpe\""),
            "{error}"
        );
    }

    #[test]
    fn an_unknown_tool_calling_names_the_key() {
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            llm: LlmConfig,
        }
        let error = toml::from_str::<File>("[llm]\ntool_calling = \"xml\"\n").unwrap_err();
        let message = error.to_string();
        assert!(
            message.contains("llm.tool_calling must be \"native\" or \"json\", got \"xml\""),
            "{message}"
        );
    }

    #[test]
    fn each_provider_has_its_own_defaults() {
        let anthropic: LlmConfig = toml_free_parse(r#"{"provider": "anthropic"}"#);
        assert_eq!(anthropic.provider, Provider::Anthropic);
        assert_eq!(anthropic.base_url(), "https://api.anthropic.com");
        assert_eq!(anthropic.api_key_env(), "ANTHROPIC_API_KEY");
        assert_eq!(
            anthropic.anthropic_max_tokens(),
            DEFAULT_ANTHROPIC_MAX_TOKENS
        );
        assert!(anthropic.requires_api_key());
        let responses: LlmConfig =
            toml_free_parse(r#"{"provider": "openai_responses", "max_tokens": 900}"#);
        assert_eq!(responses.provider, Provider::OpenAiResponses);
        assert_eq!(responses.base_url(), "https://api.openai.com/v1");
        assert_eq!(
            responses.endpoint("responses"),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(responses.max_tokens, Some(900));
        let mine: LlmConfig =
            toml_free_parse(r#"{"provider": "anthropic", "api_key_env": "MY_CLAUDE_KEY"}"#);
        assert_eq!(mine.api_key_env(), "MY_CLAUDE_KEY");
    }

    #[test]
    fn an_unknown_provider_names_the_key_and_the_choices() {
        #[derive(Debug, Deserialize)]
        struct File {
            #[allow(dead_code)]
            llm: LlmConfig,
        }
        let error = toml::from_str::<File>("[llm]\nprovider = \"gemini\"\n").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("llm.provider must be"), "{message}");
        assert!(message.contains("\"anthropic\""), "{message}");
        assert!(message.contains("got \"gemini\""), "{message}");
    }

    #[test]
    fn the_scripted_provider_needs_a_script_and_cassettes_are_one_way() {
        let scripted: LlmConfig = toml_free_parse(r#"{"provider": "scripted"}"#);
        assert_eq!(scripted.validate().unwrap_err().key, "llm.script");
        let ready: LlmConfig =
            toml_free_parse(r#"{"provider": "scripted", "script": "agent.script.toml"}"#);
        assert!(ready.validate().is_ok());
        assert_eq!(ready.describe(), "scripted model from agent.script.toml");
        let stray: LlmConfig = toml_free_parse(r#"{"script": "agent.script.toml"}"#);
        assert_eq!(stray.validate().unwrap_err().key, "llm.script");
        let both: LlmConfig = toml_free_parse(r#"{"record": "a.json", "replay": "b.json"}"#);
        let error = both.validate().unwrap_err();
        assert_eq!(error.key, "llm.replay");
        assert!(error.message.contains("cannot both be set"), "{error:?}");
    }

    fn toml_free_parse(json: &str) -> LlmConfig {
        serde_json::from_str(json).unwrap()
    }
}
