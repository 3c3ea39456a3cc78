//! The tools of `agentloop-test-mcp`, a small MCP server that tests start as a real child
//! process. Each call appends a JSON line to the file named by [`LOG_ENV`] as it starts, before
//! it does anything, so tests can prove what ran and how often, and wait for a call to have
//! begun ([`super::wait_for_call`]) instead of sleeping.
//!
//! Besides its fixed tools, the server offers the tools `add_tool` created: they are shared by
//! every session of the process and announced with `notifications/tools/list_changed`.
// rmcp marks logging deprecated (SEP-2577); servers still send it, and the `progress` tool does.
#![allow(deprecated)]

use std::{
    collections::BTreeSet,
    fs::OpenOptions,
    io::Write,
    path::{Path, PathBuf},
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use rmcp::{
    ErrorData, Peer, RoleServer, ServerHandler,
    handler::server::{tool::ToolCallContext, wrapper::Parameters},
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock,
        GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation, JsonObject,
        ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
        LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
        ProgressNotificationParam, Prompt, PromptArgument, PromptMessage,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, RequestMetaObject,
        Resource, ResourceContents, ResourceTemplate, Role as PromptMessageRole,
        ServerCapabilities, ServerConfig, Tool,
    },
    schemars,
    service::RequestContext,
    tool, tool_router,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The environment variable naming the call log of the test server.
pub const LOG_ENV: &str = "AGENTLOOP_TEST_MCP_LOG";

/// The `_meta` key under which agentloop sends a call's idempotency key (the same as
/// `agentloop_mcp::IDEMPOTENCY_KEY_META`; written out so that the server needs no agentloop).
pub const IDEMPOTENCY_KEY_META: &str = "agentloop/idempotency-key";

/// The URI of the test server's text resource, and its text.
pub const GREETING_URI: &str = "note://greeting";
pub const GREETING_TEXT: &str = "hello from a resource";
/// The URI of the test server's binary resource (four bytes of PNG).
pub const LOGO_URI: &str = "blob://logo";

/// The exit status of the server after a `crash` call.
pub const CRASH_EXIT_STATUS: i32 = 3;

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EchoArgs {
    /// The text to return.
    pub text: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddArgs {
    pub a: f64,
    pub b: f64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FailArgs {
    /// The error message to report.
    pub message: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RpcErrorArgs {
    /// The message of the JSON-RPC error.
    pub message: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SleepArgs {
    /// How long to sleep, in milliseconds.
    pub ms: u64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct BigArgs {
    /// How many characters to return.
    pub chars: usize,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecordArgs {
    /// The note to append to the log.
    pub note: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SlowRecordArgs {
    /// The note to append to the log.
    pub note: String,
    /// How long the call takes after it logged its start, in milliseconds.
    pub ms: u64,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ForecastArgs {
    /// The city to forecast.
    pub city: String,
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ProgressArgs {
    /// How many steps to take, each reported with `notifications/progress`.
    pub steps: u32,
    /// How long each step takes, in milliseconds.
    pub ms: u64,
}

/// The `outputSchema` of `forecast` and `bad_forecast`.
pub fn forecast_schema() -> Arc<JsonObject> {
    let schema = json!({
        "type": "object",
        "properties": {
            "temperature": {"type": "number"},
            "conditions": {"type": "string"}
        },
        "required": ["temperature", "conditions"]
    });
    Arc::new(match schema {
        Value::Object(schema) => schema,
        _ => JsonObject::new(),
    })
}

#[derive(Debug, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AddToolArgs {
    /// The name of the tool to offer from now on.
    pub name: String,
}

#[derive(Debug, Clone, Default)]
pub struct TestMcpServer {
    log: Option<PathBuf>,
    /// The tools `add_tool` created; clones (one per HTTP session) share them.
    extra_tools: Arc<Mutex<BTreeSet<String>>>,
}

impl TestMcpServer {
    pub fn new(log: Option<PathBuf>) -> Self {
        Self {
            log,
            extra_tools: Arc::default(),
        }
    }

    /// A server logging to the file named by [`LOG_ENV`], if set.
    pub fn from_env() -> Self {
        Self::new(std::env::var_os(LOG_ENV).map(PathBuf::from))
    }

    fn log_call(&self, tool: &str, arguments: &impl Serialize) -> std::io::Result<()> {
        let arguments = serde_json::to_value(arguments).unwrap_or(Value::Null);
        self.append(&json!({"tool": tool, "arguments": arguments}))
    }

    fn append(&self, line: &Value) -> std::io::Result<()> {
        match &self.log {
            Some(path) => append_line(path, line),
            None => Ok(()),
        }
    }
}

impl TestMcpServer {
    fn extra_tools(&self) -> MutexGuard<'_, BTreeSet<String>> {
        // A set of names cannot be left half-changed by a panic.
        self.extra_tools
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn is_extra_tool(&self, name: &str) -> bool {
        self.extra_tools().contains(name)
    }

    fn extra_tool_list(&self) -> Vec<Tool> {
        self.extra_tools()
            .iter()
            .map(|name| {
                let mut schema = JsonObject::new();
                schema.insert("type".to_owned(), json!("object"));
                schema.insert("properties".to_owned(), json!({}));
                Tool::new(name.clone(), "An extra tool added by add_tool", schema)
            })
            .collect()
    }

    fn call_extra_tool(&self, request: &CallToolRequestParams) -> CallToolResult {
        let arguments = request.arguments.clone().unwrap_or_default();
        if let Err(error) = self.log_call(&request.name, &arguments) {
            return log_failure(error);
        }
        CallToolResult::success(vec![ContentBlock::text(format!(
            "extra tool {}",
            request.name
        ))])
    }
}

fn append_line(path: &Path, line: &Value) -> std::io::Result<()> {
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    // One write per line, so that concurrent calls never interleave within a line.
    file.write_all(format!("{line}\n").as_bytes())
}

fn log_failure(error: std::io::Error) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!(
        "cannot write the test MCP log: {error}"
    ))])
}

#[tool_router]
impl TestMcpServer {
    #[tool(
        description = "Returns its text unchanged",
        annotations(read_only_hint = true)
    )]
    async fn echo(&self, Parameters(args): Parameters<EchoArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("echo", &args) {
            return log_failure(error);
        }
        CallToolResult::success(vec![ContentBlock::text(args.text)])
    }

    #[tool(description = "Adds two numbers", annotations(read_only_hint = true))]
    async fn add(&self, Parameters(args): Parameters<AddArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("add", &args) {
            return log_failure(error);
        }
        CallToolResult::success(vec![ContentBlock::text((args.a + args.b).to_string())])
    }

    #[tool(description = "Fails with the given message")]
    async fn fail(&self, Parameters(args): Parameters<FailArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("fail", &args) {
            return log_failure(error);
        }
        CallToolResult::error(vec![ContentBlock::text(args.message)])
    }

    #[tool(description = "Answers with a JSON-RPC error (not a tool result) carrying the message")]
    async fn rpc_error(
        &self,
        Parameters(args): Parameters<RpcErrorArgs>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Err(error) = self.log_call("rpc_error", &args) {
            return Ok(log_failure(error));
        }
        Err(ErrorData::internal_error(args.message, None))
    }

    #[tool(
        description = "Sleeps for the given milliseconds",
        annotations(read_only_hint = true)
    )]
    async fn sleep(&self, Parameters(args): Parameters<SleepArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("sleep", &args) {
            return log_failure(error);
        }
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        CallToolResult::success(vec![ContentBlock::text(format!("slept {} ms", args.ms))])
    }

    #[tool(
        description = "Returns a text of exactly the given number of characters",
        annotations(read_only_hint = true)
    )]
    async fn big(&self, Parameters(args): Parameters<BigArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("big", &args) {
            return log_failure(error);
        }
        let text: String = "0123456789".chars().cycle().take(args.chars).collect();
        CallToolResult::success(vec![ContentBlock::text(text)])
    }

    #[tool(description = "Makes the server exit at once with status 3, to simulate a crash")]
    async fn crash(&self) -> CallToolResult {
        // Even a failed log write must not keep the server alive: the crash is the point.
        let _ = self.log_call("crash", &json!({}));
        std::process::exit(CRASH_EXIT_STATUS)
    }

    #[tool(
        description = "Appends a note to the log: a tool with a visible side effect",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn record(
        &self,
        Parameters(args): Parameters<RecordArgs>,
        meta: RequestMetaObject,
        extensions: rmcp::model::Extensions,
    ) -> CallToolResult {
        // The trace context as `_meta` carries it (any transport), and as the HTTP header.
        let header = extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.headers.get("traceparent"))
            .and_then(|value| value.to_str().ok());
        let mut line = json!({"tool": "record", "note": &args.note, "arguments": &args,
            "idempotency_key": meta.get(IDEMPOTENCY_KEY_META)});
        if let Some(traceparent) = meta.0.get_traceparent() {
            line["traceparent"] = json!(traceparent);
        }
        if let Some(header) = header {
            line["traceparent_header"] = json!(header);
        }
        if let Err(error) = self.append(&line) {
            return log_failure(error);
        }
        CallToolResult::success(vec![ContentBlock::text("recorded")])
    }

    #[tool(
        description = "Logs its start, then takes the given time: a slow tool with a side \
                       effect (its log line), which is neither read-only nor idempotent",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn slow_record(
        &self,
        Parameters(args): Parameters<SlowRecordArgs>,
        meta: RequestMetaObject,
    ) -> CallToolResult {
        let line = json!({"tool": "slow_record", "note": &args.note, "arguments": &args,
            "idempotency_key": meta.get(IDEMPOTENCY_KEY_META)});
        if let Err(error) = self.append(&line) {
            return log_failure(error);
        }
        tokio::time::sleep(Duration::from_millis(args.ms)).await;
        CallToolResult::success(vec![ContentBlock::text(format!("recorded {}", args.note))])
    }

    #[tool(
        title = "Weather forecast",
        description = "Forecasts the weather of a city, as a structured result",
        output_schema = forecast_schema(),
        annotations(read_only_hint = true, open_world_hint = true)
    )]
    async fn forecast(&self, Parameters(args): Parameters<ForecastArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("forecast", &args) {
            return log_failure(error);
        }
        let mut result =
            CallToolResult::structured(json!({"temperature": 21.5, "conditions": "Sunny"}));
        result.content = vec![ContentBlock::text(format!(
            "21.5 and sunny in {}",
            args.city
        ))];
        result
    }

    #[tool(
        description = "Declares the output schema of forecast but answers with a structured \
                       result that does not fit it",
        output_schema = forecast_schema(),
        annotations(read_only_hint = true)
    )]
    async fn bad_forecast(&self, Parameters(args): Parameters<ForecastArgs>) -> CallToolResult {
        if let Err(error) = self.log_call("bad_forecast", &args) {
            return log_failure(error);
        }
        CallToolResult::structured(json!({"temperature": "hot"}))
    }

    #[tool(
        description = "Takes the given steps, each of the given milliseconds, reporting each \
                       with notifications/progress; logs its start and end with \
                       notifications/message (info, then warning)",
        annotations(read_only_hint = true)
    )]
    async fn progress(
        &self,
        Parameters(args): Parameters<ProgressArgs>,
        meta: RequestMetaObject,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        if let Err(error) = self.log_call("progress", &args) {
            return log_failure(error);
        }
        let log = |level, text: String| {
            let mut message = LoggingMessageNotificationParam::new(level, json!(text));
            message.logger = Some("progress".to_owned());
            peer.notify_logging_message(message)
        };
        // A client that cannot take notifications gets its result all the same.
        let _ = log(LoggingLevel::Info, format!("starting {} steps", args.steps)).await;
        let token = meta.get_progress_token();
        for step in 1..=args.steps {
            tokio::time::sleep(Duration::from_millis(args.ms)).await;
            if let Some(token) = &token {
                let progress = ProgressNotificationParam::new(token.clone(), f64::from(step))
                    .with_total(f64::from(args.steps))
                    .with_message(format!("step {step}"));
                let _ = peer.notify_progress(progress).await;
            }
        }
        let _ = log(LoggingLevel::Warning, format!("took {} steps", args.steps)).await;
        CallToolResult::success(vec![ContentBlock::text(format!(
            "took {} steps",
            args.steps
        ))])
    }

    #[tool(
        description = "Lists the client's roots (roots/list), one URI per line, or says that \
                       the client declared no roots capability",
        annotations(read_only_hint = true)
    )]
    async fn roots(&self, peer: Peer<RoleServer>) -> CallToolResult {
        if let Err(error) = self.log_call("roots", &json!({})) {
            return log_failure(error);
        }
        let declared = peer
            .peer_info()
            .is_some_and(|client| client.capabilities.roots.is_some());
        if !declared {
            return CallToolResult::success(vec![ContentBlock::text("no roots capability")]);
        }
        match peer.list_roots().await {
            Ok(listed) => {
                let uris: Vec<String> = listed.roots.into_iter().map(|root| root.uri).collect();
                CallToolResult::success(vec![ContentBlock::text(uris.join("\n"))])
            }
            Err(error) => CallToolResult::error(vec![ContentBlock::text(format!(
                "roots/list failed: {error}"
            ))]),
        }
    }

    #[tool(
        description = "Makes the server offer an extra tool of the given name from now on, and \
                       tells the client its tools changed",
        annotations(read_only_hint = false, destructive_hint = false)
    )]
    async fn add_tool(
        &self,
        Parameters(args): Parameters<AddToolArgs>,
        peer: Peer<RoleServer>,
    ) -> CallToolResult {
        if let Err(error) = self.log_call("add_tool", &args) {
            return log_failure(error);
        }
        self.extra_tools().insert(args.name.clone());
        if let Err(error) = peer.notify_tool_list_changed().await {
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "added {} but could not notify the client: {error}",
                args.name
            ))]);
        }
        CallToolResult::success(vec![ContentBlock::text(format!("added {}", args.name))])
    }
}

