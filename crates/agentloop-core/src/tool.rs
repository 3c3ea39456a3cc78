//! Tools: one trait for everything the model can call, built-in or from an MCP server.

use std::{fmt, future::Future, pin::Pin, sync::Arc};

use agentloop_protocol::{SourceHealth, SourceTransport};
use async_trait::async_trait;
use serde_json::Value;
use uuid::Uuid;

/// What a tool declares about itself.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// Internal name: `server.tool` for MCP tools, any name for built-ins.
    pub name: String,
    pub description: String,
    /// JSON Schema of the arguments object.
    pub input_schema: Value,
    /// MCP `readOnlyHint`: the tool does not modify its environment.
    pub read_only_hint: Option<bool>,
    /// MCP `destructiveHint`.
    pub destructive_hint: Option<bool>,
    /// MCP `idempotentHint`: calling it again with the same arguments has no further effect.
    pub idempotent_hint: Option<bool>,
    /// MCP `openWorldHint`: the tool reaches outside entities (the web, other systems).
    pub open_world_hint: Option<bool>,
    /// A human-readable name (MCP `title`, or its annotations' `title`), for people only: the
    /// model reads `name` and `description`.
    pub title: Option<String>,
    /// JSON Schema of the tool's structured result (MCP `outputSchema`), when it declares one.
    pub output_schema: Option<Value>,
}

impl ToolInfo {
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        Self {
            name: name.into(),
            description: description.into(),
            input_schema,
            read_only_hint: None,
            destructive_hint: None,
            idempotent_hint: None,
            open_world_hint: None,
            title: None,
            output_schema: None,
        }
    }

    pub fn read_only(mut self, read_only: bool) -> Self {
        self.read_only_hint = Some(read_only);
        self
    }

    pub fn idempotent(mut self, idempotent: bool) -> Self {
        self.idempotent_hint = Some(idempotent);
        self
    }
}

/// The JSON Schema of `T` as a tool's arguments (or a reply the loop reads) are checked
/// against: one self-contained object (no `$ref`), without the `$schema`, `title` and
/// `description` of the type itself (the tool's description says what it is for). The
/// documentation of its fields becomes their descriptions.
pub(crate) fn schema_for<T: schemars::JsonSchema>() -> Value {
    let mut settings = schemars::generate::SchemaSettings::draft2020_12();
    settings.inline_subschemas = true;
    let mut schema = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(root) = schema.as_object_mut() {
        root.remove("$schema");
        root.remove("title");
        root.remove("description");
    }
    schema
}

/// A successful tool result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    /// The result as text: what the model reads (bounded) and the record keeps (whole).
    pub text: String,
    /// A structured form of the result, when the tool gave one.
    pub structured: Option<Value>,
    /// Tokens the tool itself spent on LLM calls (a sub-agent); added to the run's usage.
    pub usage: Option<agentloop_protocol::Usage>,
    /// What the call cost in USD, when the tool says (an MCP result's
    /// `_meta["agentloop/cost_usd"]`); added to the run's cost and shown in the
    /// `<ToolCallHistory>`.
    pub cost_usd: Option<f64>,
    /// Images the tool returned (an MCP result's `image` content, admitted as a user's
    /// attachments are): they go to the model with the result, in the form its provider takes
    /// for tool results, and the store keeps their bytes once by hash. `text` still names them.
    pub images: Vec<agentloop_protocol::Attachment>,
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: text.into(),
            structured: None,
            usage: None,
            cost_usd: None,
            images: Vec::new(),
        }
    }

    /// A JSON result: its compact text for the model, the value itself as the structured form.
    pub fn json(value: Value) -> Self {
        Self {
            text: value.to_string(),
            structured: Some(value),
            usage: None,
            cost_usd: None,
            images: Vec::new(),
        }
    }
}

/// Why a tool call failed. Every variant reaches the model as a tool error it can act on.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// The tool ran and reported a failure (MCP `isError`).
    #[error("{0}")]
    Failed(String),
    /// The arguments do not fit what the tool expects.
    #[error("invalid arguments: {0}")]
    InvalidArguments(String),
    /// The tool cannot be reached (its server died or is not connected).
    #[error("tool unavailable: {0}")]
    Unavailable(String),
}

