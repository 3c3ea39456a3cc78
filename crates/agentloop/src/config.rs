//! `agentloop.toml`: `--config FILE`, else `./agentloop.toml`, else built-in defaults; standard
//! environment variables override the file.

mod output;
mod problems;

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use agentloop_core::{
    AgentSettings, InvalidSetting, PolicySettings, Price, PriceTable, Pricing, SubAgentSettings,
    ToolSettings, WorkflowSettings,
};
use agentloop_llm::LlmConfig;
use agentloop_mcp::McpServerConfig;
#[cfg(feature = "server")]
use agentloop_server::ServerConfig;
use agentloop_store::StoreConfig;
use serde::{Deserialize, Serialize};

/// The file looked for in the working directory when no `--config` is given.
pub const DEFAULT_CONFIG_FILE: &str = "agentloop.toml";

/// The whole configuration.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub llm: LlmConfig,
    pub agent: AgentSettings,
    pub store: StoreConfig,
    #[cfg(feature = "server")]
    pub server: ServerConfig,
    /// `[server]`, kept unread: this build has no server (the `server` feature).
    #[cfg(not(feature = "server"))]
    pub server: toml::Table,
    pub policy: PolicySettings,
    pub mcp_servers: BTreeMap<String, McpServerConfig>,
    pub tools: BTreeMap<String, ToolSettings>,
    pub workflows: BTreeMap<String, WorkflowSettings>,
    /// `[agents.NAME]`: sub-agents the main agent calls as the tool `agent.NAME`.
    pub agents: BTreeMap<String, SubAgentSettings>,
    /// `[a2a_agents.NAME]`: remote agents (A2A) the agent calls as the tool `a2a.NAME`.
    pub a2a_agents: BTreeMap<String, crate::A2aAgentConfig>,
    /// `[telemetry]`: where traces go (with the `OTEL_*` variables, read when the runtime
    /// starts).
    pub telemetry: crate::telemetry::TelemetrySettings,
    /// `[prices."MODEL"]`: USD per million tokens, for the cost of each LLM call.
    pub prices: BTreeMap<String, Price>,
    /// `[[guardrails]]`: checks on each run's question or answer (docs/guardrails.md).
    pub guardrails: Vec<crate::guardrails::GuardrailConfig>,
    /// Where `llm.base_url` came from (set by [`Config::load`] and [`Config::apply_env`]): an
    /// error about the server behind it names the setting to change.
    #[serde(skip)]
    pub base_url_origin: SettingOrigin,
}

/// Where a setting's value came from, for messages that must say what to change.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum SettingOrigin {
    /// Nobody set it: the built-in default.
    #[default]
    Default,
    /// The configuration file at this path.
    File(PathBuf),
    /// This environment variable.
    Env(&'static str),
}

impl SettingOrigin {
    /// `key` (as in the file, e.g. `[llm] base_url`) from this origin, in words.
    pub fn describe(&self, key: &str) -> String {
        match self {
            SettingOrigin::Default => format!("the default {key} (no configuration sets it)"),
            SettingOrigin::File(path) => format!("{key} in {}", path.display()),
            SettingOrigin::Env(name) => format!("the {name} environment variable"),
        }
    }
}

/// Where the configuration came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigOrigin {
    File(PathBuf),
    Defaults,
}

impl std::fmt::Display for ConfigOrigin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConfigOrigin::File(path) => write!(f, "{}", path.display()),
            ConfigOrigin::Defaults => write!(f, "built-in defaults"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("configuration file {path} not found (given with --config)")]
    NotFound { path: PathBuf },
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{origin}: {message}")]
    Parse {
        origin: ConfigOrigin,
        message: String,
    },
    #[error("{origin}: {source}")]
    Invalid {
        origin: ConfigOrigin,
        #[source]
        source: InvalidSetting,
    },
}

