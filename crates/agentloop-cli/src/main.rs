//! The `agentloop` command.

#[macro_use]
mod output;
mod cli;
mod commands;
mod keyboard;
mod render;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

/// jemalloc instead of glibc's malloc, whose calls were 15% of the server's CPU per run: 12-19%
/// less CPU per run with 2,000 runs at once (within the noise one run at a time), and memory
/// given back after a burst of large answers (idle 54 MiB against 109 MiB), for 2 MiB more when
/// idle and 4-6% more per run in flight (its size classes). Figures: docs/performance.md. Not
/// with MSVC, which jemalloc does not support.
#[cfg(not(target_env = "msvc"))]
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::FAILURE;
        }
    };
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => commands::run::execute(cli.global, args).await,
            Command::Resume(args) => commands::run::resume_command(cli.global, args).await,
            Command::Cancel(args) => commands::cancel::execute(cli.global, args).await,
            Command::Serve(args) => commands::serve::execute(cli.global, args).await,
            Command::McpServe(args) => commands::mcp_serve::execute(cli.global, args).await,
            Command::Tools(args) => commands::tools::execute(cli.global, args).await,
            Command::Resources(args) => {
                commands::offers::execute(cli.global, args, commands::offers::Offer::Resources)
                    .await
            }
            Command::Prompts(args) => {
                commands::offers::execute(cli.global, args, commands::offers::Offer::Prompts).await
            }
            Command::Sessions(command) => commands::sessions::execute(cli.global, command).await,
            Command::Keys(command) => commands::keys::execute(cli.global, command).await,
            Command::Mcp(command) => commands::mcp::execute(cli.global, command).await,
            Command::Migrate => commands::migrate::execute(cli.global).await,
            Command::Prune(args) => commands::prune::execute(cli.global, args).await,
            Command::Eval(args) => commands::eval::execute(cli.global, args).await,
            Command::Demo(args) => commands::demo::execute(cli.global, args).await,
            Command::DemoTools => commands::demo::tools_server::serve().await,
        }
    });
    match result {
        Ok(code) => code,
        // The reader of stdout has gone (`| head`): it wanted no more; see `output`.
        Err(error) if output::is_broken_pipe(&error) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {}", render::error_chain(&error));
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr, quiet by default; `AGENTLOOP_LOG=debug` shows the internals.
///
/// Colours only on a terminal: a log file or a CI log would get escape codes. The store logs
/// every SQL statement at debug level (target `sql`; sqlx too on PostgreSQL), which drowns what
/// `debug` is asked for; they stay at `warn` unless the filter names them
/// (`AGENTLOOP_LOG=debug,sql=debug`).
fn init_logging() {
    let asked = std::env::var("AGENTLOOP_LOG").unwrap_or_default();
    let mut filter = tracing_subscriber::EnvFilter::try_new(&asked)
        .ok()
        .filter(|_| !asked.trim().is_empty())
        .unwrap_or_else(|| tracing_subscriber::EnvFilter::new("warn"));
    if !asked.contains("sql") {
        for quiet in ["sql=warn", "sqlx=warn"] {
            if let Ok(quiet) = quiet.parse() {
                filter = filter.add_directive(quiet);
            }
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(false)
        .try_init();
}
