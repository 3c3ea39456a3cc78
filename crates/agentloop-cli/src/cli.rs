//! Command-line arguments.

use std::path::PathBuf;

use uuid::Uuid;

use clap::{Args, Parser, Subcommand};

// The environment each command reads, shown at the end of its `--help` (`after_help`). Every
// command reads its configuration file first; these override it (docs/configuration.md).
// Macros rather than constants, so that `concat!` can join them at compile time.
macro_rules! env_llm {
    () => {
        "  OPENAI_API_KEY    the LLM's API key (or the variable named by llm.api_key_env)\n  \
         OPENAI_BASE_URL   the LLM server, overriding llm.base_url (e.g. http://localhost:11434/v1)\n  \
         ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL\n                    \
         the same with llm.provider = \"anthropic\"\n"
    };
}
macro_rules! env_store {
    () => {
        "  DATABASE_URL      the store of sessions and API keys, overriding store.url\n"
    };
}
macro_rules! env_listen {
    () => {
        "  AGENTLOOP_LISTEN  the address to listen on, overriding server.listen\n"
    };
}
macro_rules! env_log {
    () => {
        "  AGENTLOOP_LOG     what is logged on stderr (e.g. debug; debug,sql=debug adds SQL)"
    };
}
macro_rules! environment {
    ($($line:ident),+) => {
        concat!("Environment:\n", $($line!()),+)
    };
}

/// agentloop: a runtime that turns any tool-calling LLM into a dependable copilot agent.
#[derive(Debug, Parser)]
#[command(name = "agentloop", version, propagate_version = true, after_help = environment!(env_llm, env_store, env_listen, env_log))]
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
    /// stdout. Exits 0 only when the run completed; 130 when it was cancelled (Ctrl-C,
    /// `agentloop cancel`); 141 when stdout's reader went away (`| head`) and the run was
    /// cancelled for it; 1 when it failed or stayed paused; 2 when it could not start.
    #[command(after_help = environment!(env_llm, env_store, env_log))]
    Run(RunArgs),
    /// Continue, in the terminal, a run a killed `agentloop run` left behind: from its last
    /// saved step (an LLM call under way is made again; a tool call that may have been running
    /// runs again only when its tool is read-only or idempotent). Its owner must have been
    /// silent for server.run_lease_s.
    #[command(after_help = environment!(env_llm, env_store, env_log))]
    Resume(ResumeArgs),
    /// Cancel a run of the store: a run at work in another process (`agentloop run`,
    /// `agentloop serve`) stops at its next safe point; a paused run, or one whose process is
    /// gone, is ended here. Exits 0 once the run is cancelled, 1 when it had ended otherwise.
    #[command(after_help = environment!(env_store, env_log))]
    Cancel(CancelArgs),
    /// Serve the HTTP API: runs over SSE or JSON, sessions, metrics, OpenAPI.
    #[command(after_help = environment!(env_llm, env_store, env_listen, env_log))]
    Serve(ServeArgs),
    /// Serve the agents as an MCP server over stdin and stdout (for desktop assistants and
    /// other MCP clients): the main agent and each public [agents.NAME] is a tool taking
    /// {question, session_id?}. The runs work in this process, saved in the configured store.
    #[command(after_help = environment!(env_llm, env_store, env_log))]
    McpServe(McpServeArgs),
    /// List the tools each configured MCP server offers.
    #[command(after_help = environment!(env_log))]
    Tools(ToolsArgs),
    /// List the resources and resource templates each configured MCP server offers.
    #[command(after_help = environment!(env_log))]
    Resources(ToolsArgs),
    /// List the prompts each configured MCP server offers, with their arguments.
    #[command(after_help = environment!(env_log))]
    Prompts(ToolsArgs),
    /// List sessions, or show one with its messages and the trace of each run.
    #[command(subcommand, after_help = environment!(env_store, env_log))]
    Sessions(SessionsCommand),
    /// Create, revoke and list the API keys of the HTTP server.
    #[command(subcommand, after_help = environment!(env_store, env_log))]
    Keys(KeysCommand),
    /// Authorize with the MCP servers that ask for OAuth.
    #[command(subcommand)]
    Mcp(McpCommand),
    /// Create or upgrade the database schema of the store (runs also do it on start).
    #[command(after_help = environment!(env_store, env_log))]
    Migrate,
    /// Delete the trail of finished runs that [store.retention] no longer keeps (their events,
    /// checkpoints and orphaned tool outputs), in small batches; sessions' messages, runs'
    /// rows (status, usage, cost) and tool call records stay. Runs not finished are never
    /// pruned. A server with [store.retention] set does this in the background.
    #[command(after_help = environment!(env_store, env_log))]
    Prune(PruneArgs),
    /// Run a set of cases (CASES.toml) against the configured agent and score them: tools
    /// called, arguments, the answer, a typed answer, steps, tokens and cost. A table (or
    /// --json), JUnit XML with --junit; exits 1 when a case fails. Runs use a store in memory.
    #[command(after_help = environment!(env_llm, env_log))]
    Eval(EvalArgs),
    /// A real run with no key and no network: the runtime, MCP tools (a server built into
    /// this binary) and a SQLite store (./agentloop-demo.db), with a scripted model. --serve
    /// starts the server with it instead. Reads no configuration file (--config is refused).
    #[command(after_help = environment!(env_listen, env_log))]
    Demo(DemoArgs),
    /// The MCP server of `agentloop demo` (get-sum, echo), over stdio.
    #[command(hide = true)]
    DemoTools,
}

