//! `agentloop tools`: what each MCP server offers.

use std::process::ExitCode;

use std::collections::BTreeMap;

use agentloop::{McpSource, ToolCatalog, ToolSettings, ToolSource};
use serde_json::json;

use crate::{
    cli::{GlobalArgs, ToolsArgs},
    commands::load_config,
};

pub async fn execute(global: GlobalArgs, args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let (config, origin) = load_config(&global)?;
    if config.mcp_servers.is_empty() {
        eprintln!("No MCP servers are configured in {origin}. Add a [mcp_servers.NAME] table.");
        return Ok(ExitCode::SUCCESS);
    }
    let (servers, failures) = agentloop::mcp::connect_all(&config.mcp_servers).await;
    let mut listing = Vec::new();
    for server in &servers {
        listing.push(describe(server, &config.tools).await);
    }
    if args.json {
        let failed: Vec<_> = failures
            .iter()
            .map(|(name, error)| json!({"server": name, "error": error.to_string()}))
            .collect();
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({"servers": listing, "failed": failed}))?
        );
    } else {
        for server in &listing {
            print_server(server);
        }
        for (name, error) in &failures {
            eprintln!("{name}: not available: {error}");
        }
    }
    futures::future::join_all(servers.iter().map(|server| server.shutdown())).await;
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// A server's tools as the agent sees them: classified by their annotations and the
/// `[tools."server.tool"]` overrides of the configuration.
async fn describe(
    server: &McpSource,
    settings: &BTreeMap<String, ToolSettings>,
) -> serde_json::Value {
    let tools = match server.tools().await {
        Ok(tools) => tools,
        Err(error) => return json!({"server": server.name(), "error": error.to_string()}),
    };
    let catalog = ToolCatalog::new(tools, settings);
    let tools: Vec<_> = catalog
        .entries()
        .iter()
        .map(|entry| {
            let info = entry.tool.info();
            json!({
                "name": info.name,
                "classification": if entry.is_mutating() { "mutating" } else { "read-only" },
                "description": info.description,
                "input_schema": info.input_schema,
            })
        })
        .collect();
    json!({"server": server.name(), "tools": tools})
}

fn print_server(server: &serde_json::Value) {
    let name = server["server"].as_str().unwrap_or_default();
    let Some(tools) = server["tools"].as_array() else {
        println!("{name}: {}", server["error"].as_str().unwrap_or("no tools"));
        return;
    };
    println!("{name} ({} tools)", tools.len());
    let width = tools
        .iter()
        .filter_map(|tool| tool["name"].as_str())
        .map(str::len)
        .max()
        .unwrap_or(0);
    for tool in tools {
        let description = tool["description"].as_str().unwrap_or_default();
        let first_line = description.lines().next().unwrap_or_default();
        println!(
            "  {:width$}  {:9}  {}",
            tool["name"].as_str().unwrap_or_default(),
            tool["classification"].as_str().unwrap_or_default(),
            first_line,
        );
    }
}
