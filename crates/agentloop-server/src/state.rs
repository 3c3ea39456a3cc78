//! What every handler shares: the agent, the store, the keys, the live runs, the metrics.

use std::sync::Arc;

use agentloop_core::{Agent, KeyStore, Store, protocol::ResumeReason};

use crate::daily::DailyLimit;
use crate::{config::ServerConfig, health::HealthCheck, live::LiveRuns, metrics::Metrics};

#[derive(Clone)]
pub struct AppState {
    pub agent: Agent,
    pub store: Arc<dyn Store>,
    pub keys: Arc<dyn KeyStore>,
    pub runs: Arc<LiveRuns>,
    pub metrics: Arc<Metrics>,
    pub config: Arc<ServerConfig>,
    pub health: Arc<HealthCheck>,
    /// What `run_resumed` says of the runs this server adopts: `adopted` (from another
    /// instance; the default) or `restarted` (a store only one program uses, such as SQLite).
    pub resume_reason: ResumeReason,
    /// What the web panel's sign-in says about getting an API key, when the program that
    /// serves knows better than the general hint (`agentloop demo --serve`: the key it
    /// printed). Plain text; never a key.
    pub key_hint: Option<Arc<str>>,
    /// The MCP servers, for the resources and prompts a request brings into its run; `None`:
    /// such requests are refused.
    pub mcp: Option<Arc<dyn crate::McpContext>>,
    /// Sub-agents offered as models of the OpenAI-compatible API (`[agents.NAME] public`),
    /// beside the main agent.
    pub public_agents: Arc<[PublicAgent]>,
    /// The outbox of A2A push notifications (the store's); `None`: A2A's card says push
    /// notifications are not supported.
    pub push: Option<Arc<dyn agentloop_core::PushOutbox>>,
    /// Cancelled when the server stops: what stays open for long (the MCP sessions of
    /// `POST /mcp`) ends with it.
    pub stopping: tokio_util::sync::CancellationToken,
}

impl AppState {
    pub fn new(
        agent: Agent,
        store: Arc<dyn Store>,
        keys: Arc<dyn KeyStore>,
        metrics: Arc<Metrics>,
        config: ServerConfig,
    ) -> AppState {
        AppState {
            agent,
            store,
            keys,
            runs: LiveRuns::with_daily_limit(
                config.max_runs_per_user,
                DailyLimit {
                    cost_usd: config.user_daily_cost_usd,
                    tokens: config.user_daily_tokens,
                },
            ),
            metrics,
            config: Arc::new(config),
            health: Arc::default(),
            resume_reason: ResumeReason::Adopted,
            key_hint: None,
            mcp: None,
            public_agents: Arc::new([]),
            push: None,
            stopping: tokio_util::sync::CancellationToken::new(),
        }
    }
}

/// A sub-agent offered as a model of its own (`[agents.NAME] public = true`).
#[derive(Debug, Clone, PartialEq)]
pub struct PublicAgent {
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    pub model: Option<String>,
    pub max_iterations: Option<u32>,
    /// The workflow that holds its tools (`agent.NAME`, made by the facade), when it names
    /// some; none: every tool of the main agent.
    pub workflow: Option<String>,
}