#[derive(Debug, Args)]
pub struct EvalArgs {
    /// The case file (TOML, `[[case]]` tables; see docs/evals.md).
    #[arg(value_name = "CASES", required_unless_present_any = ["compare", "from_session"])]
    pub cases: Option<std::path::PathBuf>,
    /// Cases run at once.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub jobs: usize,
    /// Run each case K times (the table shows how many passed).
    #[arg(long, value_name = "K", default_value_t = 1)]
    pub repeat: u32,
    /// Also write the results as JUnit XML to FILE.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<std::path::PathBuf>,
    /// Print the results as JSON (what --compare reads) instead of the table.
    #[arg(long)]
    pub json: bool,
    /// Show what changed between two `--json` outputs of a case set.
    #[arg(long, num_args = 2, value_names = ["A.json", "B.json"], conflicts_with = "cases")]
    pub compare: Vec<std::path::PathBuf>,
    /// Print a stored session as a case (its questions, the tools it called, its last answer)
    /// to add to a case file.
    #[arg(long, value_name = "ID", conflicts_with_all = ["cases", "compare"])]
    pub from_session: Option<Uuid>,
}

#[derive(Debug, Args)]
pub struct PruneArgs {
    /// Prune runs that finished more than N days ago (instead of store.retention.max_age_days).
    #[arg(long, value_name = "N")]
    pub max_age_days: Option<u32>,
    /// Prune runs older than the last N runs of their session (instead of
    /// store.retention.keep_per_session).
    #[arg(long, value_name = "N")]
    pub keep_per_session: Option<u32>,
    /// Only count the runs that would be pruned.
    #[arg(long)]
    pub dry_run: bool,
    /// Print the counts as one JSON object.
    #[arg(long)]
    pub json: bool,
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
    #[arg(long, value_name = "ID", value_parser = session_id)]
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
    /// Save each LLM exchange of the run (request and reply, never a key) to this cassette
    /// (llm.record).
    #[arg(long, value_name = "FILE", conflicts_with = "replay")]
    pub record: Option<PathBuf>,
    /// Answer from this cassette instead of the LLM, with no network (llm.replay); a request
    /// that differs from the recording fails, naming the first difference.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,
    /// Attach an image or a file to the question (repeatable): PNG, JPEG, GIF, WebP, PDF or
    /// text, its type read from its content, within [agent.attachments].
    #[arg(long, value_name = "FILE")]
    pub attach: Vec<PathBuf>,
}

#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Start the HTTP server (web panel, API, event stream) with the demo's model and tools,
    /// and print its URL and an API key.
    #[arg(long)]
    pub serve: bool,
    /// With --serve: the address to listen on.
    #[arg(long, value_name = "ADDRESS", env = "AGENTLOOP_LISTEN", default_value = DEMO_LISTEN)]
    pub listen: String,
    /// Print every event as one JSON object per line on stdout instead of the answer.
    #[arg(long)]
    pub json: bool,
    /// Continue this session of the demo's store (as printed at the end of a demo run).
    #[arg(long, value_name = "ID", value_parser = session_id, conflicts_with = "serve")]
    pub session: Option<Uuid>,
}

