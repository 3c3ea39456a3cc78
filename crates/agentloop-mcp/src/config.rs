//! One `[mcp_servers.NAME]` table of `agentloop.toml`.

use std::{collections::BTreeMap, path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

const DEFAULT_STARTUP_TIMEOUT_S: f64 = 30.0;

/// How to start one MCP server as a child process speaking MCP over stdio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program to run, found on `PATH` unless it is a path.
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    /// Added to the environment agentloop itself runs with.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Working directory of the server; agentloop's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// How long the server may take to start, answer the handshake and list its tools.
    #[serde(default = "default_startup_timeout_s")]
    pub startup_timeout_s: f64,
}

fn default_startup_timeout_s() -> f64 {
    DEFAULT_STARTUP_TIMEOUT_S
}

impl McpServerConfig {
    /// A server started with `command` and everything else at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: command.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            startup_timeout_s: DEFAULT_STARTUP_TIMEOUT_S,
        }
    }

    pub fn with_args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args = args.into_iter().map(Into::into).collect();
        self
    }

    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.env.insert(key.into(), value.into());
        self
    }

    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }

    pub fn with_startup_timeout_s(mut self, seconds: f64) -> Self {
        self.startup_timeout_s = seconds;
        self
    }

    /// Checks the table of the server called `name`; the message names the offending key.
    pub fn validate(&self, name: &str) -> Result<(), String> {
        validate_server_name(name)?;
        if self.command.trim().is_empty() {
            return Err(format!("mcp_servers.{name}.command must not be empty"));
        }
        if let Some(key) = self
            .env
            .keys()
            .find(|key| key.is_empty() || key.contains(['=', '\0']))
        {
            return Err(format!(
                "mcp_servers.{name}.env has an invalid variable name {key:?}: it must not be \
                 empty or contain '=' or NUL"
            ));
        }
        if self.startup_timeout().is_none() {
            return Err(format!(
                "mcp_servers.{name}.startup_timeout_s must be a positive number of seconds, got {}",
                self.startup_timeout_s
            ));
        }
        Ok(())
    }

    /// The startup timeout, or `None` when `startup_timeout_s` is not a usable duration.
    pub(crate) fn startup_timeout(&self) -> Option<Duration> {
        if self.startup_timeout_s > 0.0 {
            Duration::try_from_secs_f64(self.startup_timeout_s).ok()
        } else {
            None
        }
    }
}

/// Server names become the namespace of their tools (`NAME.tool`), so a `.` or a space in them
/// would make tool names ambiguous or unreadable for the model.
fn validate_server_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("mcp_servers: a server name must not be empty".to_owned());
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(format!(
            "mcp_servers.{name}: the server name may contain only letters, digits, '_' and '-', \
             because it becomes the namespace of its tools ({name}.tool)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(toml_text: &str) -> Result<McpServerConfig, toml::de::Error> {
        toml::from_str(toml_text)
    }

    #[test]
    fn defaults_fill_everything_but_the_command() {
        let config = parse(r#"command = "npx""#).unwrap();
        assert_eq!(config, McpServerConfig::new("npx"));
        assert_eq!(config.startup_timeout_s, 30.0);
    }

    #[test]
    fn every_key_is_read() {
        let config = parse(
            r#"
            command = "node"
            args = ["server.js", "stdio"]
            env = { TOKEN = "x" }
            cwd = "/srv"
            startup_timeout_s = 2.5
            "#,
        )
        .unwrap();
        let expected = McpServerConfig::new("node")
            .with_args(["server.js", "stdio"])
            .with_env("TOKEN", "x")
            .with_cwd("/srv")
            .with_startup_timeout_s(2.5);
        assert_eq!(config, expected);
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let error = parse("command = \"x\"\nurl = \"http://localhost\"").unwrap_err();
        assert!(error.to_string().contains("url"), "{error}");
    }

    #[test]
    fn validate_names_the_offending_key() {
        let empty = McpServerConfig::new("  ");
        assert_eq!(
            empty.validate("files").unwrap_err(),
            "mcp_servers.files.command must not be empty"
        );

        let zero = McpServerConfig::new("x").with_startup_timeout_s(0.0);
        assert!(
            zero.validate("files")
                .unwrap_err()
                .contains("mcp_servers.files.startup_timeout_s")
        );
        let infinite = McpServerConfig::new("x").with_startup_timeout_s(f64::INFINITY);
        assert!(infinite.validate("files").is_err());

        let bad_env = McpServerConfig::new("x").with_env("A=B", "c");
        assert!(
            bad_env
                .validate("files")
                .unwrap_err()
                .contains("mcp_servers.files.env")
        );

        assert_eq!(McpServerConfig::new("x").validate("my_files-2"), Ok(()));
    }

    #[test]
    fn server_names_must_work_as_namespaces() {
        let config = McpServerConfig::new("x");
        for bad in ["", "a.b", "a b", "a/b", "é"] {
            assert!(config.validate(bad).is_err(), "{bad:?} was accepted");
        }
        assert!(
            config
                .validate("a.b")
                .unwrap_err()
                .contains("mcp_servers.a.b")
        );
    }
}
