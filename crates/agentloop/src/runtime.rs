//! An agent assembled from a [`Config`]: the LLM client, the MCP servers (started at the same
//! time) and the loop's settings.

use std::sync::Arc;

use agentloop_core::{Agent, AgentBuilder, AgentError, LlmError, Store, StoreError};
use agentloop_llm::{OpenAiClient, token_counter_for};
use agentloop_mcp::{McpSource, connect_all};
use agentloop_store::SqlStore;

use crate::side_effects::WebhookSideEffects;

use crate::config::Config;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot set up the side-effect webhooks: {0}")]
    Webhooks(#[from] reqwest::Error),
    #[error("cannot read the tool descriptions file {path} (agent.tool_descriptions): {source}")]
    ToolDescriptions {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

/// A configured agent and the MCP servers it started.
pub struct Runtime {
    agent: Agent,
    store: Arc<SqlStore>,
    servers: Vec<Arc<McpSource>>,
    warnings: Vec<String>,
}

impl Runtime {
    /// Opens the store (creating and migrating it if needed), starts every MCP server of the
    /// configuration and builds the agent. A server that fails to start is left out with a
    /// warning; the agent works with the others.
    pub async fn start(config: &Config) -> Result<Runtime, RuntimeError> {
        Self::start_with(config, |builder| builder).await
    }

    /// Like [`Runtime::start`], letting the caller add its own tools (or change anything else)
    /// before the agent is built.
    pub async fn start_with(
        config: &Config,
        customize: impl FnOnce(AgentBuilder) -> AgentBuilder,
    ) -> Result<Runtime, RuntimeError> {
        let llm = OpenAiClient::new(config.llm.clone())?;
        let descriptions = match &config.agent.tool_descriptions {
            Some(path) => match std::fs::read_to_string(path) {
                Ok(text) => agentloop_core::parse_tool_descriptions(&text),
                Err(source) => {
                    return Err(RuntimeError::ToolDescriptions {
                        path: path.clone(),
                        source,
                    });
                }
            },
            None => Default::default(),
        };
        let (store, (servers, failures)) = futures::join!(
            SqlStore::connect(&config.store.url),
            connect_all(&config.mcp_servers)
        );
        let store = Arc::new(store?);
        let mut warnings: Vec<String> = failures
            .into_iter()
            .map(|(name, error)| format!("MCP server {name} is left out: {error}"))
            .collect();
        let mut builder = Agent::builder()
            .llm(Arc::new(llm))
            .store(store.clone() as Arc<dyn Store>)
            .token_counter(token_counter_for(&config.llm.model))
            .settings(config.agent.clone());
        for (tool, settings) in &config.tools {
            builder = builder.tool_settings(tool.clone(), settings.clone());
        }
        for (name, workflow) in &config.workflows {
            builder = builder.workflow(name.clone(), workflow.clone());
        }
        builder = builder
            .policy(config.policy.clone())
            .tool_descriptions(descriptions);
        if config
            .tools
            .values()
            .any(|tool| tool.side_effect_webhook.is_some())
        {
            builder = builder.hook(Arc::new(WebhookSideEffects::new()?));
        }
        for server in &servers {
            builder = builder.source(server.clone());
        }
        let agent = customize(builder).build().await?;
        warnings.extend(agent.warnings().iter().cloned());
        Ok(Runtime {
            agent,
            store,
            servers,
            warnings,
        })
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Where sessions and runs are kept.
    pub fn store(&self) -> &Arc<SqlStore> {
        &self.store
    }

    /// Problems that did not stop the agent: servers left out, schemas that do not compile.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Stops the MCP servers.
    /// Stops the MCP servers and closes the store.
    pub async fn shutdown(self) {
        futures::future::join_all(self.servers.iter().map(|server| server.shutdown())).await;
        self.store.close().await;
    }
}
