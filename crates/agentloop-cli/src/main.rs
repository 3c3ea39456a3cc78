//! The `agentloop` command.

mod cli;
mod commands;
mod render;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command};

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
            Command::Serve(args) => commands::serve::execute(cli.global, args).await,
            Command::Tools(args) => commands::tools::execute(cli.global, args).await,
            Command::Sessions(command) => commands::sessions::execute(cli.global, command).await,
            Command::Keys(command) => commands::keys::execute(cli.global, command).await,
            Command::Migrate => commands::migrate::execute(cli.global).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("error: {}", render::error_chain(&error));
            ExitCode::from(2)
        }
    }
}

/// Logs go to stderr, quiet by default; `AGENTLOOP_LOG=debug` shows the internals.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTLOOP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .try_init();
}
