//! One `[mcp_servers.NAME]` table of `agentloop.toml`.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
    time::Duration,
};

use agentloop_core::InvalidSetting;
use reqwest::header::{HeaderName, HeaderValue};
use serde::{Deserialize, Serialize};

use crate::oauth::OAuthConfig;
pub use crate::offer::{ElicitationPolicy, SamplingPolicy};

const DEFAULT_STARTUP_TIMEOUT_S: f64 = 30.0;
const DEFAULT_MAX_RESTARTS: u32 = 10;
const DEFAULT_RESTART_BACKOFF_S: f64 = 0.5;
const DEFAULT_RESTART_BACKOFF_MAX_S: f64 = 30.0;
const DEFAULT_ELICITATION_TIMEOUT_S: f64 = 600.0;

/// Headers the MCP transport sets itself: a value from the configuration would break the
/// protocol (`content-type` included, because the client only sets it when it is absent).
const RESERVED_HEADERS: [&str; 5] = [
    "accept",
    "content-type",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// How to reach one MCP server: a child process speaking MCP over stdio (`command`, `args`,
/// `env`, `cwd`), or a streamable HTTP endpoint (`url`, `headers`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program to run, found on `PATH` unless it is a path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Added to the environment agentloop itself runs with.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory of the server; agentloop's own when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// The MCP endpoint of a server speaking streamable HTTP (`http://host:port/mcp`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Sent with every HTTP request to `url`, such as `Authorization`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// How long the server may take to start (or answer, over HTTP), complete the handshake and
    /// list its tools.
    #[serde(default = "default_startup_timeout_s")]
    pub startup_timeout_s: f64,
    /// How many restarts in a row agentloop makes before it gives up on a server that keeps
    /// stopping (over HTTP: new sessions it tries to open once the server cannot be reached);
    /// 0 never restarts it. A server that stays up for a minute starts the count again.
    #[serde(default = "default_max_restarts")]
    pub max_restarts: u32,
    /// How long to wait before the first restart; each failed one doubles it.
    #[serde(default = "default_restart_backoff_s")]
    pub restart_backoff_s: f64,
    /// The longest wait between two restarts.
    #[serde(default = "default_restart_backoff_max_s")]
    pub restart_backoff_max_s: f64,
    /// The longest a call of any of the server's tools may take in all, however often it
    /// reports progress (each report starts the call's `timeout_s` again); unlimited when
    /// absent. `[tools."NAME.tool"] max_duration_s` sets it for one tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_duration_s: Option<f64>,
    /// The directories (or `file://` URIs) the server may work in, advertised as its MCP roots
    /// (`roots/list`); a relative path is relative to the configuration file. Without any, the
    /// roots capability is not declared. Fixed for the life of the process.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub roots: Vec<String>,
    /// `[mcp_servers.NAME.oauth]`: how to authorize with a server over HTTP that asks for OAuth
    /// (it does so anyway, with a client registered dynamically, when the table is absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<OAuthConfig>,
    /// What agentloop does when the server asks the user something while a tool runs (MCP
    /// elicitation): `ask` shows the question (`input_required` with kind `elicitation`) and
    /// sends the answer back; `decline` declines at once, and the capability is not declared.
    #[serde(default)]
    pub elicitation: ElicitationPolicy,
    /// How long a question waits for its answer before agentloop declines it.
    #[serde(default = "default_elicitation_timeout_s")]
    pub elicitation_timeout_s: f64,
    /// Whether the server may use the run's model (MCP sampling): `allow`, `approve` (a human
    /// approves each request, like a tool call) or `deny` (the capability is not declared).
    #[serde(default)]
    pub sampling: SamplingPolicy,
    /// The model that answers the server's sampling requests; the run's when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling_model: Option<String>,
}

fn default_elicitation_timeout_s() -> f64 {
    DEFAULT_ELICITATION_TIMEOUT_S
}

fn default_startup_timeout_s() -> f64 {
    DEFAULT_STARTUP_TIMEOUT_S
}

fn default_max_restarts() -> u32 {
    DEFAULT_MAX_RESTARTS
}

fn default_restart_backoff_s() -> f64 {
    DEFAULT_RESTART_BACKOFF_S
}

