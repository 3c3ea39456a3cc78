//! Sub-agents: `[agents.NAME]` defines another agent (its own system prompt, tools, model and
//! limits) that the main agent calls as the tool `agent.NAME` with a task. The sub-agent runs
//! its own loop on the main agent's tools (narrowed to its allowlist, under the caller's
//! read-only and workflow rules); its events appear in the caller's stream with
//! `parent_run_id`, its answer is the tool's result and its tokens count toward the caller's.

use std::{
    collections::BTreeMap,
    sync::{Arc, Weak},
};

use agentloop_protocol::{Event, RunStatus};
use async_trait::async_trait;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    driver::{RunServices, drive},
    emitter::{Emitter, EventSink},
    hooks::ToolHook,
    llm::Llm,
    machine::{RunContext, RunInput, RunMachine},
    policy::{MutationLimiter, RunPolicy, WorkflowSettings},
    registry::ToolRegistry,
    settings::{AgentSettings, InvalidSetting},
    telemetry::Telemetry,
    tokens::TokenCounter,
    tool::{Tool, ToolContext, ToolError, ToolInfo, ToolOutput, schema_for},
};

pub use crate::names::AGENT_TOOL_PREFIX;

/// `[agents.NAME]` of agentloop.toml.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SubAgentSettings {
    /// What the main agent reads about this agent: when to hand it a task.
    pub description: String,
    /// The sub-agent's own system prompt.
    pub system_prompt: String,
    /// The tools it may use: internal names or patterns ending in `*` (`"kb.*"`); empty means
    /// every tool of the main agent. Sub-agents never call other agents.
    pub tools: Vec<String>,
    /// Its model; default: the main agent's.
    pub model: Option<String>,
    /// Its step limit; default: `agent.max_iterations`.
    pub max_iterations: Option<u32>,
    /// How long one task may take, in seconds (the `agent.NAME` tool's time limit).
    pub timeout_s: f64,
    /// Whether the server's OpenAI-compatible API offers it as a model of its own (`GET
    /// /v1/models`, `model: "NAME"`), beside the main agent.
    pub public: bool,
}

impl Default for SubAgentSettings {
    fn default() -> Self {
        Self {
            description: String::new(),
            system_prompt: "You are a focused assistant. Use your tools to complete the task you \
                            are given, then answer with what you found."
                .to_string(),
            tools: Vec::new(),
            model: None,
            max_iterations: None,
            timeout_s: 300.0,
            public: false,
        }
    }
}

impl SubAgentSettings {
    /// Checks the values; the error names the key.
    pub fn validate(&self, name: &str) -> Result<(), InvalidSetting> {
        let valid_name = !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if !valid_name {
            return Err(InvalidSetting::new(
                format!("agents.{name}"),
                format!("agents.{name}: an agent name may hold only letters, digits, '_' and '-'"),
            ));
        }
        if self.max_iterations == Some(0) {
            let key = format!("agents.{name}.max_iterations");
            let message = format!("{key} must be at least 1");
            return Err(InvalidSetting::new(key, message));
        }
        if !(self.timeout_s.is_finite() && self.timeout_s > 0.0) {
            let key = format!("agents.{name}.timeout_s");
            let message = format!(
                "{key} must be a positive number of seconds (got {})",
                self.timeout_s
            );
            return Err(InvalidSetting::new(key, message));
        }
        Ok(())
    }
}

/// What a sub-agent run takes from the main agent.
#[derive(Clone)]
pub(crate) struct Parent {
    pub llm: Arc<dyn Llm>,
    pub settings: Arc<AgentSettings>,
    pub counter: Arc<dyn TokenCounter>,
    pub telemetry: Arc<dyn Telemetry>,
    pub tracer: Arc<dyn crate::trace::Tracer>,
    pub hooks: Arc<Vec<Arc<dyn ToolHook>>>,
    pub workflows: Arc<BTreeMap<String, WorkflowSettings>>,
    pub limiter: Option<Arc<MutationLimiter>>,
    pub inputs: Option<Arc<dyn crate::driver::InputLog>>,
}

/// The arguments of a tool `agent.NAME`: its JSON Schema is derived from this type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SubAgentTask {
    /// The task, with everything the agent needs to know: it does not see this conversation.
    #[schemars(length(min = 1))]
    task: String,
}

/// The tool `agent.NAME`.
pub(crate) struct SubAgentTool {
    info: ToolInfo,
    name: String,
    spec: SubAgentSettings,
    settings: Arc<AgentSettings>,
    parent: Parent,
    /// The main agent's tools; weak, because this tool is one of them.
    tools: Weak<ToolRegistry>,
}

impl SubAgentTool {
    pub fn new(
        name: &str,
        spec: SubAgentSettings,
        parent: Parent,
        tools: Weak<ToolRegistry>,
    ) -> Self {
        let description = if spec.description.is_empty() {
            format!("Hand a task to the {name} agent; its answer is the result.")
        } else {
            spec.description.clone()
        };
        let schema = schema_for::<SubAgentTask>();
        // The sub-agent's own calls are checked against the caller's read-only context, so
        // calling it changes nothing by itself.
        let info = ToolInfo::new(format!("{AGENT_TOOL_PREFIX}{name}"), description, schema)
            .read_only(true);
        let mut settings = (*parent.settings).clone();
        settings.system_prompt = spec.system_prompt.clone();
        settings.max_iterations = spec.max_iterations.unwrap_or(settings.max_iterations);
        // A sub-agent has no human to ask, and plans within the caller's plan.
        settings.ask_user = false;
        settings.planning = Default::default();
        settings.review = Default::default();
        // Guardrails check what the user asks and is answered; a sub-agent's task and answer
        // stay between agents (the caller's answer is checked).
        settings.guardrails = Default::default();
        Self {
            info,
            name: name.to_string(),
            spec,
            settings: Arc::new(settings),
            parent,
            tools,
        }
    }

