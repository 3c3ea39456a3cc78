//! The `[llm]` section of agentloop.toml.

use std::time::Duration;

use agentloop_core::InvalidSetting;
use serde::{Deserialize, Deserializer, Serialize};

/// Where and how to reach the model. Every field has a default, so an empty `[llm]` section (or
/// none at all) means "gpt-4o-mini on api.openai.com with `OPENAI_API_KEY`".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LlmConfig {
    /// Only `"openai"`: any server speaking the OpenAI Chat Completions API (OpenAI, vLLM, Ollama,
    /// llama.cpp, LM Studio, OpenRouter, ...).
    pub provider: String,
    /// The API root, ending before `/chat/completions`.
    pub base_url: String,
    pub model: String,
    /// The environment variable holding the API key; `OPENAI_API_KEY` is the fallback.
    pub api_key_env: String,
    pub stream: bool,
    /// Deadline for one `complete` call, retries included.
    pub timeout_s: f64,
    /// Further attempts after a 429, a 5xx or a broken connection.
    pub max_retries: u32,
    /// How the model calls tools: through the API's `tools` (`"native"`), or by answering one
    /// JSON object per turn (`"json"`), for models served without tool calling.
    pub tool_calling: ToolCalling,
}

/// `llm.tool_calling`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolCalling {
    /// The Chat Completions `tools` parameter and `tool_calls` in the reply.
    #[default]
    Native,
    /// Tools described in the prompt, one JSON object per reply (see `JsonToolCalling`).
    Json,
}

// By hand, so that a wrong value is reported under its key instead of serde's bare
// "unknown variant".
impl<'de> Deserialize<'de> for ToolCalling {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = String::deserialize(deserializer)?;
        match value.as_str() {
            "native" => Ok(ToolCalling::Native),
            "json" => Ok(ToolCalling::Json),
            other => Err(serde::de::Error::custom(format!(
                "llm.tool_calling must be \"native\" or \"json\", got {other:?}"
            ))),
        }
    }
}

pub const DEFAULT_API_KEY_ENV: &str = "OPENAI_API_KEY";

impl Default for LlmConfig {
    fn default() -> Self {
        Self {
            provider: "openai".into(),
            base_url: "https://api.openai.com/v1".into(),
            model: "gpt-4o-mini".into(),
            api_key_env: DEFAULT_API_KEY_ENV.into(),
            stream: true,
            timeout_s: 120.0,
            max_retries: 3,
            tool_calling: ToolCalling::Native,
        }
    }
}

impl LlmConfig {
    /// Checks the values a TOML parser cannot; the message names the offending key.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        if self.provider != "openai" {
            return Err(InvalidSetting::new(
                "llm.provider",
                format!(
                    "llm.provider must be \"openai\" (any OpenAI-compatible server), got {:?}",
                    self.provider
                ),
            ));
        }
        let is_http = url::Url::parse(&self.base_url)
            .map(|url| matches!(url.scheme(), "http" | "https") && url.host().is_some())
            .unwrap_or(false);
        if !is_http {
            return Err(InvalidSetting::new(
                "llm.base_url",
                format!(
                    "llm.base_url must be an http(s) URL, got {:?}",
                    self.base_url
                ),
            ));
        }
        if self.model.trim().is_empty() {
            return Err(InvalidSetting::new(
                "llm.model",
                "llm.model must not be empty",
            ));
        }
        if self.api_key_env.trim().is_empty() {
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
        Ok(())
    }

    /// `None` when `timeout_s` is not a positive, finite number.
    pub(crate) fn timeout(&self) -> Option<Duration> {
        if self.timeout_s > 0.0 {
            Duration::try_from_secs_f64(self.timeout_s).ok()
        } else {
            None
        }
    }

    /// The endpoint of the Chat Completions API under `base_url`.
    pub(crate) fn completions_url(&self) -> String {
        format!("{}/chat/completions", self.base_url.trim_end_matches('/'))
    }

    /// api.openai.com always wants a key; local servers usually want none.
    pub(crate) fn requires_api_key(&self) -> bool {
        url::Url::parse(&self.base_url)
            .ok()
            .and_then(|url| {
                url.host_str()
                    .map(|host| host.eq_ignore_ascii_case("api.openai.com"))
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
        assert_eq!(config.base_url, "https://api.openai.com/v1");
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
                    base_url: "localhost:8000".into(),
                    ..LlmConfig::default()
                },
                "llm.base_url must be an http(s) URL, got \"localhost:8000\"",
            ),
            (
                LlmConfig {
                    base_url: "ftp://example.com".into(),
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
                    provider: "anthropic".into(),
                    ..LlmConfig::default()
                },
                "llm.provider",
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
            base_url: "http://localhost:11434/v1/".into(),
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
            base_url: "http://127.0.0.1:8000/v1".into(),
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
        assert_eq!(file.llm.api_key_env, "OPENAI_API_KEY");
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

    fn toml_free_parse(json: &str) -> LlmConfig {
        serde_json::from_str(json).unwrap()
    }
}