fn default_restart_backoff_max_s() -> f64 {
    DEFAULT_RESTART_BACKOFF_MAX_S
}

impl McpServerConfig {
    /// A server started with `command` and everything else at its default.
    pub fn new(command: impl Into<String>) -> Self {
        Self {
            command: Some(command.into()),
            ..Self::empty()
        }
    }

    /// A server reached over streamable HTTP at `url` and everything else at its default.
    pub fn http(url: impl Into<String>) -> Self {
        Self {
            url: Some(url.into()),
            ..Self::empty()
        }
    }

    fn empty() -> Self {
        Self {
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: None,
            url: None,
            headers: BTreeMap::new(),
            startup_timeout_s: DEFAULT_STARTUP_TIMEOUT_S,
            max_restarts: DEFAULT_MAX_RESTARTS,
            restart_backoff_s: DEFAULT_RESTART_BACKOFF_S,
            restart_backoff_max_s: DEFAULT_RESTART_BACKOFF_MAX_S,
            max_duration_s: None,
            roots: Vec::new(),
            oauth: None,
            elicitation: ElicitationPolicy::default(),
            elicitation_timeout_s: DEFAULT_ELICITATION_TIMEOUT_S,
            sampling: SamplingPolicy::default(),
            sampling_model: None,
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

    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.insert(name.into(), value.into());
        self
    }

    pub fn with_startup_timeout_s(mut self, seconds: f64) -> Self {
        self.startup_timeout_s = seconds;
        self
    }

    /// Advertises `roots` (directories or `file://` URIs) to the server.
    pub fn with_roots<I, S>(mut self, roots: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.roots = roots.into_iter().map(Into::into).collect();
        self
    }

    /// The roots as URIs: a URI as it is, a path as a `file://` URI (a relative one, which
    /// [`McpServerConfig::resolve_cwd`] did not make absolute, against agentloop's own working
    /// directory).
    pub(crate) fn root_uris(&self) -> Vec<String> {
        self.roots
            .iter()
            .map(|root| {
                if root.contains("://") {
                    return root.clone();
                }
                let path = std::path::absolute(root).unwrap_or_else(|_| PathBuf::from(root));
                match reqwest::Url::from_file_path(&path) {
                    Ok(url) => url.to_string(),
                    Err(()) => format!("file://{}", path.display()),
                }
            })
            .collect()
    }

    /// Shows the server's questions (`ask`) or declines them (`decline`).
    pub fn with_elicitation(mut self, policy: ElicitationPolicy, timeout_s: f64) -> Self {
        self.elicitation = policy;
        self.elicitation_timeout_s = timeout_s;
        self
    }

    /// Lets the server use the run's model (`allow`, `approve`) or not (`deny`).
    pub fn with_sampling(mut self, policy: SamplingPolicy, model: Option<String>) -> Self {
        self.sampling = policy;
        self.sampling_model = model;
        self
    }

    /// How long a question waits for its answer; `None` when the setting is unusable.
    pub(crate) fn elicitation_timeout(&self) -> Option<Duration> {
        Duration::try_from_secs_f64(self.elicitation_timeout_s)
            .ok()
            .filter(|timeout| !timeout.is_zero())
    }

    /// What agentloop offers the server in the handshake, and how it answers its requests.
    pub(crate) fn offer(&self) -> crate::offer::ClientOffer {
        crate::offer::ClientOffer {
            roots: self.root_uris().into(),
            elicitation: self.elicitation,
            elicitation_timeout: self
                .elicitation_timeout()
                .unwrap_or(Duration::from_secs_f64(DEFAULT_ELICITATION_TIMEOUT_S)),
            sampling: self.sampling,
            sampling_model: self.sampling_model.clone(),
        }
    }

    /// Caps every call of the server's tools at `seconds` in all.
    pub fn with_max_duration_s(mut self, seconds: f64) -> Self {
        self.max_duration_s = Some(seconds);
        self
    }

    /// Restarts a server that stopped at most `max_restarts` times in a row, waiting
    /// `backoff_s` before the first and doubling up to `backoff_max_s`.
    pub fn with_restarts(mut self, max_restarts: u32, backoff_s: f64, backoff_max_s: f64) -> Self {
        self.max_restarts = max_restarts;
        self.restart_backoff_s = backoff_s;
        self.restart_backoff_max_s = backoff_max_s;
        self
    }

    /// Whether the server is reached over HTTP rather than started as a child process.
    pub fn is_http(&self) -> bool {
        self.url.is_some()
    }

    /// Makes a relative `cwd` relative to `base` (the directory of the configuration file), and
    /// starts a server without `cwd` in `base`. Servers reached over HTTP have no working
    /// directory and are left alone.
    pub fn resolve_cwd(&mut self, base: &Path) {
        for root in &mut self.roots {
            if !root.contains("://") && Path::new(root.as_str()).is_relative() {
                *root = base.join(root.as_str()).to_string_lossy().into_owned();
            }
        }
        if self.is_http() {
            return;
        }
        self.cwd = Some(match self.cwd.take() {
            Some(cwd) if cwd.is_relative() => base.join(cwd),
            Some(cwd) => cwd,
            None => base.to_path_buf(),
        });
    }

    /// Checks the table of the server called `name`; the message names the offending key.
    pub fn validate(&self, name: &str) -> Result<(), InvalidSetting> {
        validate_server_name(name)?;
        let table = format!("mcp_servers.{name}");
        match (&self.command, &self.url) {
            (Some(_), Some(_)) => Err(InvalidSetting::new(
                table,
                format!(
                    "mcp_servers.{name} has both command and url: set mcp_servers.{name}.command \
                     to start the server as a child process, or mcp_servers.{name}.url to reach \
                     it over HTTP, not both"
                ),
            )),
            (None, None) => Err(InvalidSetting::new(
                table,
                format!(
                    "mcp_servers.{name} needs mcp_servers.{name}.command (a server started as a \
                     child process) or mcp_servers.{name}.url (a server reached over HTTP)"
                ),
            )),
            (Some(command), None) => self.validate_command(name, command),
            (None, Some(url)) => self.validate_url(name, url),
        }?;
        if self.startup_timeout().is_none() {
            let key = format!("mcp_servers.{name}.startup_timeout_s");
            let message = format!(
                "{key} must be a positive number of seconds, got {}",
                self.startup_timeout_s
            );
            return Err(InvalidSetting::new(key, message));
        }
        if self.elicitation_timeout().is_none() {
            let key = format!("mcp_servers.{name}.elicitation_timeout_s");
            let message = format!(
                "{key} must be a positive number of seconds, got {}",
                self.elicitation_timeout_s
            );
            return Err(InvalidSetting::new(key, message));
        }
        if self.restart_backoff().is_none() {
            let key = format!("mcp_servers.{name}.restart_backoff_s");
            let message = format!(
                "{key} must be a positive number of seconds, got {}",
                self.restart_backoff_s
            );
            return Err(InvalidSetting::new(key, message));
        }
        if let Some(seconds) = self.max_duration_s
            && self.max_duration().is_none()
        {
            let key = format!("mcp_servers.{name}.max_duration_s");
            let message = format!("{key} must be a positive number of seconds, got {seconds}");
            return Err(InvalidSetting::new(key, message));
        }
        if self.restart_backoff_max().is_none()
            || self.restart_backoff_max_s < self.restart_backoff_s
        {
            let key = format!("mcp_servers.{name}.restart_backoff_max_s");
            let message = format!(
                "{key} must be a number of seconds at least restart_backoff_s ({}), got {}",
                self.restart_backoff_s, self.restart_backoff_max_s
            );
            return Err(InvalidSetting::new(key, message));
        }
        Ok(())
    }

    fn validate_command(&self, name: &str, command: &str) -> Result<(), InvalidSetting> {
        let key = |key: &str| format!("mcp_servers.{name}.{key}");
        if command.trim().is_empty() {
            return Err(InvalidSetting::new(
                key("command"),
                format!("mcp_servers.{name}.command must not be empty"),
            ));
        }
        if self.oauth.is_some() {
            return Err(InvalidSetting::new(
                key("oauth"),
                format!(
                    "mcp_servers.{name}.oauth only applies to a server reached over HTTP (url), \
                     not to one started with command"
                ),
            ));
        }
        if !self.headers.is_empty() {
            return Err(InvalidSetting::new(
                key("headers"),
                format!(
                    "mcp_servers.{name}.headers only applies to a server reached over HTTP (url), \
                     not to one started with command"
                ),
            ));
        }
        if let Some(variable) = self
            .env
            .keys()
            .find(|key| key.is_empty() || key.contains(['=', '\0']))
        {
            return Err(InvalidSetting::new(
                key("env"),
                format!(
                    "mcp_servers.{name}.env has an invalid variable name {variable:?}: it must not \
                     be empty or contain '=' or NUL"
                ),
            ));
        }
        Ok(())
    }

    fn validate_url(&self, name: &str, url: &str) -> Result<(), InvalidSetting> {
        let process_keys = [
            ("args", !self.args.is_empty()),
            ("env", !self.env.is_empty()),
            ("cwd", self.cwd.is_some()),
        ];
        if let Some((key, _)) = process_keys.iter().find(|(_, set)| *set) {
            return Err(InvalidSetting::new(
                format!("mcp_servers.{name}.{key}"),
                format!(
                    "mcp_servers.{name}.{key} only applies to a server started with command, not \
                     to one reached over HTTP (url); agentloop does not start HTTP servers"
                ),
            ));
        }
        let url_key = format!("mcp_servers.{name}.url");
        let parsed = reqwest::Url::parse(url).map_err(|error| {
            InvalidSetting::new(
                url_key.clone(),
                format!("mcp_servers.{name}.url {url:?} is not a valid URL: {error}"),
            )
        })?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(InvalidSetting::new(
                url_key,
                format!(
                    "mcp_servers.{name}.url {url:?} must be an http:// or https:// URL of the \
                     server's MCP endpoint, such as http://127.0.0.1:8000/mcp"
                ),
            ));
        }
        for (header, value) in &self.headers {
            parse_header(header, value).map_err(|why| why.setting(name, header))?;
        }
        if let Some(oauth) = &self.oauth
            && let Some((key, problem)) = oauth.problems().into_iter().next()
        {
            return Err(InvalidSetting::new(
                format!("mcp_servers.{name}.oauth.{key}"),
                format!("mcp_servers.{name}.oauth.{key}: {problem}"),
            ));
        }
        Ok(())
    }

