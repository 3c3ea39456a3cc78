//! Running the real `agentloop` binary the way a user does: in a directory of its own, with
//! none of the caller's agentloop or OpenAI environment.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{
    path::Path,
    process::{Command, Output},
};

use agentloop_test_support::mcp::test_mcp_server_config_toml;

/// `agentloop` in `dir`, with a clean environment, not started yet.
pub fn command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentloop"));
    command.current_dir(dir);
    for name in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DATABASE_URL",
        "AGENTLOOP_LISTEN",
        "AGENTLOOP_LOG",
    ] {
        command.env_remove(name);
    }
    command
}

/// Runs `agentloop ARGS` in `dir` to its end (off the async runtime, which serves the test's
/// scripted LLM meanwhile).
pub async fn agentloop(dir: &Path, args: &[&str]) -> Output {
    let mut command = command(dir);
    command.args(args);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// Writes `agentloop.toml` in `dir`: the LLM at `llm_url`, the test MCP server, and `extra`.
pub fn write_config(dir: &Path, llm_url: &str, extra: &str) {
    let text = format!(
        "[llm]\nbase_url = \"{llm_url}\"\nmodel = \"scripted\"\nmax_retries = 0\n\n{}\n{extra}\n",
        test_mcp_server_config_toml("test", None)
    );
    std::fs::write(dir.join("agentloop.toml"), text).unwrap();
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}
