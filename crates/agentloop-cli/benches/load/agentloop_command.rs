//! How the bench and the chaos test start `agentloop`: included by `chaos.rs`, which both the
//! load bench and `tests/chaos.rs` build.

use std::{path::Path, process::Command};

/// `agentloop` in `dir`, deaf to the environment variables that would override the config.
pub(crate) fn agentloop(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentloop"));
    command
        .current_dir(dir)
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("AGENTLOOP_LISTEN")
        .env_remove("AGENTLOOP_LOG");
    command
}
