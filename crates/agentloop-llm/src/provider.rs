//! The client `[llm] provider` names.

use std::sync::Arc;

use agentloop_core::{Llm, LlmError};

use crate::anthropic::AnthropicClient;
use crate::client::OpenAiClient;
use crate::config::ToolCalling;
use crate::config::{LlmConfig, Provider};
use crate::json_planner::JsonToolCalling;
use crate::responses::ResponsesClient;

/// The client of `config.provider`, with its key from the environment, wrapped for JSON tool
/// calling when `llm.tool_calling = "json"`.
pub fn client_for(config: &LlmConfig) -> Result<Arc<dyn Llm>, LlmError> {
    let client: Arc<dyn Llm> = match config.provider {
        Provider::OpenAi => Arc::new(OpenAiClient::new(config.clone())?),
        Provider::OpenAiResponses => Arc::new(ResponsesClient::new(config.clone())?),
        Provider::Anthropic => Arc::new(AnthropicClient::new(config.clone())?),
    };
    Ok(match config.tool_calling {
        ToolCalling::Native => client,
        ToolCalling::Json => Arc::new(JsonToolCalling::new(client)),
    })
}
