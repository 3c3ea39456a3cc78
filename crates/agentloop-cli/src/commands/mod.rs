//! One module per subcommand.

pub mod cancel;
pub mod demo;
pub mod elicit;
pub mod eval;
pub mod keys;
pub mod mcp;
pub mod mcp_serve;
pub mod migrate;
pub mod offers;
pub mod prune;
pub mod run;
pub mod serve;
pub mod sessions;
pub mod tools;

use agentloop::{Config, ConfigOrigin};
use anyhow::Context;

use crate::cli::GlobalArgs;

/// Loads the configuration named on the command line (or the default one).
pub fn load_config(global: &GlobalArgs) -> anyhow::Result<(Config, ConfigOrigin)> {
    Config::load(global.config.as_deref()).context("the configuration is not usable")
}
