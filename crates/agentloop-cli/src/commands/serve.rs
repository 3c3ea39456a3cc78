//! `agentloop serve`: the HTTP server.

use std::{process::ExitCode, sync::Arc};

use agentloop::{
    Config, KeyStore, Runtime, SqlStore, Store,
    server::{AppState, Metrics, bind, serve, shutdown_signal},
};
use anyhow::Context;

use crate::{
    cli::{GlobalArgs, ServeArgs},
    commands::{load_config, run::shell_word},
    render::count,
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
    let how_to_listen = "set server.listen or AGENTLOOP_LISTEN, or --listen";
    let config_arg = global
        .config
        .as_ref()
        .map(|path| format!(" --config {}", shell_word(&path.to_string_lossy())))
        .unwrap_or_default();
    serve_config(
        &config,
        &origin.to_string(),
        how_to_listen,
        None,
        async |_, store| {
            let Some(user) = key_for else {
                warn_without_keys(store, &config_arg).await;
                return Ok(());
            };
            let key = store
                .create_api_key(&user)
                .await
                .with_context(|| format!("cannot create an API key for {user}"))?;
            eprintln!("API key created for the user {user} (printed on stdout)");
            outln!("{}", key.secret)?;
            Ok(())
        },
    )
    .await
}

/// Says on stderr that nobody can call the server when its store has no API key, and the
/// command that makes one (for the same store: the same `--config`).
async fn warn_without_keys(store: &SqlStore, config_arg: &str) {
    match store.list_api_keys(None).await {
        Ok(keys) if keys.iter().all(|key| key.revoked_at.is_some()) => eprintln!(
            "warning: the store has no API key, so every call of the API (and the web panel's \
             sign-in) will be refused with 401; make one with: agentloop{config_arg} keys create \
             --user U (with the same DATABASE_URL, if it is set), or start with --key-for U"
        ),
        Ok(_) => {}
        Err(error) => tracing::warn!(%error, "cannot list the API keys"),
    }
}

/// Serves `config` (`origin` says where it came from) until SIGTERM or Ctrl-C; `ready` is
/// called with the address and the store once the server listens, before it serves.
/// `how_to_listen` says how to choose another address, when this one cannot be had;
/// `key_hint` replaces the web panel's hint about getting a key.
pub async fn serve_config(
    config: &Config,
    origin: &str,
    how_to_listen: &str,
    key_hint: Option<&str>,
    ready: impl AsyncFnOnce(std::net::SocketAddr, &SqlStore) -> anyhow::Result<()>,
) -> anyhow::Result<ExitCode> {
    let metrics = Arc::new(Metrics::new().context("cannot set up the metrics")?);
    let telemetry = metrics.clone();
    let mut runtime = Runtime::start_with(config, |agent| agent.telemetry(telemetry)).await?;
    runtime.start_pruner(config.store.retention.clone());
    for warning in runtime.warnings() {
        eprintln!("warning: {warning}");
    }
    let cannot_listen = || {
        format!(
            "cannot listen on {} ({how_to_listen})",
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
        n => format!(", {}", count(n as u64, "serving thread")),
    };
    eprintln!(
        "agentloop listening on http://{address} (config: {origin}, model: {}, store: {} at {}, \
         {}{threads})",
        config.llm.describe(),
        store.backend(),
        store.location(),
        count(runtime.agent().catalog().len() as u64, "tool")
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
    let push = store.clone() as Arc<dyn agentloop::core::PushOutbox>;
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
    state.key_hint = key_hint.map(Into::into);
    state.mcp = Some(runtime.mcp_context());
    state.push = Some(push);
    state.public_agents = config.public_agents().into();
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