    /// The OAuth settings of a server over HTTP, or `None` when its `headers` carry an
    /// `Authorization` of their own (agentloop then leaves authorization to them).
    /// The second value: whether the table was written.
    pub(crate) fn oauth_settings(&self) -> Option<(OAuthConfig, bool)> {
        let own = self
            .headers
            .keys()
            .any(|name| name.eq_ignore_ascii_case("authorization"));
        (!own).then(|| match &self.oauth {
            Some(oauth) => (oauth.clone(), true),
            None => (OAuthConfig::defaults(), false),
        })
    }

    /// Sets `[mcp_servers.NAME.oauth]`.
    pub fn with_oauth(mut self, oauth: OAuthConfig) -> Self {
        self.oauth = Some(oauth);
        self
    }

    /// The startup timeout, or `None` when `startup_timeout_s` is not a usable duration.
    pub(crate) fn startup_timeout(&self) -> Option<Duration> {
        positive_duration(self.startup_timeout_s)
    }

    /// The wait before the first restart, or `None` when it is not a usable duration.
    pub(crate) fn restart_backoff(&self) -> Option<Duration> {
        positive_duration(self.restart_backoff_s)
    }

    /// The longest wait between restarts, or `None` when it is not a usable duration.
    pub(crate) fn restart_backoff_max(&self) -> Option<Duration> {
        positive_duration(self.restart_backoff_max_s)
    }