impl Config {
    /// Loads the configuration the CLI and server use: the file, then the environment.
    pub fn load(explicit: Option<&Path>) -> Result<(Config, ConfigOrigin), ConfigError> {
        let (mut config, origin) = Self::load_file(explicit)?;
        config.apply_env(|name| std::env::var(name).ok());
        config.validate().map_err(|source| ConfigError::Invalid {
            origin: origin.clone(),
            source,
        })?;
        Ok((config, origin))
    }

    fn load_file(explicit: Option<&Path>) -> Result<(Config, ConfigOrigin), ConfigError> {
        let path = match explicit {
            Some(path) if !path.exists() => {
                return Err(ConfigError::NotFound {
                    path: path.to_path_buf(),
                });
            }
            Some(path) => path.to_path_buf(),
            None if Path::new(DEFAULT_CONFIG_FILE).exists() => PathBuf::from(DEFAULT_CONFIG_FILE),
            None => return Ok((Config::default(), ConfigOrigin::Defaults)),
        };
        let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::Read {
            path: path.clone(),
            source,
        })?;
        let origin = ConfigOrigin::File(path.clone());
        let mut config = Self::parse(&text, origin.clone())?;
        let sets_base_url = toml::from_str::<toml::Table>(&text).is_ok_and(|table| {
            table
                .get("llm")
                .and_then(|llm| llm.get("base_url"))
                .is_some()
        });
        if sets_base_url {
            config.base_url_origin = SettingOrigin::File(path.clone());
        }
        let base = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        config.resolve_paths(&base);
        output::read_schema_file(&mut config.agent.output_schema, &base).map_err(|source| {
            ConfigError::Invalid {
                origin: origin.clone(),
                source,
            }
        })?;
        Ok((config, origin))
    }

    /// Parses TOML text; unknown keys and wrong types are errors that name the key and line,
    /// every one of them at once, in file order.
    pub fn parse(text: &str, origin: ConfigOrigin) -> Result<Config, ConfigError> {
        problems::read(text).map_err(|message| ConfigError::Parse { origin, message })
    }

    /// Applies the provider's base URL variable (`OPENAI_BASE_URL`, or `ANTHROPIC_BASE_URL`
    /// for `provider = "anthropic"`), `DATABASE_URL` and `AGENTLOOP_LISTEN` (the API key is
    /// read by the LLM client from `llm.api_key_env`, else the provider's `OPENAI_API_KEY` or
    /// `ANTHROPIC_API_KEY`).
    pub fn apply_env(&mut self, env: impl Fn(&str) -> Option<String>) {
        let set = |name: &str| {
            env(name)
                .map(|value| value.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let base_url_env = self.llm.provider.base_url_env();
        if let Some(url) = set(base_url_env) {
            self.llm.base_url = Some(url);
            self.base_url_origin = SettingOrigin::Env(base_url_env);
        }
        if let Some(url) = set("DATABASE_URL") {
            self.store.url = url;
        }
        #[cfg(feature = "server")]
        if let Some(listen) = set("AGENTLOOP_LISTEN") {
            self.server.listen = listen;
        }
    }

    /// Checks the values TOML types cannot express.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        self.llm.validate()?;
        self.agent.validate()?;
        self.store.validate()?;
        #[cfg(feature = "server")]
        self.check_server()?;
        for (name, server) in &self.mcp_servers {
            server.validate(name)?;
        }
        for (tool, settings) in &self.tools {
            settings.validate(tool)?;
        }
        for (name, agent) in &self.agents {
            agent.validate(name)?;
        }
        for (name, agent) in &self.a2a_agents {
            agent.validate(name)?;
        }
        self.check_prices()?;
        crate::guardrails::validate(&self.guardrails)?;
        for (name, workflow) in &self.workflows {
            if workflow.tools.is_empty() {
                let key = format!("workflows.{name}.tools");
                let message =
                    format!("{key} must name at least one tool (\"server.tool\" or \"server.*\")");
                return Err(InvalidSetting::new(key, message));
            }
        }
        Ok(())
    }

    /// `[server]`, alone and with the store it serves.
    #[cfg(feature = "server")]
    fn check_server(&self) -> Result<(), InvalidSetting> {
        self.server.validate()?;
        if self.server.threads > 0 && self.store.is_postgres() {
            // Its pool's connections are polled by the runtime that opened them: the serving
            // threads' connections would stop with them, and every statement crosses threads.
            return Err(InvalidSetting::new(
                "server.threads",
                format!(
                    "server.threads = {} serves on threads of their own, which pays with a \
                     SQLite store only: with PostgreSQL each statement would cross threads \
                     (20% more CPU per run, measured) and the connections those threads open \
                     would stop with them; remove server.threads (or set it to 0)",
                    self.server.threads
                ),
            ));
        }
        Ok(())
    }

    /// The price table (the built-in prices under `[prices."MODEL"]`) and the model a call
    /// without its own is for.
    pub fn pricing(&self) -> Result<Pricing, InvalidSetting> {
        Ok(Pricing {
            prices: std::sync::Arc::new(
                PriceTable::with_built_in(self.prices.clone()).map_err(InvalidSetting::from)?,
            ),
            default_model: Some(self.llm.model.clone()),
        })
    }

    /// `[agent]` with the price table: the settings the agent runs with.
    /// The sub-agents the OpenAI-compatible API offers as models (`[agents.NAME] public`),
    /// each with the workflow of its tools ([`Config::public_agent_workflow`]) when it names
    /// some.
    #[cfg(feature = "server")]
    pub fn public_agents(&self) -> Vec<agentloop_server::PublicAgent> {
        self.agents
            .iter()
            .filter(|(_, agent)| agent.public)
            .map(|(name, agent)| agentloop_server::PublicAgent {
                name: name.clone(),
                description: agent.description.clone(),
                system_prompt: agent.system_prompt.clone(),
                model: agent.model.clone(),
                max_iterations: agent.max_iterations,
                workflow: (!agent.tools.is_empty()).then(|| Self::public_agent_workflow(name)),
            })
            .collect()
    }

    /// The workflow that holds a public sub-agent's tools when a request runs it as a model:
    /// `agent.NAME` (it replaces a workflow of the file named so).
    pub fn public_agent_workflow(name: &str) -> String {
        format!("agent.{name}")
    }

    pub fn agent_settings(&self) -> Result<AgentSettings, InvalidSetting> {
        Ok(AgentSettings {
            pricing: self.pricing()?,
            output_mode: Some(
                self.agent
                    .output_mode
                    .unwrap_or_else(|| output::default_mode(&self.llm)),
            ),
            ..self.agent.clone()
        })
    }

    #[cfg(feature = "server")]
    fn server_cost_limit(&self) -> bool {
        self.server.user_daily_cost_usd.is_some()
    }

    #[cfg(not(feature = "server"))]
    fn server_cost_limit(&self) -> bool {
        false
    }

    /// Prices are numbers of 0 or more; a cost limit (`agent.budget.max_cost_usd`,
    /// `server.user_daily_cost_usd`) needs a price for every configured model, or it could
    /// not be kept.
    fn check_prices(&self) -> Result<(), InvalidSetting> {
        let table = self.pricing()?.prices;
        let limit = if self.agent.budget.max_cost_usd.is_some() {
            "agent.budget.max_cost_usd"
        } else if self.server_cost_limit() {
            "server.user_daily_cost_usd"
        } else {
            return Ok(());
        };
        let models = std::iter::once(&self.llm.model)
            .chain(&self.agent.planning.model)
            .chain(&self.agent.review.model)
            .chain(
                self.agents
                    .values()
                    .filter_map(|agent| agent.model.as_ref()),
            );
        for model in models {
            if table.price(model).is_none() {
                return Err(InvalidSetting::new(
                    limit,
                    format!(
                        "{limit} needs the price of every model it pays for: add [prices.\"{model}\"] with input and output (USD per million tokens)"
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Paths in the file are relative to the file (the LLM's script and cassettes, the tool
    /// descriptions): MCP servers start in its directory (so that
    /// `args = ["tools.py"]` works from anywhere) and a relative SQLite database lives next to
    /// it.
    fn resolve_paths(&mut self, base: &Path) {
        for file in [
            &mut self.llm.script,
            &mut self.llm.record,
            &mut self.llm.replay,
        ] {
            if let Some(path) = file.take() {
                *file = Some(if path.is_relative() {
                    base.join(path)
                } else {
                    path
                });
            }
        }
        if let Some(file) = self.agent.tool_descriptions.take() {
            self.agent.tool_descriptions = Some(if file.is_relative() {
                base.join(file)
            } else {
                file
            });
        }
        if let Some(relative) = self.store.url.strip_prefix("sqlite://")
            && !relative.starts_with('/')
            && base != Path::new(".")
        {
            let (path, params) = relative
                .split_once('?')
                .map_or((relative, None), |(p, q)| (p, Some(q)));
            let joined = base.join(path);
            self.store.url = match params {
                Some(params) => format!("sqlite://{}?{params}", joined.display()),
                None => format!("sqlite://{}", joined.display()),
            };
        }
        for server in self.mcp_servers.values_mut() {
            // Only child processes have a working directory.
            server.resolve_cwd(base);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Config, ConfigError> {
        Config::parse(text, ConfigOrigin::File("agentloop.toml".into()))
    }

    #[test]
    fn serving_threads_are_refused_with_postgres_and_taken_with_sqlite() {
        let threads = |url: &str| {
            let mut config = Config::default();
            config.store.url = url.to_string();
            config.server.threads = 2;
            config.validate()
        };
        assert_eq!(threads("sqlite://agentloop.db"), Ok(()));
        assert_eq!(threads("sqlite::memory:"), Ok(()));
        let refused = threads("postgres://u@db/agentloop").unwrap_err();
        assert_eq!(refused.key, "server.threads");
        assert!(refused.message.contains("PostgreSQL"), "{refused}");
        let file = parse("[store]\nurl = \"postgresql://db/x\"\n[server]\nthreads = 1\n").unwrap();
        assert_eq!(file.validate().unwrap_err().key, "server.threads");
    }

    #[test]
    fn the_design_example_parses() {
        let config = parse(
            r#"
            [llm]
            provider = "openai"
            base_url = "http://127.0.0.1:9/v1"
            model = "gpt-4o-mini"
            api_key_env = "MY_KEY"
            stream = false
            timeout_s = 30
            max_retries = 1

            [agent]
            system_prompt = "Be brief."
            max_iterations = 5
            tool_output_max_chars = 2000
            parallel_tools = 2
            max_consecutive_failures = 3
            tool_failure_limit = 2
            tool_timeout_s = 10

            [mcp_servers.projects]
            command = "python3"
            args = ["tools.py"]
            env = { TOKEN = "x" }

            [tools."projects.update_quote_totals"]
            timeout_s = 5
            mutating = true

            [policy]
            mutation_rate = "10/minute"

            [workflows.estimates]
            tools = ["projects.*", "kb.search"]
            "#,
        )
        .unwrap();
        assert_eq!(config.agent.max_iterations, 5);
        assert_eq!(config.llm.model, "gpt-4o-mini");
        assert!(!config.llm.stream);
        assert_eq!(config.mcp_servers["projects"].args, ["tools.py"]);
        assert_eq!(
            config.tools["projects.update_quote_totals"].timeout_s,
            Some(5.0)
        );
        assert_eq!(
            config.tools["projects.update_quote_totals"].mutating,
            Some(true)
        );
        assert_eq!(
            config.policy.mutation_rate.map(|rate| rate.to_string()),
            Some("10/minute".to_string())
        );
        assert!(config.workflows["estimates"].allows("projects.update_quote_totals"));
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn planning_review_clarification_and_sub_agents_are_configured() {
        let config = parse(
            r#"
            [agent]
            ask_user = true

            [agent.planning]
            enabled = true
            model = "small-model"

            [agent.review]
            every_n_tool_calls = 3

            [tools."kb.fetch"]
            requires_clarity = true

            [agents.researcher]
            description = "Finds facts"
            system_prompt = "You research."
            tools = ["kb.*"]
            max_iterations = 4
            "#,
        )
        .unwrap();
        assert!(config.agent.ask_user && config.agent.planning.enabled);
        assert_eq!(config.agent.planning.model.as_deref(), Some("small-model"));
        assert_eq!(config.agent.review.every_n_tool_calls, Some(3));
        assert!(config.tools["kb.fetch"].requires_clarity);
        let researcher = &config.agents["researcher"];
        assert_eq!(researcher.tools, ["kb.*"]);
        assert_eq!(researcher.max_iterations, Some(4));
        assert_eq!(researcher.timeout_s, 300.0);
        assert_eq!(config.validate(), Ok(()));

        let bad = parse("[agents.\"two words\"]\n").unwrap();
        assert!(
            bad.validate()
                .unwrap_err()
                .message
                .contains("agents.two words")
        );
        let bad = parse("[agents.x]\nmax_iterations = 0\n").unwrap();
        assert!(
            bad.validate()
                .unwrap_err()
                .message
                .contains("agents.x.max_iterations")
        );
        let bad = parse("[agent.review]\nevery_n_tool_calls = 0\n").unwrap();
        assert!(
            bad.validate()
                .unwrap_err()
                .message
                .contains("every_n_tool_calls")
        );
        assert!(parse("[agents.x]\nprompt = \"typo\"\n").is_err());
    }

    #[test]
    fn the_documented_configurations_parse_and_validate() {
        // The complete example of the configuration reference, every table of it.
        let reference = include_str!("../../../docs/configuration.md");
        let start = reference
            .find("```toml\n[llm]")
            .expect("docs/configuration.md has the complete example");
        let block = &reference[start + "```toml\n".len()..];
        let block = &block[..block.find("```").unwrap()];
        let config = parse(block).unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert!(config.agent.planning.model.is_some() && config.agents.contains_key("researcher"));
        assert!(config.telemetry.otlp_endpoint.is_some() && !config.telemetry.capture_content);
        // The quick start's example, with its optional sections turned on.
        let example = include_str!("../../../examples/agentloop.toml");
        let enabled: String = example
            .lines()
            .map(|line| match line.strip_prefix("# ") {
                Some(rest) if rest.starts_with('[') || rest.contains(" = ") => {
                    rest.split("  #").next().unwrap_or(rest).to_string()
                }
                _ => line.to_string(),
            })
            .collect::<Vec<_>>()
            .join("\n");
        let config = parse(&enabled).unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert!(config.agent.planning.enabled);
        assert_eq!(config.agents["calculator"].tools, ["everything.get-sum"]);
        assert_eq!(
            config.telemetry.otlp_endpoint.as_deref(),
            Some("http://127.0.0.1:4318")
        );
    }

    #[test]
    fn unknown_keys_are_named_with_their_line() {
        let error = parse("[agent]\nmax_iterations = 3\nmax_iteration = 4\n").unwrap_err();
        let message = error.to_string();
        assert!(message.contains("max_iteration"), "{message}");
        assert!(message.contains("line 3"), "{message}");
        let error = parse("[agnet]\n").unwrap_err().to_string();
        assert!(error.contains("agnet"), "{error}");
    }

    #[test]
    fn wrong_types_are_named() {
        let error = parse("[agent]\nmax_iterations = \"eight\"\n")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("max_iterations") || error.contains("line 2"),
            "{error}"
        );
    }

    #[test]
    fn bad_values_are_refused_by_validation() {
        let error = parse("[policy]\nmutation_rate = \"ten a minute\"\n").unwrap_err();
        assert!(
            error.to_string().contains("policy.mutation_rate"),
            "{error}"
        );
        let config = parse("[workflows.empty]\ntools = []\n").unwrap();
        assert!(
            config
                .validate()
                .unwrap_err()
                .message
                .contains("workflows.empty.tools")
        );
        let config = parse("[agent]\nparallel_tools = 0\n").unwrap();
        assert!(
            config
                .validate()
                .unwrap_err()
                .message
                .contains("agent.parallel_tools")
        );
    }

    #[test]
    fn the_environment_overrides_the_base_url() {
        let mut config = parse("[llm]\nbase_url = \"http://file/v1\"\n").unwrap();
        assert_eq!(config.base_url_origin, SettingOrigin::Default);
        config.apply_env(|name| (name == "OPENAI_BASE_URL").then(|| "http://env/v1".to_string()));
        assert_eq!(config.llm.base_url(), "http://env/v1");
        assert_eq!(
            config.base_url_origin.describe("[llm] base_url"),
            "the OPENAI_BASE_URL environment variable"
        );
        config.apply_env(|_| None);
        assert_eq!(config.llm.base_url(), "http://env/v1");
    }

    #[test]
    fn anthropic_takes_its_base_url_and_the_origin_from_anthropic_base_url() {
        let mut config = parse("[llm]\nprovider = \"anthropic\"\n").unwrap();
        let env = |name: &str| match name {
            "OPENAI_BASE_URL" => Some("http://openai/v1".to_string()),
            "ANTHROPIC_BASE_URL" => Some("http://anthropic".to_string()),
            _ => None,
        };
        config.apply_env(env);
        assert_eq!(config.llm.base_url(), "http://anthropic");
        assert_eq!(
            config.base_url_origin,
            SettingOrigin::Env("ANTHROPIC_BASE_URL")
        );
    }

    #[test]
    fn servers_start_in_the_directory_of_the_config_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentloop.toml");
        std::fs::write(
            &path,
            "[mcp_servers.a]\ncommand = \"x\"\n[mcp_servers.b]\ncommand = \"y\"\ncwd = \"sub\"\n",
        )
        .unwrap();
        let (config, origin) = Config::load_file(Some(&path)).unwrap();
        assert_eq!(origin, ConfigOrigin::File(path.clone()));
        assert_eq!(config.mcp_servers["a"].cwd.as_deref(), Some(dir.path()));
        assert_eq!(config.mcp_servers["b"].cwd, Some(dir.path().join("sub")));
    }

    #[test]
    fn the_base_url_is_said_to_come_from_the_file_only_when_the_file_sets_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentloop.toml");
        std::fs::write(&path, "[agent]\nmax_iterations = 3\n").unwrap();
        let (config, _) = Config::load_file(Some(&path)).unwrap();
        assert_eq!(config.base_url_origin, SettingOrigin::Default);
        std::fs::write(&path, "[llm]\nbase_url = \"http://127.0.0.1:8000\"\n").unwrap();
        let (config, _) = Config::load_file(Some(&path)).unwrap();
        assert_eq!(
            config.base_url_origin.describe("[llm] base_url"),
            format!("[llm] base_url in {}", path.display())
        );
    }

    #[test]
    fn a_file_named_without_a_directory_resolves_to_the_working_directory() {
        let mut config = parse("[mcp_servers.a]\ncommand = \"x\"\n").unwrap();
        config.resolve_paths(Path::new("."));
        assert_eq!(config.mcp_servers["a"].cwd.as_deref(), Some(Path::new(".")));
    }

    #[test]
    fn the_database_url_comes_from_the_environment_and_sqlite_paths_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentloop.toml");
        std::fs::write(
            &path,
            "[store]\nurl = \"sqlite://data/memory.db?mode=rwc\"\n",
        )
        .unwrap();
        let (mut config, _) = Config::load_file(Some(&path)).unwrap();
        assert_eq!(
            config.store.url,
            format!("sqlite://{}/data/memory.db?mode=rwc", dir.path().display())
        );
        config.apply_env(|name| (name == "DATABASE_URL").then(|| "postgres://db/x".to_string()));
        assert_eq!(config.store.url, "postgres://db/x");
        let default = Config::default();
        assert_eq!(default.store.url, "sqlite://agentloop.db");
        assert!(
            parse("[store]\nurl = \"mysql://x\"\n")
                .unwrap()
                .validate()
                .unwrap_err()
                .message
                .contains("store.url")
        );
    }

    #[test]
    fn an_http_server_in_a_file_gets_no_working_directory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("agentloop.toml");
        std::fs::write(
            &path,
            "[mcp_servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\nheaders = { Authorization = \"Bearer x\" }\n",
        )
        .unwrap();
        let (config, _) = Config::load_file(Some(&path)).unwrap();
        assert_eq!(config.mcp_servers["web"].cwd, None);
        assert_eq!(config.validate(), Ok(()));
    }

    #[test]
    fn prices_and_budgets_are_read_and_checked() {
        let config = parse(
            r#"
            [llm]
            model = "openai/gpt-4o-mini"

            [prices."gpt-4o-mini"]
            input = 0.15
            output = 0.60
            cached_input = 0.075

            [agent.budget]
            max_tokens = 200000
            max_cost_usd = 0.50

            [server]
            user_daily_cost_usd = 5.0
            user_daily_tokens = 1000000
            "#,
        )
        .unwrap();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.agent.budget.max_tokens, Some(200_000));
        assert_eq!(config.server.user_daily_tokens, Some(1_000_000));
        let settings = config.agent_settings().unwrap();
        let price = settings.pricing.prices.price("openai/gpt-4o-mini").unwrap();
        assert_eq!(price.cached_input, Some(0.075));
        assert_eq!(
            settings.pricing.default_model.as_deref(),
            Some("openai/gpt-4o-mini")
        );
    }

    #[test]
    fn bad_prices_and_budgets_are_refused_with_their_key() {
        let key = |text: &str| parse(text).unwrap().validate().unwrap_err().key;
        assert_eq!(
            key("[prices.m]\ninput = -0.1\noutput = 1\n"),
            "prices.\"m\".input"
        );
        assert_eq!(
            key("[agent.budget]\nmax_cost_usd = 0\n"),
            "agent.budget.max_cost_usd"
        );
        assert_eq!(
            key("[agent.budget]\nmax_tokens = 0\n"),
            "agent.budget.max_tokens"
        );
        assert_eq!(
            key("[server]\nuser_daily_cost_usd = -5\n"),
            "server.user_daily_cost_usd"
        );
        // A cost limit cannot be kept for a model without a price.
        let error = parse("[llm]\nmodel = \"llama3\"\n[agent.budget]\nmax_cost_usd = 1.0\n")
            .unwrap()
            .validate()
            .unwrap_err();
        assert_eq!(error.key, "agent.budget.max_cost_usd");
        assert!(error.message.contains("[prices.\"llama3\"]"), "{error}");
        // The default model has a built-in price.
        let config = parse("[agent.budget]\nmax_cost_usd = 1.0\n").unwrap();
        assert_eq!(config.validate(), Ok(()));
        let error = parse(
            "[server]\nuser_daily_cost_usd = 1.0\n[prices.\"gpt-4o-mini\"]\ninput = 1\noutput = 1\n[agent.planning]\nmodel = \"cheap\"\n",
        )
        .unwrap()
        .validate()
        .unwrap_err();
        assert!(error.message.contains("cheap"), "{error}");
        // Unknown keys of a price or a budget are named.
        let error = parse("[prices.m]\ninput = 1\noutput = 1\ncache_read = 1\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("cache_read"), "{error}");
        let error = parse("[agent.budget]\nmax_usd = 1\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("max_usd"), "{error}");
    }

    #[test]
    fn a_missing_explicit_file_is_an_error_but_a_missing_default_is_not() {
        let error = Config::load_file(Some(Path::new("/nonexistent/agentloop.toml"))).unwrap_err();
        assert!(matches!(error, ConfigError::NotFound { .. }));
    }
}
