//! `agentloop serve`: the HTTP server.

use std::{process::ExitCode, sync::Arc};

use agentloop::{
    Config, KeyStore, Runtime, SqlStore, Store,
    server::{AppState, Metrics, bind, serve, shutdown_signal},
};
use anyhow::Context;

use crate::{
    cli::{GlobalArgs, ServeArgs},
    commands::load_config,
};

pub async fn execute(global: GlobalArgs, args: ServeArgs) -> anyhow::Result<ExitCode> {
    let (mut config, origin) = load_config(&global)?;
    if let Some(listen) = args.listen {
        config.server.listen = listen;
    }
    let key_for = args.key_for.map(|user| user.trim().to_string());
    if key_for.as_deref() == Some("") {
        anyhow::bail!("--key-for needs a user name, as in --key-for alice");
    }
    serve_config(&config, &origin.to_string(), async |_, store| {
        let Some(user) = key_for else {
            return Ok(());
        };
        let key = store
            .create_api_key(&user)
            .await
            .with_context(|| format!("cannot create an API key for {user}"))?;
        eprintln!("API key created for the user {user} (printed on stdout)");
        outln!("{}", key.secret)?;
        Ok(())
    })
    .await
}

/// Serves `config` (`origin` says where it came from) until SIGTERM or Ctrl-C; `ready` is
/// called with the address and the store once the server listens, before it serves.
pub async fn serve_config(
    config: &Config,
    origin: &str,
    ready: impl AsyncFnOnce(std::net::SocketAddr, &SqlStore) -> anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    let metrics = Arc::new(Metrics::new().context("cannot set up the metrics")?);
    let telemetry = metrics.clone();
    let runtime = Runtime::start_with(config, |agent| agent.telemetry(telemetry)).await?;
    for warning in runtime.warnings() {
        eprintln!("warning: {warning}");
    }
    let cannot_listen = || {
        format!(
            "cannot listen on {} (set server.listen or AGENTLOOP_LISTEN, or --listen)",
            config.server.listen
        )
    };
    let address: std::net::SocketAddr = config.server.listen.parse().with_context(cannot_listen)?;
    let listener = bind(address).with_context(cannot_listen)?;
    let address = listener.local_addr()?;
    let store = runtime.store().clone();
    // The database is named whole: keys and sessions live in one store, and a key made with
    // another --config or DATABASE_URL is unknown here.
    let threads = match config.server.threads {
        0 => String::new(),
        n => format!(", {n} serving threads"),
    };
    eprintln!(
        "agentloop listening on http://{address} (config: {origin}, model: {}, store: {} at {}, \
         {} tools{threads})",
        config.llm.describe(),
        store.backend(),
        store.location(),
        runtime.agent().catalog().len()
    );
    if store.created_new_file() {
        eprintln!(
            "warning: there was no database file, so a new, empty store was created; if \
             sessions were expected, the file was deleted or moved, or store.url (DATABASE_URL) \
             points to another place"
        );
    }
    ready(address, &store).await?;
    // A SQLite file is one program's: the runs it adopts are its own, left by its last start.
    let single_program = store.backend() == "sqlite";
    let mut state = AppState::new(
        runtime.agent().clone(),
        store.clone() as Arc<dyn Store>,
        store as Arc<dyn KeyStore>,
        metrics,
        config.server.clone(),
    );
    if single_program {
        state.resume_reason = agentloop::core::protocol::ResumeReason::Restarted;
    }
    let finished = serve(listener, state, shutdown_signal()).await?;
    runtime.shutdown().await;
    if finished {
        eprintln!("agentloop stopped: every run was saved");
        Ok(ExitCode::SUCCESS)
    } else {
        eprintln!("agentloop stopped: some runs did not reach a safe point in time");
        Ok(ExitCode::FAILURE)
    }
}