    /// The cap on a call of the server's tools, when there is a usable one.
    pub(crate) fn max_duration(&self) -> Option<Duration> {
        self.max_duration_s.and_then(positive_duration)
    }
}

fn positive_duration(seconds: f64) -> Option<Duration> {
    if seconds > 0.0 {
        Duration::try_from_secs_f64(seconds).ok()
    } else {
        None
    }
}

/// Why a configured header cannot be sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(crate) enum InvalidHeader {
    #[error("the name is not a valid HTTP header name")]
    Name,
    #[error("MCP sets this header itself")]
    Reserved,
    #[error("the value must be visible ASCII (no line breaks or control characters)")]
    Value,
}

impl InvalidHeader {
    /// The setting of server `server` that holds the header.
    pub(crate) fn setting(self, server: &str, header: &str) -> InvalidSetting {
        InvalidSetting::new(
            format!("mcp_servers.{server}.headers"),
            format!("mcp_servers.{server}.headers has an invalid header {header:?}: {self}"),
        )
    }
}

/// One configured header in the form the HTTP client sends; its value is marked sensitive so
/// that a token never reaches a debug log.
pub(crate) fn parse_header(
    name: &str,
    value: &str,
) -> Result<(HeaderName, HeaderValue), InvalidHeader> {
    let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| InvalidHeader::Name)?;
    if RESERVED_HEADERS.contains(&header_name.as_str()) {
        return Err(InvalidHeader::Reserved);
    }
    let mut header_value = HeaderValue::from_str(value).map_err(|_| InvalidHeader::Value)?;
    header_value.set_sensitive(true);
    Ok((header_name, header_value))
}

