//! A custom Rust tool beside the MCP tools of `agentloop.toml`, with the run's events consumed
//! as a `Stream`.
//!
//! ```sh
//! OPENAI_API_KEY=sk-... cargo run -p agentloop --example custom_tool -- \
//!     --config examples/agentloop.toml "How many days until 2027-01-01? Then echo the number."
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use agentloop::{Config, EventKind, FnTool, RunRequest, RunStatus, Runtime, ToolError, ToolOutput};
use futures::StreamExt;
use serde_json::json;

/// Exits 0 only when the run completed: 1 when it failed (or the configuration or a server was
/// not usable), as a script or CI job calling it expects.
#[tokio::main]
async fn main() -> Result<ExitCode, Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1).collect::<Vec<_>>();
    let config_path = match args.iter().position(|arg| arg == "--config") {
        Some(i) if i + 1 < args.len() => {
            let path = PathBuf::from(args.remove(i + 1));
            args.remove(i);
            Some(path)
        }
        _ => None,
    };
    let query = if args.is_empty() {
        "How many days are there from 2026-11-21 to 2027-01-01?".to_string()
    } else {
        args.join(" ")
    };

    // A tool written in Rust: its JSON Schema is checked before it is called.
    let days_between = FnTool::new(
        "calendar.days_between",
        "Number of days from one ISO date (YYYY-MM-DD) to another",
        json!({
            "type": "object",
            "properties": {
                "from": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"},
                "to": {"type": "string", "pattern": "^\\d{4}-\\d{2}-\\d{2}$"}
            },
            "required": ["from", "to"]
        }),
        |args, _context| async move {
            let day = |key: &str| -> Result<i64, ToolError> {
                let text = args[key].as_str().unwrap_or_default();
                let parts: Vec<i64> = text.split('-').filter_map(|p| p.parse().ok()).collect();
                match parts[..] {
                    [y, m, d] => Ok(days_from_civil(y, m, d)),
                    _ => Err(ToolError::InvalidArguments(format!(
                        "{key} is not a date: {text}"
                    ))),
                }
            };
            Ok(ToolOutput::json(json!({"days": day("to")? - day("from")?})))
        },
    );

    let (config, origin) = Config::load(config_path.as_deref())?;
    eprintln!("configuration: {origin}");
    let runtime = Runtime::start_with(&config, |builder| builder.tool(days_between)).await?;
    for warning in runtime.warnings() {
        eprintln!("warning: {warning}");
    }

    let mut run = runtime.agent().run(RunRequest::new(query));
    let mut ended = None;
    while let Some(event) = run.next().await {
        match event.kind {
            EventKind::ToolSelected {
                tool, arguments, ..
            } => eprintln!("→ {tool} {arguments}"),
            EventKind::ToolExecuted {
                tool,
                status,
                duration_ms,
                ..
            } => {
                eprintln!("  {tool}: {} in {duration_ms} ms", status.as_str())
            }
            EventKind::FinalResponse { delta } => print!("{delta}"),
            EventKind::Error { message, .. } => eprintln!("error: {message}"),
            EventKind::Done { status, .. } if event.parent_run_id.is_none() => {
                println!("\n[{}]", status.as_str());
                ended = Some(status);
            }
            _ => {}
        }
    }
    runtime.shutdown().await;
    Ok(match ended {
        Some(RunStatus::Completed) => ExitCode::SUCCESS,
        _ => ExitCode::FAILURE,
    })
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = if year >= 0 { year } else { year - 399 } / 400;
    let year_of_era = year - era * 400;
    let month_index = (month + 9) % 12;
    let day_of_year = (153 * month_index + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}
