//! A typed answer: the run's answer is a `Triage` value, its JSON Schema derived from the Rust
//! type (`schemars`), validated by agentloop and read back as the type (`Agent::run_typed`).
//! The scripted model (`llm.provider = "scripted"`) answers from `triage.script.toml`; with a
//! real model, only the `[llm]` settings change. The test
//! `crates/agentloop/tests/typed_example.rs` runs this file's [`triage`].
//!
//! ```sh
//! cargo run -p agentloop --example typed_answer -- "The checkout page is down"
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use agentloop::{Config, FnTool, Provider, RunOutcome, RunRequest, Runtime, ToolOutput};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

/// How urgent a ticket is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    Low,
    High,
    Urgent,
}

/// The answer the application wants: a triaged ticket.
#[derive(Debug, Clone, PartialEq, Deserialize, JsonSchema)]
pub struct Triage {
    /// A short title for the ticket.
    pub title: String,
    pub priority: Priority,
    /// The team that should take it.
    pub team: String,
}

/// Triages `report`: the agent looks the service up with its tool, then answers a `Triage`.
pub async fn triage(report: &str) -> Result<(Triage, RunOutcome), Box<dyn std::error::Error>> {
    let owner = FnTool::new(
        "services.owner",
        "The team that owns a service",
        json!({
            "type": "object",
            "properties": {"service": {"type": "string"}},
            "required": ["service"]
        }),
        |args, _context| async move {
            let team = match args["service"].as_str() {
                Some("checkout") => "payments",
                _ => "platform",
            };
            Ok(ToolOutput::json(json!({"team": team})))
        },
    );

    let mut config = Config::default();
    config.llm.provider = Provider::Scripted;
    config.llm.script =
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/triage.script.toml"));
    config.store.url = "sqlite::memory:".into();
    config.validate()?;
    let runtime = Runtime::start_with(&config, |builder| builder.tool(owner)).await?;

    let answer = runtime
        .agent()
        .run_typed::<Triage>(RunRequest::new(report))
        .value()
        .await;
    runtime.shutdown().await;
    Ok(answer?)
}

#[tokio::main]
async fn main() -> ExitCode {
    let report = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "The checkout page is down".into());
    match triage(&report).await {
        Ok((triage, _)) => {
            println!("{triage:#?}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {error}");
            ExitCode::FAILURE
        }
    }
}