/// Server names become the namespace of their tools (`NAME.tool`), so a `.` or a space in them
/// would make tool names ambiguous or unreadable for the model.
fn validate_server_name(name: &str) -> Result<(), InvalidSetting> {
    if name.is_empty() {
        return Err(InvalidSetting::new(
            "mcp_servers",
            "mcp_servers: a server name must not be empty",
        ));
    }
    if name == crate::READ_RESOURCE_SOURCE {
        return Err(InvalidSetting::new(
            format!("mcp_servers.{name}"),
            format!(
                "mcp_servers.{name}: the name {name} is agentloop's own (its tool \
                 {name}.read_resource reads the servers' resources); give the server another name"
            ),
        ));
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    {
        return Err(InvalidSetting::new(
            format!("mcp_servers.{name}"),
            format!(
                "mcp_servers.{name}: the server name may contain only letters, digits, '_' and \
                 '-', because it becomes the namespace of its tools ({name}.tool)"
            ),
        ));
    }
    Ok(())
}

/// What `validate` refuses already; checked again where the duration is used.
pub(crate) fn unusable_startup_timeout(server: &str) -> InvalidSetting {
    let key = format!("mcp_servers.{server}.startup_timeout_s");
    let message = format!("{key} is not a usable duration");
    InvalidSetting::new(key, message)
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
        assert_eq!(config.max_restarts, 10);
        assert_eq!(config.restart_backoff_s, 0.5);
        assert_eq!(config.restart_backoff_max_s, 30.0);
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
            max_restarts = 3
            restart_backoff_s = 0.1
            restart_backoff_max_s = 2
            "#,
        )
        .unwrap();
        let expected = McpServerConfig::new("node")
            .with_args(["server.js", "stdio"])
            .with_env("TOKEN", "x")
            .with_cwd("/srv")
            .with_startup_timeout_s(2.5)
            .with_restarts(3, 0.1, 2.0);
        assert_eq!(config, expected);
    }

    #[test]
    fn an_http_server_reads_url_and_headers() {
        let config = parse(
            r#"
            url = "https://mcp.example.com/mcp"
            headers = { Authorization = "Bearer abc", "X-Team" = "7" }
            startup_timeout_s = 5
            "#,
        )
        .unwrap();
        let expected = McpServerConfig::http("https://mcp.example.com/mcp")
            .with_header("Authorization", "Bearer abc")
            .with_header("X-Team", "7")
            .with_startup_timeout_s(5.0);
        assert_eq!(config, expected);
        assert!(config.is_http());
        assert_eq!(config.validate("remote"), Ok(()));
    }

    #[test]
    fn unknown_keys_are_rejected() {
        let error = parse("command = \"x\"\nhost = \"localhost\"").unwrap_err();
        assert!(error.to_string().contains("host"), "{error}");
    }

    #[test]
    fn exactly_one_of_command_and_url() {
        let both = parse("command = \"x\"\nurl = \"http://localhost/mcp\"").unwrap();
        let message = both.validate("files").unwrap_err().message;
        assert!(message.contains("mcp_servers.files.command"), "{message}");
        assert!(message.contains("mcp_servers.files.url"), "{message}");

        let neither = parse("startup_timeout_s = 3").unwrap();
        let message = neither.validate("files").unwrap_err().message;
        assert!(message.contains("mcp_servers.files.command"), "{message}");
        assert!(message.contains("mcp_servers.files.url"), "{message}");
    }

    #[test]
    fn a_url_must_be_http() {
        for bad in ["ftp://x", "not a url", "file:///tmp/mcp", "http://"] {
            let message = McpServerConfig::http(bad)
                .validate("remote")
                .unwrap_err()
                .message;
            assert!(
                message.contains("mcp_servers.remote.url"),
                "{bad}: {message}"
            );
        }
        assert_eq!(
            McpServerConfig::http("http://127.0.0.1:8000/mcp").validate("remote"),
            Ok(())
        );
    }

    #[test]
    fn process_keys_and_headers_do_not_mix_with_the_other_kind() {
        let url = "http://127.0.0.1:8000/mcp";
        let cases = [
            (
                McpServerConfig::http(url).with_args(["x"]),
                "mcp_servers.r.args",
            ),
            (
                McpServerConfig::http(url).with_env("A", "b"),
                "mcp_servers.r.env",
            ),
            (
                McpServerConfig::http(url).with_cwd("/srv"),
                "mcp_servers.r.cwd",
            ),
            (
                McpServerConfig::new("x").with_header("Authorization", "Bearer a"),
                "mcp_servers.r.headers",
            ),
        ];
        for (config, key) in cases {
            let message = config.validate("r").unwrap_err().message;
            assert!(message.contains(key), "{key}: {message}");
        }
    }

    #[test]
    fn headers_must_be_sendable_and_not_reserved() {
        let url = "http://127.0.0.1:8000/mcp";
        for (name, value) in [
            ("Bad Name", "x"),
            ("X-Token", "line\nbreak"),
            ("Mcp-Session-Id", "forged"),
            ("Accept", "text/html"),
        ] {
            let message = McpServerConfig::http(url)
                .with_header(name, value)
                .validate("r")
                .unwrap_err()
                .message;
            assert!(
                message.contains("mcp_servers.r.headers"),
                "{name}: {message}"
            );
        }
    }

    #[test]
    fn only_servers_started_as_processes_get_a_working_directory() {
        let base = Path::new("/etc/agentloop");
        let mut child = McpServerConfig::new("x");
        child.resolve_cwd(base);
        assert_eq!(child.cwd.as_deref(), Some(base));
        let mut relative = McpServerConfig::new("x").with_cwd("sub");
        relative.resolve_cwd(base);
        assert_eq!(relative.cwd, Some(base.join("sub")));

        let mut remote = McpServerConfig::http("http://127.0.0.1:8000/mcp");
        remote.resolve_cwd(base);
        assert_eq!(remote.cwd, None);
        assert_eq!(remote.validate("remote"), Ok(()));
    }

    #[test]
    fn validate_names_the_offending_key() {
        let empty = McpServerConfig::new("  ");
        assert_eq!(
            empty.validate("files").unwrap_err().message,
            "mcp_servers.files.command must not be empty"
        );

        let zero = McpServerConfig::new("x").with_startup_timeout_s(0.0);
        assert!(
            zero.validate("files")
                .unwrap_err()
                .message
                .contains("mcp_servers.files.startup_timeout_s")
        );
        let infinite = McpServerConfig::new("x").with_startup_timeout_s(f64::INFINITY);
        assert!(infinite.validate("files").is_err());

        let bad_env = McpServerConfig::new("x").with_env("A=B", "c");
        assert!(
            bad_env
                .validate("files")
                .unwrap_err()
                .message
                .contains("mcp_servers.files.env")
        );

        for (config, key) in [
            (
                McpServerConfig::new("x").with_restarts(3, 0.0, 30.0),
                "mcp_servers.files.restart_backoff_s",
            ),
            (
                McpServerConfig::new("x").with_restarts(3, f64::NAN, 30.0),
                "mcp_servers.files.restart_backoff_s",
            ),
            (
                McpServerConfig::new("x").with_restarts(3, 2.0, 1.0),
                "mcp_servers.files.restart_backoff_max_s",
            ),
        ] {
            let message = config.validate("files").unwrap_err().message;
            assert!(message.contains(key), "{key}: {message}");
        }
        let never = McpServerConfig::new("x").with_restarts(0, 1.0, 1.0);
        assert_eq!(never.validate("files"), Ok(()));

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
                .message
                .contains("mcp_servers.a.b")
        );
    }
}
