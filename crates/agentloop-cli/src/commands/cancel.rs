//! `agentloop cancel RUN_ID`: cancels a run of the store, wherever it is.
//!
//! - A paused run (waiting for an approval or an answer) is ended here, `cancelled`.
//! - A run at work in another process (`agentloop run`, `agentloop serve`) is asked to stop
//!   through the store (`Store::request_cancel`, the request `POST /v1/runs/{id}/cancel` makes
//!   for a run on another instance): its process reads the request within a second and stops
//!   the run at its next safe point (tool calls under way finish and are recorded).
//! - A run whose process is gone (killed, or its stdout closed on an older agentloop) is taken
//!   over here once that process has been silent for `server.run_lease_s`, and ended at once.
//!
//! The command waits until the run has ended and says how.

use std::{process::ExitCode, sync::Arc, time::Duration};

use agentloop::{
    Agent, Config, RunStatus, SqlStore, Store,
    core::{
        Llm, LlmError, ModelReply, ModelRequest, ResumeError, TextSink,
        protocol::{ResumeReason, RunInfo},
    },
};
use anyhow::Context;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    cli::{CancelArgs, GlobalArgs},
    commands::{load_config, sessions::no_database},
};

/// How often the run's status is read while its process stops it.
const POLL: Duration = Duration::from_millis(200);
/// How long its process has to stop it before the wait is said on stderr.
const PATIENCE: Duration = Duration::from_secs(3);

pub async fn execute(global: GlobalArgs, args: CancelArgs) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let id = args.run;
    let Some(store) = SqlStore::open_existing(&config.store.url).await? else {
        let database = SqlStore::describe_url(&config.store.url)?;
        anyhow::bail!("{}", no_database(&database, &format!("no run {id}")));
    };
    let store = Arc::new(store);
    let code = cancel(&config, &store, id).await;
    store.close().await;
    code
}

async fn cancel(config: &Config, store: &Arc<SqlStore>, id: Uuid) -> anyhow::Result<ExitCode> {
    let run = store.run(id).await?.with_context(|| {
        format!(
            "no run {id} in {} (runs live in the store that --config and DATABASE_URL choose; \
             `agentloop sessions show SESSION` lists a session's runs)",
            store.location()
        )
    })?;
    if run.status.is_final() {
        return Ok(ended_before(&run));
    }
    let agent = agent(config, store).await?;
    let lease = config.server.run_lease();
    let cancel = CancellationToken::new();
    // Registered like any process that works on runs, so that a run taken over here is owned
    // by an instance that is alive while it ends it.
    let owned = agentloop::core::durability::own(
        &agent,
        agentloop::core::InstanceKind::Cli,
        lease,
        Arc::new(|_| {}),
    )
    .await
    .context("cannot register this process in the store")?;
    let agent = owned.as_ref().map_or(agent, |owned| owned.agent.clone());
    cancel.cancel();
    let status = if run.status == RunStatus::AwaitingInput {
        let resumed = agent
            .cancel_paused(id)
            .await
            .with_context(|| format!("run {id} cannot be cancelled"))?;
        end_here(&agent, resumed, cancel).await
    } else {
        stop_elsewhere(store, &agent, id, lease, cancel).await?
    };
    Ok(report(id, &run, status))
}

/// Asks the run's process to stop it, and waits until the run has ended; takes it over and
/// ends it here when its process is gone.
async fn stop_elsewhere(
    store: &Arc<SqlStore>,
    agent: &Agent,
    id: Uuid,
    lease: Duration,
    cancel: CancellationToken,
) -> anyhow::Result<RunStatus> {
    store.request_cancel(id).await?;
    let started = tokio::time::Instant::now();
    let mut said = false;
    let mut poll = tokio::time::interval(POLL);
    loop {
        poll.tick().await;
        let run = store
            .run(id)
            .await?
            .with_context(|| format!("run {id} is no longer in the store"))?;
        if run.status.is_final() {
            return Ok(run.status);
        }
        if run.status == RunStatus::AwaitingInput {
            // It paused before it read the request: a paused run is ended here.
            let resumed = agent
                .cancel_paused(id)
                .await
                .with_context(|| format!("run {id} cannot be cancelled"))?;
            return Ok(end_here(agent, resumed, cancel).await);
        }
        // Taken only from a process silent for the lease: a live one stops the run itself.
        match agent.adopt(id, ResumeReason::Adopted, lease).await {
            Ok(resumed) => {
                eprintln!("run {id}'s process is gone: the run is ended here");
                return Ok(end_here(agent, resumed, cancel.clone()).await);
            }
            Err(ResumeError::NotAdoptable(_)) => {}
            Err(error) => {
                return Err(error).with_context(|| format!("run {id} cannot be ended here"));
            }
        }
        if !said && started.elapsed() >= PATIENCE {
            said = true;
            eprintln!(
                "cancel requested: run {id} stops at its next safe point (a tool call under way \
                 finishes first); if its process is gone, the run is ended here once that \
                 process has been silent for server.run_lease_s ({} s). Ctrl-C stops waiting; \
                 the request stands.",
                lease.as_secs_f64()
            );
        }
    }
}

/// Drives a run restored with its cancellation (or to be cancelled at once) to its end.
async fn end_here(
    agent: &Agent,
    resumed: agentloop::core::Resumed,
    cancel: CancellationToken,
) -> RunStatus {
    let (sink, mut events) = tokio::sync::mpsc::unbounded_channel();
    let outcome = agent.run_resumed(resumed, Arc::new(sink), cancel).await;
    events.close();
    outcome.status
}

/// What is said, and the exit status, of a run that had ended before the command.
fn ended_before(run: &RunInfo) -> ExitCode {
    if run.status == RunStatus::Cancelled {
        eprintln!("run {} was already cancelled", run.id);
        return ExitCode::SUCCESS;
    }
    eprintln!(
        "run {} already ended ({}): there is nothing to cancel",
        run.id,
        run.status.as_str()
    );
    ExitCode::FAILURE
}

fn report(id: Uuid, run: &RunInfo, status: RunStatus) -> ExitCode {
    match status {
        RunStatus::Cancelled => {
            eprintln!(
                "run {id} is cancelled; session {} is free (agentloop sessions show {})",
                run.session_id, run.session_id
            );
            ExitCode::SUCCESS
        }
        other => {
            eprintln!(
                "run {id} ended {} before it could be cancelled",
                other.as_str()
            );
            ExitCode::FAILURE
        }
    }
}

/// An agent on `store` with the configuration's settings, policies and workflows (a run is
/// restored with them), but no tools and no model: ending a run calls neither, and a
/// cancellation must not depend on the model's key or the MCP servers starting.
async fn agent(config: &Config, store: &Arc<SqlStore>) -> anyhow::Result<Agent> {
    let mut builder = Agent::builder()
        .llm(Arc::new(NoModel))
        .store(store.clone() as Arc<dyn Store>)
        .settings(config.agent_settings()?)
        .policy(config.policy.clone());
    for (tool, settings) in &config.tools {
        builder = builder.tool_settings(tool.clone(), settings.clone());
    }
    for (name, workflow) in &config.workflows {
        builder = builder.workflow(name.clone(), workflow.clone());
    }
    Ok(builder.build().await?)
}

/// The model of an agent that only ends runs: never asked.
struct NoModel;

#[async_trait::async_trait]
impl Llm for NoModel {
    async fn complete(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        Err(LlmError::InvalidConfig(
            agentloop::core::InvalidSetting::new(
                "llm",
                "`agentloop cancel` asks no model: the run is ended without one",
            ),
        ))
    }
}
