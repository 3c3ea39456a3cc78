//! `agentloop resources` and `agentloop prompts`: what each MCP server offers besides tools.

use std::process::ExitCode;

use agentloop::{McpSource, ToolSource};
use serde_json::{Value, json};

use crate::{
    cli::{GlobalArgs, ToolsArgs},
    commands::load_config,
    render::count,
};

/// Which listing.
#[derive(Debug, Clone, Copy)]
pub enum Offer {
    Resources,
    Prompts,
}

pub async fn execute(
    global: GlobalArgs,
    args: ToolsArgs,
    offer: Offer,
) -> anyhow::Result<ExitCode> {
    let (config, origin) = load_config(&global)?;
    if config.mcp_servers.is_empty() {
        if args.json {
            outln!(
                "{}",
                serde_json::to_string_pretty(&json!({"servers": [], "failed": []}))?
            )?;
        }
        eprintln!("No MCP servers are configured in {origin}. Add a [mcp_servers.NAME] table.");
        return Ok(ExitCode::SUCCESS);
    }
    let oauth = crate::commands::mcp::stored_oauth(&config).await;
    let (servers, failures) = agentloop::mcp::connect_all(&config.mcp_servers, &oauth).await;
    let mut listing = Vec::new();
    for server in &servers {
        listing.push(match offer {
            Offer::Resources => resources(server).await,
            Offer::Prompts => prompts(server).await,
        });
    }
    // Shut down even when printing failed (a reader of stdout that went away).
    let printed = print(&listing, &failures, offer, args.json);
    futures::future::join_all(servers.iter().map(|server| server.shutdown())).await;
    printed?;
    Ok(if failures.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `{server, resources, templates}`; a server without the capability lists none, and a
/// listing that failed says why in `error`.
async fn resources(server: &McpSource) -> Value {
    let mut described = json!({"server": server.name(), "resources": [], "templates": []});
    if !server.offers_resources().await {
        return described;
    }
    match server.resources().await {
        Ok(resources) => described["resources"] = json!(resources),
        Err(error) => described["error"] = json!(error.to_string()),
    }
    // Templates are optional for a server with resources: one that has none may refuse.
    if let Ok(templates) = server.resource_templates().await {
        described["templates"] = json!(templates);
    }
    described
}

/// `{server, prompts}`.
async fn prompts(server: &McpSource) -> Value {
    let mut described = json!({"server": server.name(), "prompts": []});
    if !server.offers_prompts().await {
        return described;
    }
    match server.prompts().await {
        Ok(prompts) => described["prompts"] = json!(prompts),
        Err(error) => described["error"] = json!(error.to_string()),
    }
    described
}

fn print(
    listing: &[Value],
    failures: &[(String, agentloop::mcp::McpError)],
    offer: Offer,
    json: bool,
) -> anyhow::Result<()> {
    if json {
        let failed: Vec<Value> = failures
            .iter()
            .map(|(name, error)| json!({"server": name, "error": error.to_string()}))
            .collect();
        outln!(
            "{}",
            serde_json::to_string_pretty(&json!({"servers": listing, "failed": failed}))?
        )?;
        return Ok(());
    }
    for server in listing {
        match offer {
            Offer::Resources => print_resources(server)?,
            Offer::Prompts => print_prompts(server)?,
        }
    }
    for (name, error) in failures {
        eprintln!("{name}: down: {error}");
    }
    Ok(())
}

fn text<'a>(value: &'a Value, key: &str) -> &'a str {
    value[key].as_str().unwrap_or_default()
}

fn items<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value[key].as_array().map(Vec::as_slice).unwrap_or_default()
}

fn print_resources(server: &Value) -> std::io::Result<()> {
    let name = text(server, "server");
    if let Some(error) = server["error"].as_str() {
        return outln!("{name}: {error}");
    }
    let (resources, templates) = (items(server, "resources"), items(server, "templates"));
    outln!(
        "{name} ({}, {})",
        count(resources.len() as u64, "resource"),
        count(templates.len() as u64, "template")
    )?;
    for resource in resources {
        let about = [text(resource, "title"), text(resource, "mime_type")]
            .into_iter()
            .filter(|part| !part.is_empty())
            .collect::<Vec<_>>()
            .join(", ");
        outln!(
            "  {}  {}  {about}",
            text(resource, "uri"),
            text(resource, "name")
        )?;
    }
    for template in templates {
        outln!(
            "  {}  {}  {}",
            text(template, "uri_template"),
            text(template, "name"),
            text(template, "description")
        )?;
    }
    Ok(())
}

fn print_prompts(server: &Value) -> std::io::Result<()> {
    let name = text(server, "server");
    if let Some(error) = server["error"].as_str() {
        return outln!("{name}: {error}");
    }
    let prompts = items(server, "prompts");
    outln!("{name} ({})", count(prompts.len() as u64, "prompt"))?;
    for prompt in prompts {
        let arguments: Vec<String> = items(prompt, "arguments")
            .iter()
            .map(|argument| {
                let name = text(argument, "name");
                if argument["required"] == true {
                    name.to_owned()
                } else {
                    format!("[{name}]")
                }
            })
            .collect();
        outln!(
            "  {}({})  {}",
            text(prompt, "name"),
            arguments.join(", "),
            text(prompt, "description")
        )?;
    }
    Ok(())
}
