//! Command-line arguments.

use std::path::PathBuf;

use uuid::Uuid;

use clap::{Args, Parser, Subcommand};

/// agentloop: a runtime that turns any tool-calling LLM into a dependable copilot agent.
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Clone, Args)]
pub struct GlobalArgs {
    /// Configuration file (default: ./agentloop.toml if present, else built-in defaults).
    #[arg(long, short = 'c', global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Answer QUERY with the LLM and the configured tools; live steps on stderr, the answer on
    /// stdout. Exits 0 only when the run completed.
    Run(RunArgs),
    /// Serve the HTTP API: runs over SSE or JSON, sessions, metrics, OpenAPI.
    Serve(ServeArgs),
    /// List the tools each configured MCP server offers.
    Tools(ToolsArgs),
    /// List sessions, or show one with its messages and the trace of each run.
    #[command(subcommand)]
    Sessions(SessionsCommand),
    /// Create, revoke and list the API keys of the HTTP server.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Create or upgrade the database schema of the store (runs also do it on start).
    Migrate,
}

#[derive(Debug, Args)]
pub struct RunArgs {
    /// The question or task.
    #[arg(required = true, value_name = "QUERY")]
    pub query: Vec<String>,
    /// Print every event as one JSON object per line on stdout instead of the answer.
    #[arg(long)]
    pub json: bool,
    /// Stop calling tools after this many LLM calls (at most agent.max_iterations).
    #[arg(long, value_name = "N")]
    pub max_iterations: Option<u32>,
    /// Continue this session (created when it does not exist yet); default: a new session.
    #[arg(long, value_name = "ID")]
    pub session: Option<Uuid>,
    /// The user the run belongs to.
    #[arg(long, value_name = "U", default_value = "local")]
    pub user: String,
    /// Do not show the model the session's earlier messages.
    #[arg(long)]
    pub no_history: bool,
    /// Offer no tool that changes data; calls of such tools are blocked.
    #[arg(long)]
    pub read_only: bool,
    /// The entity the run works on (mutating calls are rate limited per entity).
    #[arg(long, value_name = "E")]
    pub entity: Option<String>,
    /// Run under this workflow's tool allowlist ([workflows.NAME]).
    #[arg(long, value_name = "NAME")]
    pub workflow: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, most recent first.
    List(SessionsListArgs),
    /// One session: its messages, with the tool calls of each run.
    Show(SessionsShowArgs),
}

#[derive(Debug, Args)]
pub struct SessionsListArgs {
    /// Only this user's sessions.
    #[arg(long, value_name = "U")]
    pub user: Option<String>,
    /// At most this many sessions.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub limit: u32,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct SessionsShowArgs {
    /// The session id.
    pub id: Uuid,
    /// Print JSON: the session, its messages and its runs.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a user; the key is printed once, alone on stdout, and only its hash is
    /// stored.
    Create(KeysCreateArgs),
    /// Revoke a key, named by its id (key_...) or by the key itself (al_...).
    Revoke(KeysRevokeArgs),
    /// Keys, newest first: id, user, prefix and dates (never the key).
    List(KeysListArgs),
}

#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    /// The user the key signs in as.
    #[arg(long, value_name = "U", value_parser = clap::builder::NonEmptyStringValueParser::new())]
    pub user: String,
}

#[derive(Debug, Args)]
pub struct KeysRevokeArgs {
    /// The key's id (key_...) or the key itself (al_...).
    #[arg(value_name = "KEY")]
    pub key: String,
}

#[derive(Debug, Args)]
pub struct KeysListArgs {
    /// Only this user's keys.
    #[arg(long, value_name = "U")]
    pub user: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on (default: server.listen, or AGENTLOOP_LISTEN).
    #[arg(long, value_name = "ADDRESS")]
    pub listen: Option<String>,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print the tools as JSON.
    #[arg(long)]
    pub json: bool,
}
