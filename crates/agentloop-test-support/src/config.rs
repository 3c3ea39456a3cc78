//! The `agentloop.toml` of a test: the scripted LLM, the test MCP server (named `test`), a store,
//! and what the test adds. Every harness parses the same text with the real configuration code.

use std::path::{Path, PathBuf};

use crate::mcp::test_mcp_server_config_toml;

/// Builds the text of an `agentloop.toml` for a test.
#[derive(Debug, Clone)]
pub struct TestConfig {
    llm_url: String,
    llm: Vec<String>,
    store_url: Option<String>,
    mcp_log: Option<PathBuf>,
    extra: String,
}

impl TestConfig {
    /// The LLM at `llm_url` (model `scripted`) and the test MCP server; no retries of failed LLM
    /// calls, the store's default place.
    pub fn new(llm_url: &str) -> TestConfig {
        TestConfig {
            llm_url: llm_url.to_string(),
            llm: vec!["max_retries = 0".to_string()],
            store_url: None,
            mcp_log: None,
            extra: String::new(),
        }
    }

    /// One more `key = value` line of `[llm]` (a later one wins over the defaults).
    pub fn llm(mut self, line: &str) -> TestConfig {
        self.llm.push(line.to_string());
        self
    }

    pub fn store(mut self, url: &str) -> TestConfig {
        self.store_url = Some(url.to_string());
        self
    }

    /// The test MCP server logs each call to `log` as it starts (see
    /// [`crate::mcp::wait_for_call`]).
    pub fn mcp_log(mut self, log: &Path) -> TestConfig {
        self.mcp_log = Some(log.to_path_buf());
        self
    }

    /// More TOML, after the rest.
    pub fn extra(mut self, toml: &str) -> TestConfig {
        self.extra.push_str(toml);
        self.extra.push('\n');
        self
    }

    pub fn toml(&self) -> String {
        let mut llm: Vec<&str> = Vec::new();
        for line in &self.llm {
            let key = line.split('=').next().unwrap_or_default().trim();
            llm.retain(|earlier| earlier.split('=').next().unwrap_or_default().trim() != key);
            llm.push(line);
        }
        let mut text = format!(
            "[llm]\nbase_url = {}\nmodel = \"scripted\"\n{}\n\n",
            toml_string(&self.llm_url),
            llm.join("\n")
        );
        if let Some(url) = &self.store_url {
            text.push_str(&format!("[store]\nurl = {}\n\n", toml_string(url)));
        }
        text.push_str(&test_mcp_server_config_toml(
            "test",
            self.mcp_log.as_deref(),
        ));
        text.push('\n');
        text.push_str(&self.extra);
        text
    }
}

fn toml_string(text: &str) -> String {
    serde_json::Value::from(text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn later_llm_keys_win_and_sections_come_in_order() {
        let toml = TestConfig::new("http://127.0.0.1:9/v1")
            .llm("max_retries = 2")
            .store("sqlite::memory:")
            .extra("[agent]\nmax_iterations = 3")
            .toml();
        assert!(toml.contains("max_retries = 2") && !toml.contains("max_retries = 0"));
        let store = toml.find("[store]").unwrap_or_default();
        let agent = toml.find("[agent]").unwrap_or_default();
        assert!(store > 0 && agent > store, "{toml}");
        assert!(toml.contains("[mcp_servers.test]"), "{toml}");
    }
}
