//! The client `[llm] provider` names.

use std::sync::Arc;

use agentloop_core::{Llm, LlmError};

use crate::anthropic::AnthropicClient;
use crate::cassette::{Player, Recorder};
use crate::client::OpenAiClient;
use crate::config::ToolCalling;
use crate::config::{LlmConfig, Provider};
use crate::json_planner::JsonToolCalling;
use crate::not_openai::unknown_origin;
use crate::responses::ResponsesClient;
use crate::scripted::ScriptedModel;

/// The client of `config.provider`, with its key from the environment, wrapped for JSON tool
/// calling when `llm.tool_calling = "json"`. Errors about the server behind `base_url` name
/// both settings it may come from; [`client_for_with_origin`] names the one it came from.
pub fn client_for(config: &LlmConfig) -> Result<Arc<dyn Llm>, LlmError> {
    build(config, None)
}

/// [`client_for`], telling where `base_url` came from (`"[llm] base_url in ./agentloop.toml"`,
/// `"the ANTHROPIC_BASE_URL environment variable"`), for the error about a server behind it
/// that does not speak the provider's API.
pub fn client_for_with_origin(
    config: &LlmConfig,
    base_url_origin: impl Into<String>,
) -> Result<Arc<dyn Llm>, LlmError> {
    build(config, Some(base_url_origin.into()))
}

fn build(config: &LlmConfig, origin: Option<String>) -> Result<Arc<dyn Llm>, LlmError> {
    // A replayed session needs neither the provider nor its key.
    if let Some(cassette) = &config.replay {
        return Ok(with_tool_calling(config, Arc::new(Player::load(cassette)?)));
    }
    let origin = origin.unwrap_or_else(|| unknown_origin(config.provider));
    let client: Arc<dyn Llm> = match config.provider {
        Provider::Scripted => {
            let script = config.script.as_deref().ok_or_else(|| {
                LlmError::InvalidConfig(agentloop_core::InvalidSetting::new(
                    "llm.script",
                    "llm.provider = \"scripted\" needs llm.script = \"FILE\"",
                ))
            })?;
            Arc::new(ScriptedModel::load(script)?)
        }
        Provider::OpenAi => {
            Arc::new(OpenAiClient::new(config.clone())?.with_base_url_origin(origin))
        }
        Provider::OpenAiResponses => {
            Arc::new(ResponsesClient::new(config.clone())?.with_base_url_origin(origin))
        }
        Provider::Anthropic => {
            Arc::new(AnthropicClient::new(config.clone())?.with_base_url_origin(origin))
        }
    };
    let client: Arc<dyn Llm> = match &config.record {
        Some(cassette) => Arc::new(Recorder::new(
            client,
            cassette,
            config.provider.as_str(),
            &config.model,
            secrets(config),
        )?),
        None => client,
    };
    Ok(with_tool_calling(config, client))
}

/// Wrapped for JSON tool calling when `llm.tool_calling = "json"` (outside the cassette, which
/// keeps what the provider was sent).
fn with_tool_calling(config: &LlmConfig, client: Arc<dyn Llm>) -> Arc<dyn Llm> {
    match config.tool_calling {
        ToolCalling::Native => client,
        ToolCalling::Json => Arc::new(JsonToolCalling::new(client)),
    }
}

/// The values a cassette must never hold: the API keys in the environment.
fn secrets(config: &LlmConfig) -> Vec<String> {
    [
        config.api_key_env(),
        config.provider.default_api_key_env(),
        crate::config::DEFAULT_API_KEY_ENV,
        crate::config::ANTHROPIC_API_KEY_ENV,
    ]
    .into_iter()
    .filter_map(|name| std::env::var(name).ok())
    .filter(|value| !value.trim().is_empty())
    .collect()
}
