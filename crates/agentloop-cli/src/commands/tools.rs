//! `agentloop tools`: how each MCP server is doing (up, or down and why) and what it offers.

use std::process::ExitCode;

use std::collections::BTreeMap;

use agentloop::{
    McpServerConfig, McpSource, ToolCatalog, ToolInfo, ToolSettings, ToolSource,
    core::protocol::{SourceHealth, SourceState, SourceTransport},
};
use serde_json::json;

use crate::{
    cli::{GlobalArgs, ToolsArgs},
    commands::load_config,
    render::count,
};

pub async fn execute(global: GlobalArgs, args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let (config, origin) = load_config(&global)?;
    let llm = json!({
        "provider": config.llm.provider.as_str(),
        "model": config.llm.model,
        "base_url": config.llm.base_url(),
    });
    if !args.json {
        outln!("llm: {}", config.llm.describe())?;
    }
    if config.mcp_servers.is_empty() {
        // The same shape as with servers, so that a script reads `servers` either way.
        if args.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(&json!({"llm": llm, "servers": [], "failed": []}))?
            )?;
        }
        eprintln!("No MCP servers are configured in {origin}. Add a [mcp_servers.NAME] table.");
        return Ok(ExitCode::SUCCESS);
    }
    let oauth = crate::commands::mcp::stored_oauth(&config).await;
    let (servers, failures) = agentloop::mcp::connect_all(&config.mcp_servers, &oauth).await;
    let mut listing = Vec::new();
    for server in &servers {
        listing.push(describe(server, &config.tools).await);
    }
    // Shut down even when printing failed (a reader of stdout that went away).
    let printed = print_listing(&llm, &listing, &failures, &config.mcp_servers, args.json);
    futures::future::join_all(servers.iter().map(|server| server.shutdown())).await;
    printed?;
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn print_listing(
    llm: &serde_json::Value,
    listing: &[serde_json::Value],
    failures: &[(String, agentloop::mcp::McpError)],
    configs: &BTreeMap<String, McpServerConfig>,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let failed: Vec<_> = failures
            .iter()
            .map(|(name, error)| {
                let mut failed = health_json(&SourceHealth {
                    transport: transport(configs.get(name)),
                    state: SourceState::Down {
                        reason: error.to_string(),
                    },
                    restarts: 0,
                });
                failed["server"] = json!(name);
                failed["error"] = json!(error.to_string());
                failed
            })
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(
                &json!({"llm": llm, "servers": listing, "failed": failed})
            )?
        )?;
    } else {
        for server in listing {
            print_server(server)?;
        }
        for (name, error) in failures {
            eprintln!("{name}: down: {error}");
        }
    }
    Ok(())
}

/// A server's tools as the agent sees them: classified by their annotations and the
/// `[tools."server.tool"]` overrides of the configuration.
async fn describe(
    server: &McpSource,
    settings: &BTreeMap<String, ToolSettings>,
) -> serde_json::Value {
    let mut described = health_json(&server.status());
    described["server"] = json!(server.name());
    let tools = match server.tools().await {
        Ok(tools) => tools,
        Err(error) => {
            described["error"] = json!(error.to_string());
            return described;
        }
    };
    let catalog = ToolCatalog::new(tools, settings);
    let tools: Vec<_> = catalog
        .entries()
        .iter()
        .map(|entry| {
            let info = entry.tool.info();
            let mut tool = json!({
                "name": info.name,
                "classification": if entry.is_mutating() { "mutating" } else { "read-only" },
                "description": info.description,
                "input_schema": info.input_schema,
                "annotations": annotations(info),
            });
            if let Some(title) = &info.title {
                tool["title"] = json!(title);
            }
            if let Some(schema) = &info.output_schema {
                tool["output_schema"] = schema.clone();
            }
            tool
        })
        .collect();
    described["tools"] = json!(tools);
    described
}

/// The MCP annotations (hints) the tool declared, by their names in agentloop's JSON; absent
/// ones left out.
fn annotations(info: &ToolInfo) -> serde_json::Value {
    let hints = [
        ("read_only_hint", info.read_only_hint),
        ("destructive_hint", info.destructive_hint),
        ("idempotent_hint", info.idempotent_hint),
        ("open_world_hint", info.open_world_hint),
    ];
    hints
        .into_iter()
        .filter_map(|(name, hint)| hint.map(|hint| (name.to_owned(), json!(hint))))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// `transport`, `state` (with `reason` when it is not up: what the server printed, for the
/// operator; `/healthz`, which needs no key, leaves it out) and `restarts`.
fn health_json(health: &SourceHealth) -> serde_json::Value {
    serde_json::to_value(health).unwrap_or_else(|_| json!({}))
}

fn transport(config: Option<&McpServerConfig>) -> SourceTransport {
    match config {
        Some(config) if config.is_http() => SourceTransport::Http,
        Some(_) => SourceTransport::Stdio,
        None => SourceTransport::Other,
    }
}

fn print_server(server: &serde_json::Value) -> std::io::Result<()> {
    let name = server["server"].as_str().unwrap_or_default();
    let transport = server["transport"].as_str().unwrap_or_default();
    let state = server["state"].as_str().unwrap_or_default();
    let Some(tools) = server["tools"].as_array() else {
        outln!(
            "{name} ({transport}, {state}): {}",
            server["error"].as_str().unwrap_or("no tools")
        )?;
        return Ok(());
    };
    outln!(
        "{name} ({transport}, {state}, {})",
        count(tools.len() as u64, "tool")
    )?;
    let width = tools
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(0);
    for tool in tools {
        let description = tool["description"].as_str().unwrap_or_default();
        let first_line = description.lines().next().unwrap_or_default();
        // The title is for people: shown before the description when it says something else.
        let first_line = match tool["title"].as_str() {
            Some(title) if title != first_line => format!("{title}: {first_line}"),
            _ => first_line.to_owned(),
        };
        outln!(
            "  {:width$}  {:9}  {}",
            tool["name"].as_str().unwrap_or_default(),
            tool["classification"].as_str().unwrap_or_default(),
            first_line,
        )?;
    }
    Ok(())
}
