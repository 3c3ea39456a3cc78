//! `agentloop mcp-serve`: the agents as an MCP server over stdio. The runs work in this
//! process, with the configured store; stdout carries only MCP messages (what the program says
//! goes to stderr).

use std::{process::ExitCode, sync::Arc};

use agentloop::{
    KeyStore, Runtime, Store,
    server::{AppState, Metrics, serve_stdio},
};
use anyhow::Context;

use crate::{
    cli::{GlobalArgs, McpServeArgs},
    commands::load_config,
};

pub async fn execute(global: GlobalArgs, args: McpServeArgs) -> anyhow::Result<ExitCode> {
    let user = args.user.trim().to_string();
    if user.is_empty() {
        anyhow::bail!("--user needs a user name, as in --user alice");
    }
    let (config, origin) = load_config(&global)?;
    let metrics = Arc::new(Metrics::new().context("cannot set up the metrics")?);
    let telemetry = metrics.clone();
    let runtime = Runtime::start_with(&config, |agent| agent.telemetry(telemetry)).await?;
    for warning in runtime.warnings() {
        eprintln!("warning: {warning}");
    }
    let store = runtime.store().clone();
    eprintln!(
        "agentloop MCP server on stdio (config: {origin}, model: {}, store: {} at {}, user: {user})",
        config.llm.describe(),
        store.backend(),
        store.location(),
    );
    let mut state = AppState::new(
        runtime.agent().clone(),
        store.clone() as Arc<dyn Store>,
        store as Arc<dyn KeyStore>,
        metrics,
        config.server.clone(),
    );
    state.mcp = Some(runtime.mcp_context());
    state.public_agents = config.public_agents().into();
    let runs = state.runs.clone();
    let served = serve_stdio(state, &user).await;
    // The client closed stdin: nobody waits for the calls still at work, so their runs are
    // cancelled (at their next safe point, saved), as a cancelled call's run is.
    runs.shutdown(None);
    let idle = runs.wait_idle(config.server.shutdown_grace()).await;
    runtime.shutdown().await;
    served.context("the MCP connection failed")?;
    Ok(if idle {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