/// Written out rather than generated by `#[tool_handler]`: the tools of `add_tool` join the
/// fixed ones.
impl ServerHandler for TestMcpServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .enable_logging()
                .enable_resources()
                .enable_resources_list_changed()
                .enable_prompts()
                .build(),
        )
        .with_server_info(Implementation::new(
            "agentloop-test-mcp",
            env!("CARGO_PKG_VERSION"),
        ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = Self::tool_router().list_all();
        tools.extend(self.extra_tool_list());
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if self.is_extra_tool(&request.name) {
            return Ok(CallToolResponse::Complete(self.call_extra_tool(&request)));
        }
        let call = ToolCallContext::new(self, request, context);
        Self::tool_router().call(call).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let mut greeting = Resource::new(GREETING_URI, "greeting");
        greeting.title = Some("A greeting".to_owned());
        greeting.mime_type = Some("text/plain".to_owned());
        let mut logo = Resource::new(LOGO_URI, "logo");
        logo.mime_type = Some("image/png".to_owned());
        Ok(ListResourcesResult::with_all_items(vec![greeting, logo]))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let mut note = ResourceTemplate::new("note://{name}", "note");
        note.description = Some("A note of the given name".to_owned());
        Ok(ListResourceTemplatesResult::with_all_items(vec![note]))
    }

    /// `note://greeting` is text, `blob://logo` four bytes of PNG, `note://NAME` the text
    /// `note NAME`; anything else is not found.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri;
        let contents = if uri == GREETING_URI {
            ResourceContents::text(GREETING_TEXT, &uri).with_mime_type("text/plain")
        } else if uri == LOGO_URI {
            ResourceContents::blob("iVBORw==", &uri).with_mime_type("image/png")
        } else if let Some(name) = uri.strip_prefix("note://") {
            ResourceContents::text(format!("note {name}"), &uri)
        } else {
            return Err(ErrorData::resource_not_found(
                format!("no resource {uri}"),
                None,
            ));
        };
        Ok(ReadResourceResponse::Complete(ReadResourceResult::new(
            vec![contents],
        )))
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let topic = PromptArgument::new("topic")
            .with_description("What to summarize")
            .with_required(true);
        Ok(ListPromptsResult::with_all_items(vec![Prompt::new(
            "summarize",
            Some("Asks for a summary of a topic"),
            Some(vec![topic]),
        )]))
    }

    /// `summarize {topic}`: an assistant's offer, then the user's request.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if request.name != "summarize" {
            return Err(ErrorData::invalid_params(
                format!("no prompt {}", request.name),
                None,
            ));
        }
        let topic = request
            .arguments
            .as_ref()
            .and_then(|arguments| arguments.get("topic"))
            .and_then(Value::as_str)
            .ok_or_else(|| ErrorData::invalid_params("the argument topic is required", None))?;
        Ok(GetPromptResponse::Complete(GetPromptResult::new(vec![
            PromptMessage::new_text(PromptMessageRole::Assistant, "What shall I summarize?"),
            PromptMessage::new_text(
                PromptMessageRole::User,
                format!("Summarize what you know about {topic}."),
            ),
        ])))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        Self::tool_router().get(name).cloned().or_else(|| {
            self.extra_tool_list()
                .into_iter()
                .find(|tool| tool.name == name)
        })
    }
}
