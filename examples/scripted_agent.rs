//! Testing an agent without a model: the agent's own tool (`shop.price`, in Rust) with the
//! scripted model (`llm.provider = "scripted"`), which answers from `shop.script.toml`. The
//! test `crates/agentloop/tests/scripted_example.rs` runs this file's [`run_agent`].
//!
//! ```sh
//! cargo run -p agentloop --example scripted_agent -- "How much are 3 apples?"
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use agentloop::{
    Config, EventKind, FnTool, Provider, RunRequest, RunStatus, Runtime, ToolError, ToolOutput,
    ToolStatus,
};
use futures::StreamExt;
use serde_json::json;

/// What a run did: its end, its answer, each tool call with its status, and its error.
#[derive(Debug, Default)]
pub struct RunReport {
    pub status: Option<RunStatus>,
    pub answer: String,
    pub calls: Vec<(String, ToolStatus)>,
    pub error: Option<String>,
}

/// The agent: its tool, and the scripted model instead of a real one.
pub async fn run_agent(question: &str) -> Result<RunReport, Box<dyn std::error::Error>> {
    let price = FnTool::new(
        "shop.price",
        "The price in EUR of a quantity of an item",
        json!({
            "type": "object",
            "properties": {
                "item": {"type": "string"},
                "quantity": {"type": "integer", "minimum": 1}
            },
            "required": ["item", "quantity"]
        }),
        |args, _context| async move {
            let unit = match args["item"].as_str() {
                Some("apple") => 0.5,
                Some("cherry") => 0.1,
                Some(other) => {
                    return Err(ToolError::Failed(format!("we do not sell {other}")));
                }
                None => return Err(ToolError::InvalidArguments("item".into())),
            };
            let quantity = args["quantity"].as_f64().unwrap_or(1.0);
            Ok(ToolOutput::json(json!({"eur": unit * quantity})))
        },
    );

    let mut config = Config::default();
    config.llm.provider = Provider::Scripted;
    config.llm.script =
        Some(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/shop.script.toml"));
    config.store.url = "sqlite::memory:".into();
    config.validate()?;
    let runtime = Runtime::start_with(&config, |builder| builder.tool(price)).await?;

    let mut report = RunReport::default();
    let mut run = runtime.agent().run(RunRequest::new(question));
    while let Some(event) = run.next().await {
        match event.kind {
            EventKind::ToolExecuted { tool, status, .. } => report.calls.push((tool, status)),
            EventKind::FinalResponse { delta } => report.answer.push_str(&delta),
            EventKind::Error { message, .. } => report.error = Some(message),
            EventKind::Done { status, .. } if event.parent_run_id.is_none() => {
                report.status = Some(status)
            }
            _ => {}
        }
    }
    runtime.shutdown().await;
    Ok(report)
}

#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let question = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let question = if question.is_empty() {
        "How much are 3 apples?".to_string()
    } else {
        question
    };
    let report = run_agent(&question).await?;
    for (tool, status) in &report.calls {
        eprintln!("{tool}: {}", status.as_str());
    }
    if let Some(error) = &report.error {
        eprintln!("error: {error}");
    }
    println!("{}", report.answer);
    Ok(match report.status {
        Some(RunStatus::Completed) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}
