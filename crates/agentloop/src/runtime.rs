//! An agent assembled from a [`Config`]: the LLM client, the MCP servers (started at the same
//! time) and the loop's settings.

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use agentloop_core::{
    Agent, AgentBuilder, AgentError, Llm, LlmError, Store, StoreError,
    protocol::{SourceHealth, SourceState, SourceTransport},
};
use agentloop_llm::{client_for_with_origin, token_counter};
use agentloop_mcp::{McpError, McpSource, ReadResource};
use agentloop_store::SqlStore;
use tokio::task::JoinHandle;

use crate::side_effects::WebhookSideEffects;

use crate::config::Config;
use crate::telemetry::{ModelInfo, TelemetryError, Traces};

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RuntimeError {
    #[error(transparent)]
    Llm(#[from] LlmError),
    #[error(transparent)]
    Agent(#[from] AgentError),
    #[error("cannot open the store: {0}")]
    Store(#[from] StoreError),
    #[error("cannot set up the side-effect webhooks: {0}")]
    Webhooks(#[from] reqwest::Error),
    #[error(transparent)]
    Guardrails(#[from] crate::guardrails::GuardrailsError),
    #[error(transparent)]
    Telemetry(#[from] TelemetryError),
    /// A price in `[prices."MODEL"]` that is not a number of 0 or more.
    #[error(transparent)]
    Setting(#[from] agentloop_core::InvalidSetting),
    #[error("cannot read the tool descriptions file {path} (agent.tool_descriptions): {source}")]
    ToolDescriptions {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    /// `AGENTLOOP_TOKEN_KEY` is set, and not to a key.
    #[error(transparent)]
    TokenKey(#[from] agentloop_mcp::oauth::TokenKeyError),
}

/// A configured agent and the MCP servers it started.
pub struct Runtime {
    agent: Agent,
    store: Arc<SqlStore>,
    /// Including the ones that joined after the start.
    servers: Arc<Mutex<Vec<Arc<McpSource>>>>,
    /// `mcp.read_resource`: held here, as the agent's registry holds its sources weakly.
    read_resource: Arc<ReadResource>,
    warnings: Vec<String>,
    /// Where spans go, when traces are exported.
    traces: Option<Traces>,
    /// The background pruner (`[store.retention]`), once started.
    pruner: Option<JoinHandle<()>>,
}

type Connecting = (String, JoinHandle<Result<McpSource, McpError>>);

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
        let llm: Arc<dyn Llm> = client_for_with_origin(
            &config.llm,
            config.base_url_origin.describe("[llm] base_url"),
        )?;
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
        // The store first: servers that ask for OAuth find their tokens there.
        let store = Arc::new(SqlStore::connect(&config.store.url).await?);
        // No one to approve an authorization during a run: `agentloop mcp login` does it.
        let oauth = crate::oauth_context(
            Some(store.clone()),
            Arc::new(agentloop_mcp::oauth::NoAuthorizer),
        )?;
        // Every server starts at once; starting waits for them at most `agent.tools_wait_s`.
        let connecting: Vec<Connecting> = config
            .mcp_servers
            .iter()
            .map(|(name, server)| {
                let (task_name, server, oauth) = (name.clone(), server.clone(), oauth.clone());
                let task = tokio::spawn(async move {
                    McpSource::connect_with(&task_name, &server, &oauth).await
                });
                (name.clone(), task)
            })
            .collect();
        let traces = start_traces(config)?;
        let wait = Duration::from_secs_f64(config.agent.tools_wait_s);
        let (servers, late, left_out) = wait_for_servers(connecting, wait).await;
        let mut warnings: Vec<String> = left_out
            .iter()
            .map(|(name, error)| format!("MCP server {name} is left out: {error}"))
            .collect();
        let mut settings = config.agent_settings()?;
        settings.guardrails = crate::guardrails::build(&config.guardrails, &llm)?;
        let mut builder = Agent::builder()
            .llm(llm)
            .store(store.clone() as Arc<dyn Store>)
            .token_counter(token_counter(&config.llm))
            .settings(settings);
        if let Some(traces) = &traces {
            builder = builder.tracer(traces.tracer());
        }
        for (tool, settings) in &config.tools {
            builder = builder.tool_settings(tool.clone(), settings.clone());
        }
        for (name, workflow) in &config.workflows {
            builder = builder.workflow(name.clone(), workflow.clone());
        }
        for (name, agent) in &config.agents {
            builder = builder.sub_agent(name.clone(), agent.clone());
            if agent.public && !agent.tools.is_empty() {
                // Its tools, when a request runs it as a model of the OpenAI-compatible API.
                let tools = agentloop_core::WorkflowSettings {
                    tools: agent.tools.clone(),
                };
                builder = builder.workflow(Config::public_agent_workflow(name), tools);
            }
        }
        for (name, remote) in &config.a2a_agents {
            match crate::RemoteAgent::new(name, remote) {
                Ok(tool) => builder = builder.tool(tool),
                Err(error) => warnings.push(format!("a2a.{name} is left out: {error}")),
            }
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
            builder = builder.source(server.clone() as Arc<dyn agentloop_core::ToolSource>);
        }
        let servers = Arc::new(Mutex::new(servers));
        // `mcp.read_resource`, offered while a server offers resources.
        let read_resource = Arc::new(ReadResource::new(servers.clone()));
        builder = builder.source(read_resource.clone() as Arc<dyn agentloop_core::ToolSource>);
        let agent = customize(builder).build().await?;
        warnings.extend(agent.warnings().iter().cloned());
        // Servers that are not (yet) in the agent's tools are reported too (`/healthz`).
        let transport = |name: &str| match config.mcp_servers.get(name) {
            Some(server) if server.is_http() => SourceTransport::Http,
            _ => SourceTransport::Stdio,
        };
        for (name, reason) in left_out {
            let state = SourceState::Down { reason };
            note_source(&agent, &name, transport(&name), state);
        }
        for (name, task) in late {
            let transport = transport(&name);
            note_source(&agent, &name, transport, SourceState::Starting);
            warnings.push(format!(
                "MCP server {name} is still starting; its tools join when it is ready"
            ));
            let joined = Joined {
                agent: agent.clone(),
                servers: servers.clone(),
                read_resource: read_resource.clone(),
            };
            let joining = join_later(name, transport, task, joined);
            tokio::spawn(joining);
        }
        Ok(Runtime {
            agent,
            store,
            servers,
            read_resource,
            warnings,
            traces,
            pruner: None,
        })
    }

    /// Where spans go (`None` when traces are not exported).
    pub fn traces(&self) -> Option<&Traces> {
        self.traces.as_ref()
    }

    pub fn agent(&self) -> &Agent {
        &self.agent
    }

    /// Where sessions and runs are kept.
    pub fn store(&self) -> &Arc<SqlStore> {
        &self.store
    }

    /// The MCP servers that are up (joined), for what they offer besides tools (resources,
    /// prompts).
    pub fn mcp_servers(&self) -> Vec<Arc<McpSource>> {
        self.servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The MCP servers as the HTTP server reads resources and prompts from them
    /// (`AppState::mcp`).
    #[cfg(feature = "server")]
    pub fn mcp_context(&self) -> Arc<dyn agentloop_server::McpContext> {
        Arc::new(crate::mcp_context::Servers(self.servers.clone()))
    }

    /// The source of `mcp.read_resource`.
    pub fn read_resource(&self) -> &Arc<ReadResource> {
        &self.read_resource
    }

    /// Problems that did not stop the agent: servers left out, schemas that do not compile.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Stops the MCP servers, closes the store and sends the last spans.
    /// Starts pruning finished runs in the background, as `[store.retention]` says (nothing
    /// when it sets no rule): for long-lived processes such as `agentloop serve`.
    pub fn start_pruner(&mut self, rules: agentloop_store::Retention) {
        if self.pruner.is_none() {
            self.pruner = crate::pruner::spawn(self.store.clone(), rules);
        }
    }

    pub async fn shutdown(self) {
        if let Some(pruner) = &self.pruner {
            pruner.abort();
        }
        let servers = self
            .servers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        futures::future::join_all(servers.iter().map(|server| server.shutdown())).await;
        self.store.close().await;
        if let Some(traces) = &self.traces {
            traces.shutdown().await;
        }
    }
}

/// The span exporter `[telemetry]` and the `OTEL_*` variables ask for, if any.
fn start_traces(config: &Config) -> Result<Option<Traces>, TelemetryError> {
    let Some(export) = config.telemetry.export(|name| std::env::var(name).ok())? else {
        return Ok(None);
    };
    let provider = match config.llm.provider {
        agentloop_llm::Provider::OpenAi | agentloop_llm::Provider::OpenAiResponses => "openai",
        agentloop_llm::Provider::Anthropic => "anthropic",
        agentloop_llm::Provider::Scripted => "agentloop.scripted",
    };
    let scripted = config.llm.provider == agentloop_llm::Provider::Scripted;
    let model = ModelInfo {
        provider: provider.to_string(),
        model: config.llm.model.clone(),
        server: (!scripted)
            .then(|| ModelInfo::server_of(config.llm.base_url()))
            .flatten(),
    };
    Traces::start(&export, model).map(Some)
}

/// The servers ready within `wait`, the ones still starting, and why the others are left out.
async fn wait_for_servers(
    connecting: Vec<Connecting>,
    wait: Duration,
) -> (Vec<Arc<McpSource>>, Vec<Connecting>, Vec<(String, String)>) {
    let deadline = tokio::time::Instant::now() + wait;
    let mut ready = Vec::new();
    let mut late = Vec::new();
    let mut left_out = Vec::new();
    for (name, mut task) in connecting {
        match tokio::time::timeout_at(deadline, &mut task).await {
            Ok(Ok(Ok(source))) => ready.push(Arc::new(source)),
            Ok(Ok(Err(error))) => left_out.push((name, error.to_string())),
            Ok(Err(crashed)) => left_out.push((name, crashed.to_string())),
            Err(_) => late.push((name, task)),
        }
    }
    (ready, late, left_out)
}

/// Reports a server that is not among the agent's tool sources (yet).
fn note_source(agent: &Agent, name: &str, transport: SourceTransport, state: SourceState) {
    agent.services().tools.note_source(
        name,
        SourceHealth {
            transport,
            state,
            restarts: 0,
        },
    );
}

/// What a server that joins late joins.
struct Joined {
    agent: Agent,
    servers: Arc<Mutex<Vec<Arc<McpSource>>>>,
    read_resource: Arc<ReadResource>,
}

/// Adds the tools of a server that became ready after the start.
async fn join_later(
    name: String,
    transport: SourceTransport,
    task: JoinHandle<Result<McpSource, McpError>>,
    joined: Joined,
) {
    let Joined {
        agent,
        servers,
        read_resource,
    } = joined;
    let reason = match task.await {
        Ok(Ok(source)) => Ok(Arc::new(source)),
        Ok(Err(error)) => Err(error.to_string()),
        Err(crashed) => Err(crashed.to_string()),
    };
    let source = match reason {
        Ok(source) => source,
        Err(reason) => {
            tracing::warn!(server = %name, error = %reason, "MCP server left out");
            return note_source(&agent, &name, transport, SourceState::Down { reason });
        }
    };
    servers
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(source.clone());
    read_resource.joined();
    match agent.add_source(source).await {
        Ok(()) => tracing::info!(server = %name, "MCP server joined"),
        Err(error) => tracing::warn!(server = %name, %error, "MCP server left out"),
    }
}
