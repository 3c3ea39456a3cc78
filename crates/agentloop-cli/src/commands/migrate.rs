//! `agentloop migrate`: create or upgrade the store's schema.

use std::process::ExitCode;

use agentloop::SqlStore;

use crate::{cli::GlobalArgs, commands::load_config};

pub async fn execute(global: GlobalArgs) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let applied = SqlStore::migrate(&config.store.url).await?;
    if applied.is_empty() {
        outln!("the store is up to date")?;
    }
    for migration in applied {
        outln!("applied {migration}")?;
    }
    Ok(ExitCode::SUCCESS)
}
