//! MCP servers for tests, run as real child processes: agentloop's own small test server
//! (`agentloop-test-mcp`, see [`server`]; over stdio, or over HTTP with `--http ADDR`) and the
//! official reference servers from npm.

mod binary;
mod http_process;
pub mod http_server;
mod reference;
pub mod server;

use std::path::Path;

pub use binary::{scripted_llm_path, test_mcp_server_path};
pub use http_process::{TestMcpHttp, test_mcp_server_http};
pub use http_server::{TOKEN_ENV, serve_http};
pub use reference::{
    ReferenceHttpServer, reference_server_everything, reference_server_everything_http,
    reference_server_filesystem, test_servers_dir,
};
pub use server::{CRASH_EXIT_STATUS, LOG_ENV, TestMcpServer};

/// A `[mcp_servers.NAME]` table of `agentloop.toml` starting the test server, logging its calls
/// to `log` when given.
pub fn test_mcp_server_config_toml(name: &str, log: Option<&Path>) -> String {
    let command = test_mcp_server_path();
    let mut table = format!(
        "[mcp_servers.{name}]\ncommand = {}\n",
        toml_string(&command.to_string_lossy())
    );
    if let Some(log) = log {
        table.push_str(&format!(
            "env = {{ {LOG_ENV} = {} }}\n",
            toml_string(&log.to_string_lossy())
        ));
    }
    table
}

/// A `[mcp_servers.NAME]` table of `agentloop.toml` reaching a server over HTTP at `url`, such as
/// [`TestMcpHttp::url`].
pub fn test_mcp_http_config_toml(name: &str, url: &str) -> String {
    format!("[mcp_servers.{name}]\nurl = {}\n", toml_string(url))
}

/// A TOML basic string: JSON string escapes are a subset of TOML's.
fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

/// Waits (at most 20 s) until the test server logged a call of `tool`, and returns it. A call is
/// logged as it starts, before it does anything: this is the signal that it has begun.
pub async fn wait_for_call(log: &Path, tool: &str) -> serde_json::Value {
    let what = format!("a call of {tool} in {}", log.display());
    crate::wait::eventually(&what, std::time::Duration::from_secs(20), || async {
        read_test_mcp_log(log)
            .into_iter()
            .find(|call| call["tool"] == tool)
    })
    .await
}

/// The calls the test server logged, one JSON value per line; empty when nothing was logged.
#[allow(clippy::panic)]
pub fn read_test_mcp_log(path: &Path) -> Vec<serde_json::Value> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Vec::new(),
        Err(error) => panic!("cannot read the test MCP log {}: {error}", path.display()),
    };
    text.lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|error| {
                panic!(
                    "bad line {line:?} in the test MCP log {}: {error}",
                    path.display()
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn toml_strings_escape_quotes_and_backslashes() {
        assert_eq!(toml_string(r#"C:\a "b""#), r#""C:\\a \"b\"""#);
    }

    #[test]
    fn a_missing_log_reads_as_no_calls() {
        let dir = std::env::temp_dir().join("agentloop-test-support-no-such-log.jsonl");
        assert!(read_test_mcp_log(&dir).is_empty());
    }
}