    /// The rules of the sub-agent's run: the caller's, narrowed to the agent's allowlist.
    fn policy(&self, context: &ToolContext) -> Result<RunPolicy, ToolError> {
        let mut policy = RunPolicy::for_run(
            context.read_only,
            context.workflow.as_deref(),
            &self.parent.workflows,
            self.parent.limiter.clone(),
            crate::policy::limit_key(context.entity_id.as_deref(), context.user_id.as_deref()),
        )
        .map_err(|unknown| ToolError::Failed(unknown.to_string()))?;
        policy.agent = Some((
            self.name.clone(),
            WorkflowSettings {
                tools: self.spec.tools.clone(),
            },
        ));
        Ok(policy)
    }
}

/// A sub-agent's reports: its LLM and tool calls count like any others, but its end is not the
/// end of a run of the service (its caller's is).
struct Nested(Arc<dyn Telemetry>);

impl Telemetry for Nested {
    fn llm_call(&self, report: &crate::telemetry::LlmCallReport) {
        self.0.llm_call(report);
    }

    fn tool_call(&self, run_id: Uuid, record: &agentloop_protocol::ToolExecutionRecord) {
        self.0.tool_call(run_id, record);
    }
}

/// Sends a sub-agent's events to the caller's driver.
struct Relay(Option<tokio::sync::mpsc::UnboundedSender<Event>>);

impl EventSink for Relay {
    fn emit(&self, event: Event) {
        if let Some(sender) = &self.0 {
            // The caller's batch ended (timeout): nobody listens any more.
            let _ = sender.send(event);
        }
    }
}

#[async_trait]
impl Tool for SubAgentTool {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        // The arguments passed the schema of this type.
        let task = serde_json::from_value::<SubAgentTask>(arguments)
            .map(|args| args.task)
            .unwrap_or_default();
        let registry = self
            .tools
            .upgrade()
            .ok_or_else(|| ToolError::Unavailable("the agent is shutting down".to_string()))?;
        let run_id = Uuid::now_v7();
        let input = RunInput {
            refused: None,
            output: None,
            run_id,
            session_id: context.session_id,
            query: task,
            attachments: Vec::new(),
            history: Vec::new(),
            system_prompt: self.settings.system_prompt.clone(),
            model: self.spec.model.clone(),
            max_iterations: self.settings.max_iterations,
            context: RunContext {
                user_id: context.user_id.clone(),
                entity_id: context.entity_id.clone(),
                workflow: context.workflow.clone(),
                read_only: context.read_only,
            },
            started_at: crate::clock::now(),
            policy: self.policy(&context)?,
            client_tools: Vec::new(),
            // Its own run, under the same per-run budget as the agent's runs.
            budget: self.settings.budget,
        };
        let catalog = registry.catalog();
        let machine = RunMachine::new(
            input,
            self.settings.clone(),
            catalog,
            self.parent.counter.clone(),
        );
        let services = RunServices {
            llm: self.parent.llm.clone(),
            tools: registry,
            settings: self.settings.clone(),
            counter: self.parent.counter.clone(),
            telemetry: Arc::new(Nested(self.parent.telemetry.clone())),
            tracer: self.parent.tracer.clone(),
            // Under the tool call that runs it.
            trace: crate::trace::RunTrace::start(
                self.parent.tracer.as_ref(),
                &crate::trace::RunSpanStart {
                    run_id,
                    session_id: context.session_id,
                    agent: Some(&self.name),
                    model: self.spec.model.as_deref(),
                    parent: context.traceparent.as_deref(),
                },
            ),
            hooks: self.parent.hooks.clone(),
            inputs: self.parent.inputs.clone(),
            // Sub-agents are not steered: what the user writes goes to the run they work for.
            steering: Arc::default(),
            // Nor asked: a sub-agent's MCP calls find nobody to answer their questions, which
            // are declined when their time is up.
            questions: Arc::default(),
        };
        let mut emitter = Emitter::new(run_id, Arc::new(Relay(context.events.clone())));
        // Cancelled with the caller's call: the call's time limit drops this future.
        let outcome = drive(
            machine,
            services,
            &mut emitter,
            CancellationToken::new(),
            None,
        )
        .await;
        let summary = json!({
            "agent": self.name,
            "run_id": run_id,
            "status": outcome.status,
            "iterations": outcome.iterations,
            "tools_used": outcome.tools_used,
            "usage": outcome.usage,
        });
        match (outcome.status, outcome.answer) {
            (RunStatus::Completed, Some(answer)) => Ok(ToolOutput {
                text: answer,
                structured: Some(summary),
                usage: Some(outcome.usage),
                cost_usd: None,
                images: Vec::new(),
            }),
            (RunStatus::AwaitingInput, _) => Err(ToolError::Failed(format!(
                "the {} agent stopped because it needs a human's input ({}); ask the user \
                 yourself, or go on without it",
                self.name,
                outcome
                    .input_required
                    .and_then(|input| input.question)
                    .unwrap_or_else(|| "an approval".to_string())
            ))),
            (_, _) => Err(ToolError::Failed(format!(
                "the {} agent failed: {}",
                self.name,
                outcome
                    .failure
                    .map(|failure| failure.message)
                    .unwrap_or_else(|| outcome.status.as_str().to_string())
            ))),
        }
    }
}
