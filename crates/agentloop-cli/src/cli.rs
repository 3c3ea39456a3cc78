//! Command-line arguments.

use std::path::PathBuf;

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
    /// List the tools each configured MCP server offers.
    Tools(ToolsArgs),
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
}

#[derive(Debug, Args)]
pub struct ToolsArgs {
    /// Print the tools as JSON.
    #[arg(long)]
    pub json: bool,
}