/// Where `agentloop demo --serve` listens unless told otherwise.
pub const DEMO_LISTEN: &str = "127.0.0.1:8080";

#[derive(Debug, Args)]
pub struct CancelArgs {
    /// The run to cancel (its id is printed by `agentloop run` and in `--json` events).
    #[arg(value_name = "RUN_ID", value_parser = run_id)]
    pub run: Uuid,
}

#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The run to continue (its id is printed by `agentloop run` and in `--json` events).
    #[arg(value_name = "RUN_ID", value_parser = run_id)]
    pub run: Uuid,
    /// Print every event as one JSON object per line on stdout instead of the answer.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Sessions, most recent first.
    #[command(after_help = environment!(env_store, env_log))]
    List(SessionsListArgs),
    /// One session: its messages, with the tool calls of each run.
    #[command(after_help = environment!(env_store, env_log))]
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
    #[arg(value_parser = session_id)]
    pub id: Uuid,
    /// Print JSON: the session, its messages and its runs.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key for a user; the key is printed once, alone on stdout, and only its hash is
    /// stored.
    #[command(after_help = environment!(env_store, env_log))]
    Create(KeysCreateArgs),
    /// Revoke a key, named by its id (key_...) or by the key itself (al_...).
    #[command(after_help = environment!(env_store, env_log))]
    Revoke(KeysRevokeArgs),
    /// Keys, newest first: id, user, prefix and dates (never the key).
    #[command(after_help = environment!(env_store, env_log))]
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

#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Authorize agentloop with the MCP server NAME (over HTTP, asking for OAuth): the
    /// authorization URL is opened in a browser (and printed), a listener on 127.0.0.1 receives
    /// the redirect, and the tokens are kept in the store, sealed with AGENTLOOP_TOKEN_KEY.
    /// Replaces the tokens kept before.
    #[command(after_help = concat!(environment!(env_store, env_log), "\n  AGENTLOOP_TOKEN_KEY  32 bytes as 64 hex digits: seals the tokens (required)"))]
    Login(McpLoginArgs),
}

#[derive(Debug, Args)]
pub struct McpLoginArgs {
    /// The server, as named by its [mcp_servers.NAME] table.
    #[arg(value_name = "NAME")]
    pub name: String,
    /// Only print the authorization URL; open no browser.
    #[arg(long)]
    pub no_browser: bool,
    /// How long to wait for the person to approve, in seconds.
    #[arg(long, value_name = "S", default_value_t = 300)]
    pub wait_s: u64,
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
    /// Create an API key for USER once the server listens and print it alone on a line of
    /// stdout: the way to call a server whose store starts empty each time (`sqlite::memory:`).
    #[arg(long, value_name = "USER")]
    pub key_for: Option<String>,
}

#[derive(Debug, Args)]
pub struct McpServeArgs {
    /// The user the runs and sessions belong to.
    #[arg(long, value_name = "U", default_value = "local")]
    pub user: String,
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print the listing as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A session id, read with a sentence for the user instead of the UUID parser's message
/// ("invalid character: expected an optional prefix of `urn:uuid:` ...").
fn session_id(text: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text.trim()).map_err(|_| {
        "a session id is a UUID such as 0193a4f2-7c1e-7d2a-9b3c-4d5e6f708192, as printed at the \
         end of a run; `agentloop sessions list` shows them"
            .to_string()
    })
}

fn run_id(text: &str) -> Result<Uuid, String> {
    Uuid::parse_str(text.trim()).map_err(|_| {
        "a run id is a UUID such as 0193a4f2-7c1e-7d2a-9b3c-4d5e6f708192, as `agentloop run \
         --json` prints in its events (run_id)"
            .to_string()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_ids_are_uuids_and_anything_else_gets_a_sentence() {
        let id = Uuid::now_v7();
        assert_eq!(session_id(&id.to_string()), Ok(id));
        let message = session_id("last-tuesday").unwrap_err();
        assert!(message.starts_with("a session id is a UUID"), "{message}");
        assert!(message.contains("agentloop sessions list"), "{message}");
    }
}
