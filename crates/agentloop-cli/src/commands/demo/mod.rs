//! `agentloop demo [--serve]`: a real run with no key and no network. Everything is the real
//! thing except the model: the runtime and its loop, an MCP server started over stdio (built
//! into this binary: `agentloop demo-tools`), the SQLite store `./agentloop-demo.db`, and a
//! scripted model (`llm.provider = "scripted"`) whose built-in script calls those tools with
//! arguments that fit their schemas.

pub mod tools_server;

use std::{
    path::{Path, PathBuf},
    process::ExitCode,
};

use agentloop::{Config, ConfigOrigin, KeyStore};
use anyhow::Context;

use crate::cli::{DEMO_LISTEN, DemoArgs, GlobalArgs, RunArgs};

/// The built-in script of the demo's model.
const SCRIPT: &str = include_str!("script.toml");
/// The demo's store, in the working directory, kept after the demo.
pub const DATABASE: &str = "agentloop-demo.db";
pub const QUESTION: &str = "Add 2 and 40, then echo the result.";
/// The web panel's hint about keys, for the demo: the key is in the banner, and made anew at
/// each start (keys of earlier starts stay valid in ./agentloop-demo.db).
const KEY_HINT: &str = "This is agentloop demo --serve: sign in with the key on its \"API key:\" \
                        line, printed in the terminal where it runs (user demo).";
const REAL_MODEL: &str = "OPENAI_API_KEY=sk-... agentloop --config examples/agentloop.toml run \
                          \"Add 2 and 40, then echo the result.\"";

pub async fn execute(global: GlobalArgs, args: DemoArgs) -> anyhow::Result<ExitCode> {
    if let Some(path) = &global.config {
        anyhow::bail!(
            "agentloop demo reads no configuration file: it runs with its own (a scripted \
             model, the tools built into this binary, ./{DATABASE}). Drop --config {}, or run \
             with your configuration: `agentloop --config {} run QUERY` or `agentloop --config \
             {} serve`",
            path.display(),
            path.display(),
            path.display()
        );
    }
    let script = ScriptFile::write()?;
    let config = demo_config(&script.path, &args.listen)?;
    eprintln!(
        "agentloop demo: a real run with no API key and no network. The runtime, the MCP \
         tools (get-sum and echo, from an MCP server built into this binary and started over \
         stdio) and the store (SQLite, ./{DATABASE}) are the real ones; the model is \
         scripted: its replies were written in advance."
    );
    let code = if args.serve {
        serve(&config).await?
    } else {
        let run = RunArgs {
            query: vec![QUESTION.to_string()],
            json: args.json,
            max_iterations: None,
            session: args.session,
            user: "demo".into(),
            no_history: false,
            read_only: false,
            entity: None,
            workflow: None,
            record: None,
            replay: None,
            attach: Vec::new(),
        };
        let code = crate::commands::run::run_config(&config, run, |session| {
            format!("agentloop demo --session {session}")
        })
        .await?;
        eprintln!(
            "\nThat was a real agent loop with a scripted model (llm.provider = \"scripted\"): \
             the tool calls ran for real, and the session is saved in ./{DATABASE} (see it with \
             DATABASE_URL=sqlite://{DATABASE} agentloop sessions list).\nWith a real model:\n  \
             {REAL_MODEL}\nThe server, the API and the event stream: agentloop demo --serve"
        );
        code
    };
    drop(script);
    Ok(code)
}

async fn serve(config: &Config) -> anyhow::Result<ExitCode> {
    crate::commands::serve::serve_config(
        config,
        "the demo's built-in configuration",
        &format!(
            "choose another address with --listen ADDRESS or AGENTLOOP_LISTEN (default \
             {DEMO_LISTEN}; port 0 takes a free one)"
        ),
        Some(KEY_HINT),
        async |address, store| {
            let key = store
                .create_api_key("demo")
                .await
                .context("cannot create the demo's API key")?;
            let root = format!("http://{address}");
            outln!("agentloop demo server (scripted model, no network):")?;
            outln!("  panel:   {root}/")?;
            outln!("  API:     {root}/v1/runs  (OpenAPI: {root}/openapi.json)")?;
            outln!("  API key: {}  (user demo)", key.secret)?;
            outln!(
                "  try:     curl -N {root}/v1/runs -H 'Authorization: Bearer {}' -H \
                 'Content-Type: application/json' -d '{{\"query\": \"{QUESTION}\"}}'",
                key.secret
            )?;
            outln!("Stop it with Ctrl-C. With a real model: agentloop --config examples/agentloop.toml serve")?;
            Ok(())
        },
    )
    .await
}

/// The demo's configuration: the scripted model, the built-in MCP server, the demo's store.
fn demo_config(script: &Path, listen: &str) -> anyhow::Result<Config> {
    let executable = std::env::current_exe().context("cannot find this program's path")?;
    let quoted = |text: &str| serde_json::to_string(text).unwrap_or_default();
    let text = format!(
        "[llm]\nprovider = \"scripted\"\nmodel = \"scripted-demo\"\nscript = {script}\n\n\
         [agent]\nsystem_prompt = \"You are a helpful copilot. Use the tools to complete the \
         task, then answer briefly.\"\n\n\
         [store]\nurl = {store}\n\n[server]\nlisten = {listen}\n\n\
         [mcp_servers.demo]\ncommand = {command}\nargs = [\"demo-tools\"]\n",
        script = quoted(&script.to_string_lossy()),
        store = quoted(&format!("sqlite://{DATABASE}")),
        listen = quoted(listen),
        command = quoted(&executable.to_string_lossy()),
    );
    let config = Config::parse(&text, ConfigOrigin::Defaults)?;
    config.validate()?;
    Ok(config)
}

/// The built-in script as a file for the scripted model, removed when dropped.
struct ScriptFile {
    path: PathBuf,
}

impl ScriptFile {
    fn write() -> anyhow::Result<ScriptFile> {
        let path =
            std::env::temp_dir().join(format!("agentloop-demo-script-{}.toml", std::process::id()));
        std::fs::write(&path, SCRIPT)
            .with_context(|| format!("cannot write the demo's script to {}", path.display()))?;
        Ok(ScriptFile { path })
    }
}

impl Drop for ScriptFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_built_in_script_is_a_valid_script() {
        agentloop::ScriptedModel::from_text(SCRIPT, Path::new("script.toml")).unwrap();
        let config = demo_config(Path::new("/tmp/s.toml"), "127.0.0.1:0").unwrap();
        assert_eq!(config.mcp_servers["demo"].args, ["demo-tools"]);
    }
}