/// Who and what a call is made for; tools and hooks may use it.
#[derive(Debug, Clone, Default)]
pub struct ToolContext {
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub call_id: String,
    pub user_id: Option<String>,
    pub entity_id: Option<String>,
    pub workflow: Option<String>,
    pub read_only: bool,
    /// Where a tool that runs an agent of its own (a sub-agent) sends that run's events, so
    /// that they appear, nested, in the stream of the calling run.
    pub events: Option<tokio::sync::mpsc::UnboundedSender<agentloop_protocol::Event>>,
    /// The call's span as a W3C `traceparent` (with a tracer): sent on to MCP servers over
    /// HTTP, and the parent of a sub-agent's run.
    pub traceparent: Option<String>,
    /// Where the call reports how far it has come ([`ToolContext::report_progress`]).
    pub progress: Option<tokio::sync::mpsc::UnboundedSender<ToolProgress>>,
    /// Where the call asks its run a question for the user (MCP elicitation) or a completion
    /// of its model (MCP sampling); `None` outside a run.
    pub asks: Option<crate::asking::CallAsks>,
}

/// How far a running call has come (MCP `notifications/progress`). Each report becomes a
/// `tool_progress` event and starts the call's time limit (`timeout_s`) again; `max_duration_s`
/// still caps the whole call.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolProgress {
    /// Grows with every report, even when the total is not known.
    pub progress: f64,
    pub total: Option<f64>,
    pub message: Option<String>,
}

impl ToolContext {
    /// A key that names this call and no other, the same when a call a crash cut off runs
    /// again: `{run_id}:{call_id}`. Sent to MCP servers in `_meta` and to side-effect
    /// webhooks as `Idempotency-Key`, so that a tool that can deduplicate does.
    pub fn idempotency_key(&self) -> String {
        format!("{}:{}", self.run_id, self.call_id)
    }

    /// Tells the run how far the call has come; nothing when the call runs outside a run.
    pub fn report_progress(&self, progress: ToolProgress) {
        if let Some(sender) = &self.progress {
            // A run that stopped listening no longer waits for the call either.
            let _ = sender.send(progress);
        }
    }
}

/// Something the model can call.
#[async_trait]
pub trait Tool: Send + Sync {
    fn info(&self) -> &ToolInfo;

    /// Whether calls may run at the same time as other calls. Calls of tools that say no run
    /// alone.
    fn supports_parallel(&self) -> bool {
        true
    }

    /// Runs the tool. `arguments` already passed the tool's JSON Schema.
    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError>;
}

type ToolFuture = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>;
type ToolFnBox = dyn Fn(Value, ToolContext) -> ToolFuture + Send + Sync;

/// A tool made from an async closure: the quickest way to give the model a Rust function.
///
/// ```
/// use agentloop_core::{FnTool, ToolOutput};
/// use serde_json::json;
///
/// let tool = FnTool::new(
///     "clock.now",
///     "The current UTC time",
///     json!({"type": "object", "properties": {}}),
///     |_args, _ctx| async move { Ok(ToolOutput::text("12:00")) },
/// );
/// ```
pub struct FnTool {
    info: ToolInfo,
    parallel: bool,
    call: Arc<ToolFnBox>,
}

impl FnTool {
    pub fn new<F, Fut>(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
        call: F,
    ) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        Self::from_info(ToolInfo::new(name, description, input_schema), call)
    }

    pub fn from_info<F, Fut>(info: ToolInfo, call: F) -> Self
    where
        F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        Self {
            info,
            parallel: true,
            call: Arc::new(move |args, ctx| Box::pin(call(args, ctx))),
        }
    }

    /// Marks the tool as one whose calls must run alone.
    pub fn serial(mut self) -> Self {
        self.parallel = false;
        self
    }
}

impl fmt::Debug for FnTool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool").field("info", &self.info).finish()
    }
}

#[async_trait]
impl Tool for FnTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    fn supports_parallel(&self) -> bool {
        self.parallel
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        (self.call)(arguments, context).await
    }
}

/// A provider of tools, such as an MCP server.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The namespace of the source (`server` in `server.tool`).
    fn name(&self) -> &str;

    /// The tools the source offers now, already named `server.tool`.
    async fn tools(&self) -> Result<Vec<Arc<dyn Tool>>, ToolError>;

    /// A counter that moves when the source's tools change (MCP `tools/list_changed`); the
    /// agent then asks `tools()` again. `None` for a source whose tools never change.
    fn changes(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }

    /// How the source is doing now: cheap, it is read for every health check. The registry
    /// offers the source's tools only while it is up, so a source whose state changes (an MCP
    /// server that stopped and is being restarted) moves [`ToolSource::changes`] with it. The
    /// default: always up.
    fn status(&self) -> SourceHealth {
        SourceHealth::up(SourceTransport::Other)
    }
}
