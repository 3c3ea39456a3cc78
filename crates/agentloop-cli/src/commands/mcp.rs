//! `agentloop mcp login NAME`: authorizes with an MCP server that asks for OAuth, as a person
//! in a browser; the tokens are kept in the store, sealed, for every later run.

use std::{process::ExitCode, sync::Arc, time::Duration};

use agentloop::{
    Config, McpSource, SqlStore,
    core::{DEFAULT_USER, OAuthTokenStore},
    mcp::oauth::{LoopbackAuthorizer, NoAuthorizer, OAuthContext, TOKEN_KEY_ENV},
};
use anyhow::{Context, bail};

use crate::{
    cli::{GlobalArgs, McpCommand, McpLoginArgs},
    commands::load_config,
};

pub async fn execute(global: GlobalArgs, command: McpCommand) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::Login(args) => login(global, args).await,
    }
}

async fn login(global: GlobalArgs, args: McpLoginArgs) -> anyhow::Result<ExitCode> {
    let (config, origin) = load_config(&global)?;
    let Some(server) = config.mcp_servers.get(&args.name) else {
        let known: Vec<&str> = config.mcp_servers.keys().map(String::as_str).collect();
        bail!(
            "{origin} has no [mcp_servers.{}] (it has: {})",
            args.name,
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        );
    };
    if server.url.is_none() {
        bail!(
            "MCP server '{}' is started with a command: only servers reached over HTTP (url) \
             authorize with OAuth",
            args.name
        );
    }
    let store = Arc::new(
        SqlStore::connect(&config.store.url)
            .await
            .context("cannot open the store, where the tokens are kept")?,
    );
    let no_browser = args.no_browser;
    let show = Arc::new(move |url: &str| {
        eprintln!("Open this URL to authorize agentloop:\n\n  {url}\n");
        if !no_browser {
            open_browser(url);
        }
    });
    let authorizer = LoopbackAuthorizer::new(show, Duration::from_secs(args.wait_s));
    let oauth = agentloop::oauth_context(Some(store.clone()), Arc::new(authorizer))?;
    if oauth.key.is_none() {
        bail!(
            "the tokens are kept in the store only encrypted: set {TOKEN_KEY_ENV} to 32 random \
             bytes as 64 hex digits (for example `export {TOKEN_KEY_ENV}=$(openssl rand -hex 32)`), \
             and keep it for every later run"
        );
    }
    // A login authorizes again, whatever was kept.
    store
        .delete_oauth_tokens(&args.name, DEFAULT_USER)
        .await
        .context("cannot clear the tokens kept before")?;
    // The person's approval is part of the handshake: wait for it, not the server's timeout.
    let mut server = server.clone();
    server.startup_timeout_s = server.startup_timeout_s.max(args.wait_s as f64 + 30.0);
    let source = McpSource::connect_with(&args.name, &server, &oauth).await?;
    let authorized = store
        .load_oauth_tokens(&args.name, DEFAULT_USER)
        .await?
        .is_some();
    source.shutdown().await;
    if authorized {
        eprintln!(
            "Authorized with MCP server '{}'; the tokens are kept in {}.",
            args.name,
            SqlStore::describe_url(&config.store.url).unwrap_or_else(|_| "the store".to_owned())
        );
    } else {
        eprintln!(
            "MCP server '{}' did not ask for authorization: nothing to keep.",
            args.name
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The OAuth context of commands that only list what servers offer: the tokens kept in the
/// store when it exists and a key is set, and no one to approve a new authorization.
pub async fn stored_oauth(config: &Config) -> OAuthContext {
    let store = SqlStore::open_existing(&config.store.url)
        .await
        .ok()
        .flatten()
        .map(Arc::new);
    agentloop::oauth_context(store, Arc::new(NoAuthorizer)).unwrap_or_else(|error| {
        eprintln!("warning: {error}");
        OAuthContext::in_memory()
    })
}

/// Opens `url` in the desktop's browser, if there is one; the URL is printed anyway.
fn open_browser(url: &str) {
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else if cfg!(windows) {
        "explorer"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
}
