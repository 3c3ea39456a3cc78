//! The library entry point: build an [`Agent`] once, start runs, consume their events as a
//! `Stream`.

use std::{
    collections::BTreeMap,
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
};

use agentloop_protocol::{ChatMessage, ErrorCode, Event};
use futures::Stream;
use tokio::{sync::mpsc, task::JoinHandle};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    catalog::ToolCatalog,
    driver::RunServices,
    hooks::ToolHook,
    llm::Llm,
    machine::{RunContext, RunInput, RunMachine, RunOutcome},
    policy::{MutationLimiter, PolicySettings, RunPolicy, UnknownWorkflow, WorkflowSettings},
    registry::{SourceLeftOut, ToolRegistry},
    settings::{AgentSettings, InvalidSetting, ToolSettings},
    store::Store,
    subagent::{AGENT_TOOL_PREFIX, Parent, SubAgentSettings, SubAgentTool},
    telemetry::{NoTelemetry, Telemetry},
    tokens::{EstimatedTokens, TokenCounter},
    tool::{Tool, ToolSource},
    trace::{NoTracer, RunSpanStart, RunTrace, Tracer},
};

/// Errors of building an agent or of a run's task.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    #[error("no LLM was given to the agent builder (call .llm(...))")]
    MissingLlm,
    #[error("invalid configuration: {0}")]
    InvalidSettings(#[from] InvalidSetting),
    #[error("the run task crashed: {0}")]
    RunCrashed(#[source] tokio::task::JoinError),
}

/// A question for the agent, with what the run should know.
#[derive(Debug, Clone)]
pub struct RunRequest {
    pub query: String,
    /// Images and files of the question, admitted (`attachments::admit_url`, `admit_bytes`,
    /// `check_message`) by whoever took them in.
    pub attachments: Vec<agentloop_protocol::Attachment>,
    /// Defaults to a new session id. With a store, the session is created when it does not
    /// exist yet.
    pub session_id: Option<Uuid>,
    /// With a store: the session must exist already; a `session_id` that names no session is
    /// refused (`session_not_found`) instead of being created (default false).
    pub existing_session: bool,
    /// `session_id` was made for this request ([`RunRequest::new_session_id`]): with a store,
    /// the session is created without being looked up first (default false; a request without
    /// a `session_id` gets a new one all the same).
    pub session_is_new: bool,
    /// Defaults to a new run id.
    pub run_id: Option<Uuid>,
    /// Earlier messages of the conversation, oldest first. With a store and
    /// `include_history`, they are read from the session instead.
    pub history: Vec<ChatMessage>,
    /// With a store: add this run's messages to the session (default true).
    pub save_chat: bool,
    /// With a store: show the model the session's earlier messages (default true).
    pub include_history: bool,
    /// Replaces the agent's system prompt for this run.
    pub system_prompt: Option<String>,
    /// Replaces the configured model for this run.
    pub model: Option<String>,
    /// Lower than the agent's limit, never higher.
    pub max_iterations: Option<u32>,
    /// Lowers the agent's `[agent.budget]` for this run; a higher limit is clamped to the
    /// agent's.
    pub budget: crate::settings::Budget,
    pub context: RunContext,
    /// Tools the client declares and runs itself (AG-UI frontend tools): offered to the model
    /// beside the agent's; a call to one pauses the run until the client answers with its
    /// result (`InputAnswer.results`).
    pub client_tools: Vec<crate::client_tool::ClientTool>,
    /// The W3C `traceparent` of the caller (an HTTP request's): the run's spans continue its
    /// trace.
    pub traceparent: Option<String>,
    /// With a store: the run answers the session's last question again (the AI SDK's
    /// regenerate). The last exchange (from the first message of `Supersede::from_run`, or of
    /// the session's last run) is marked superseded as the run begins, in the same commit: the
    /// model's history and the session's listing then hold the question once, asked by this
    /// run, and its new answer. `query` is that question.
    pub supersede: Option<crate::store::Supersede>,
    /// The JSON Schema of this run's answer (typed answers), in place of the agent's
    /// `[agent] output_schema`; asked for in the agent's `output_mode`.
    pub output: Option<crate::output::OutputSpec>,
}

impl Default for RunRequest {
    fn default() -> Self {
        Self {
            query: String::new(),
            attachments: Vec::new(),
            session_id: None,
            existing_session: false,
            session_is_new: false,
            run_id: None,
            history: Vec::new(),
            save_chat: true,
            include_history: true,
            system_prompt: None,
            model: None,
            max_iterations: None,
            budget: Default::default(),
            context: RunContext::default(),
            client_tools: Vec::new(),
            traceparent: None,
            supersede: None,
            output: None,
        }
    }
}

impl RunRequest {
    pub fn new(query: impl Into<String>) -> Self {
        Self {
            query: query.into(),
            ..Self::default()
        }
    }

    /// The request's session id, made now when it has none: such a session is new.
    pub fn new_session_id(&mut self) -> Uuid {
        match self.session_id {
            Some(id) => id,
            None => {
                self.session_is_new = true;
                *self.session_id.insert(Uuid::now_v7())
            }
        }
    }

    pub fn user(mut self, user_id: impl Into<String>) -> Self {
        self.context.user_id = Some(user_id.into());
        self
    }

    pub fn session(mut self, session_id: Uuid) -> Self {
        self.session_id = Some(session_id);
        self
    }

    pub fn history(mut self, history: Vec<ChatMessage>) -> Self {
        self.history = history;
        self
    }

    pub fn max_iterations(mut self, max_iterations: u32) -> Self {
        self.max_iterations = Some(max_iterations);
        self
    }

    pub fn context(mut self, context: RunContext) -> Self {
        self.context = context;
        self
    }
}

/// An LLM, its tools and its limits (and optionally a store); cheap to clone and share between
/// runs.
#[derive(Clone)]
pub struct Agent {
    services: RunServices,
    store: Option<Arc<dyn Store>>,
    workflows: Arc<BTreeMap<String, WorkflowSettings>>,
    limiter: Option<Arc<MutationLimiter>>,
    warnings: Arc<Vec<String>>,
    ownership: Ownership,
}

/// Which instance this agent's runs belong to, and whether it is handing them over.
#[derive(Clone, Default)]
struct Ownership {
    instance: Option<Arc<str>>,
    /// Cancelled when the instance stops: each run stops at its next saved step and is left
    /// for another instance (or the next start) to adopt.
    handover: CancellationToken,
}

impl Agent {
    /// This agent, with its runs owned by the instance `instance_id` (see
    /// the `durability` module): they carry its id in the store, their steps are refused once
    /// another instance adopted them, and [`Agent::hand_over`] stops them at a saved step.
    pub fn owned_by(mut self, instance_id: impl Into<String>) -> Agent {
        self.ownership = Ownership {
            instance: Some(Arc::from(instance_id.into())),
            handover: CancellationToken::new(),
        };
        self
    }

    /// The instance this agent's runs belong to.
    pub fn instance_id(&self) -> Option<&str> {
        self.ownership.instance.as_deref()
    }

    /// Sends a message to the run `run_id`, driven by this agent in this process, while it
    /// works (steering), and waits for the run's answer. A message the run takes joins the
    /// conversation before the run's next LLM call, never in the middle of a tool batch, with
    /// a `user_message` event; a run whose model answers while messages wait answers them in
    /// the same run. A run that will make no further LLM call (its last allowed step or its
    /// summary is under way) refuses it: [`crate::SteerError::TooLate`].
    pub fn steer(
        &self,
        run_id: Uuid,
        text: &str,
    ) -> impl Future<Output = Result<(), crate::SteerError>> + Send + 'static {
        self.services.steering.send(run_id, text)
    }

    /// Answers a question (MCP elicitation) a tool call of the run `run_id`, driven by this
    /// agent in this process, is waiting on ([`crate::QuestionBoard::answer`]); returns the
    /// question's id.
    pub fn answer_question(
        &self,
        run_id: Uuid,
        answer: crate::protocol::ElicitationAnswer,
    ) -> Result<String, crate::AnswerError> {
        self.services.questions.answer(run_id, answer)
    }

    /// Hands this agent's runs over: each run in progress stops at its next saved step (an LLM
    /// call under way is abandoned, tool calls under way finish and are saved first) and ends
    /// without an outcome, to be adopted. Runs without a store are not affected.
    pub fn hand_over(&self) {
        self.ownership.handover.cancel();
    }

    pub(crate) fn handover_signal(&self) -> CancellationToken {
        self.ownership.handover.clone()
    }

    pub fn builder() -> AgentBuilder {
        AgentBuilder::default()
    }

    /// The tools offered now (a run keeps the ones it started with).
    pub fn catalog(&self) -> Arc<ToolCatalog> {
        self.services.tools.catalog()
    }

    /// Adds the tools of a source that became ready after the agent was built (a slow MCP
    /// server); later runs are offered them. The error says why the source was left out.
    pub async fn add_source(&self, source: Arc<dyn ToolSource>) -> Result<(), SourceLeftOut> {
        self.services.tools.add_source(source).await.map(|_| ())
    }

    pub fn settings(&self) -> &Arc<AgentSettings> {
        &self.services.settings
    }

    pub fn services(&self) -> &RunServices {
        &self.services
    }

    /// The span of run `run_id`, which asks for `model` (`None`: the configured one),
    /// continuing the trace of `parent` (a W3C `traceparent`).
    pub fn start_trace(
        &self,
        run_id: Uuid,
        session_id: Uuid,
        model: Option<&str>,
        parent: Option<&str>,
    ) -> RunTrace {
        let start = RunSpanStart {
            run_id,
            session_id,
            agent: None,
            model,
            parent,
        };
        RunTrace::start(self.services.tracer.as_ref(), &start)
    }

    /// The services for driving one run, with its span.
    pub(crate) fn services_traced(&self, trace: RunTrace) -> RunServices {
        RunServices {
            trace,
            ..self.services.clone()
        }
    }

    pub fn store(&self) -> Option<&Arc<dyn Store>> {
        self.store.as_ref()
    }

    /// The workflows runs may name in their context.
    pub fn workflows(&self) -> &BTreeMap<String, WorkflowSettings> {
        &self.workflows
    }

    /// Problems found while building that did not stop the agent (a tool source that failed,
    /// a schema that does not compile, ...).
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The state machine of a run, for callers that drive runs themselves. A run whose
    /// workflow the agent does not have ends at its start; driving it emits why.
    pub fn prepare(&self, request: RunRequest) -> RunMachine {
        self.machine_for(self.run_input(request))
    }

    /// The state machine of a run that starts from `input`.
    pub(crate) fn machine_for(&self, input: RunInput) -> RunMachine {
        RunMachine::new(
            input,
            self.services.settings.clone(),
            self.services.tools.catalog(),
            self.services.counter.clone(),
        )
    }

    /// What `request` starts from, with this agent's settings; refused when it names a workflow
    /// the agent does not have.
    pub(crate) fn run_input(&self, request: RunRequest) -> RunInput {
        let settings = &self.services.settings;
        let max_iterations = request
            .max_iterations
            .map_or(settings.max_iterations, |wanted| {
                wanted.clamp(1, settings.max_iterations)
            });
        let (policy, mut refused) = match self.policy_for(&request.context) {
            Ok(policy) => (policy, None),
            Err(unknown) => {
                let failure = crate::machine::RunFailure {
                    code: ErrorCode::UnknownWorkflow,
                    message: unknown.to_string(),
                };
                (RunPolicy::default(), Some(failure))
            }
        };
        let output = match request.output {
            Some(spec) => {
                if let Err(invalid) = crate::output::check_spec(&spec, "output.schema") {
                    refused.get_or_insert(crate::machine::RunFailure {
                        code: ErrorCode::OutputInvalid,
                        message: invalid.message,
                    });
                }
                Some(settings.typed_output_for(spec))
            }
            // Checked when the agent was built.
            None => settings.typed_output().ok().flatten(),
        };
        RunInput {
            run_id: request.run_id.unwrap_or_else(Uuid::now_v7),
            session_id: request.session_id.unwrap_or_else(Uuid::now_v7),
            query: request.query,
            attachments: request.attachments,
            history: request.history,
            system_prompt: request
                .system_prompt
                .unwrap_or_else(|| settings.system_prompt.clone()),
            model: request.model,
            max_iterations,
            context: request.context,
            started_at: crate::clock::now(),
            policy,
            client_tools: request.client_tools,
            budget: settings.budget.lowered_by(request.budget),
            refused,
            output,
        }
    }

    /// The rules of a run with `context` (an error names an unknown workflow).
    pub fn policy_for(&self, context: &RunContext) -> Result<RunPolicy, UnknownWorkflow> {
        RunPolicy::for_run(
            context.read_only,
            context.workflow.as_deref(),
            &self.workflows,
            self.limiter.clone(),
            crate::policy::limit_key(context.entity_id.as_deref(), context.user_id.as_deref()),
        )
    }

    /// Starts a run in its own task; its events arrive through the returned handle.
    pub fn run(&self, mut request: RunRequest) -> RunHandle {
        let run_id = *request.run_id.get_or_insert_with(Uuid::now_v7);
        let session_id = *request.session_id.get_or_insert_with(Uuid::now_v7);
        let (sender, events) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let agent = self.clone();
        let token = cancel.clone();
        let task =
            tokio::spawn(
                async move { agent.run_with_sink(request, Arc::new(sender), token).await },
            );
        RunHandle {
            run_id,
            session_id,
            events,
            task,
            cancel,
            steering: self.services.steering.clone(),
        }
    }
}

/// A run in progress: a `Stream` of its events, ending after `done`.
pub struct RunHandle {
    run_id: Uuid,
    session_id: Uuid,
    events: mpsc::UnboundedReceiver<Event>,
    task: JoinHandle<RunOutcome>,
    cancel: CancellationToken,
    steering: Arc<crate::SteeringBoard>,
}

impl RunHandle {
    pub fn run_id(&self) -> Uuid {
        self.run_id
    }

    pub fn session_id(&self) -> Uuid {
        self.session_id
    }

    /// Asks the run to stop at its next safe point.
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Sends the run a message while it works (steering) and waits for the run's answer: a
    /// message it takes joins the conversation before the next LLM call and the run goes on
    /// (`user_message`); see [`Agent::steer`].
    pub fn steer(
        &self,
        text: &str,
    ) -> impl Future<Output = Result<(), crate::SteerError>> + Send + 'static {
        self.steering.send(self.run_id, text)
    }

    pub fn cancellation_token(&self) -> CancellationToken {
        self.cancel.clone()
    }

    /// Waits for the end of the run. Events not consumed yet are dropped.
    pub async fn outcome(self) -> Result<RunOutcome, AgentError> {
        self.task.await.map_err(AgentError::RunCrashed)
    }

    /// Waits for the end of the run and returns all its events with the outcome.
    pub async fn collect(mut self) -> Result<(Vec<Event>, RunOutcome), AgentError> {
        let mut events = Vec::new();
        while let Some(event) = self.events.recv().await {
            events.push(event);
        }
        let outcome = self.outcome().await?;
        Ok((events, outcome))
    }
}

impl Stream for RunHandle {
    type Item = Event;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.events.poll_recv(cx)
    }
}

/// Assembles an [`Agent`].
#[derive(Default)]
pub struct AgentBuilder {
    inputs: Option<Arc<dyn crate::driver::InputLog>>,
    llm: Option<Arc<dyn Llm>>,
    tools: Vec<Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    settings: AgentSettings,
    tool_settings: BTreeMap<String, ToolSettings>,
    store: Option<Arc<dyn Store>>,
    counter: Option<Arc<dyn TokenCounter>>,
    telemetry: Option<Arc<dyn Telemetry>>,
    tracer: Option<Arc<dyn Tracer>>,
    policy: PolicySettings,
    workflows: BTreeMap<String, WorkflowSettings>,
    hooks: Vec<Arc<dyn ToolHook>>,
    descriptions: BTreeMap<String, String>,
    agents: BTreeMap<String, SubAgentSettings>,
}

impl AgentBuilder {
    /// Another agent the main agent may call as the tool `agent.NAME` (see
    /// [`SubAgentSettings`]).
    pub fn sub_agent(mut self, name: impl Into<String>, agent: SubAgentSettings) -> Self {
        self.agents.insert(name.into(), agent);
        self
    }

    pub fn llm(mut self, llm: Arc<dyn Llm>) -> Self {
        self.llm = Some(llm);
        self
    }

    /// Adds a tool under the name its `info()` gives.
    pub fn tool(mut self, tool: impl Tool + 'static) -> Self {
        self.tools.push(Arc::new(tool));
        self
    }

    pub fn tool_arc(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    /// Adds every tool of a source (an MCP server, ...).
    pub fn source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    pub fn settings(mut self, settings: AgentSettings) -> Self {
        self.settings = settings;
        self
    }

    pub fn system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.settings.system_prompt = prompt.into();
        self
    }

    pub fn max_iterations(mut self, max_iterations: u32) -> Self {
        self.settings.max_iterations = max_iterations;
        self
    }

    /// Rules for mutating tools (the rate limit per entity).
    pub fn policy(mut self, policy: PolicySettings) -> Self {
        self.policy = policy;
        self
    }

    /// A workflow runs may name (`context.workflow`): they are offered only its tools.
    pub fn workflow(mut self, name: impl Into<String>, workflow: WorkflowSettings) -> Self {
        self.workflows.insert(name.into(), workflow);
        self
    }

    /// Extra documentation for tools' descriptions, by tool name (see
    /// [`crate::parse_tool_descriptions`]).
    pub fn tool_descriptions(mut self, descriptions: BTreeMap<String, String>) -> Self {
        self.descriptions = descriptions;
        self
    }

    /// Runs `hook` around every tool call (after the hooks added before it).
    pub fn hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    /// Shows every input fed to the machines of this agent's runs to `log`, with its time: a
    /// run's first state and its inputs replay it exactly.
    pub fn input_log(mut self, log: Arc<dyn crate::driver::InputLog>) -> Self {
        self.inputs = Some(log);
        self
    }

    /// Keeps sessions, runs and their events in `store`.
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Receives each run's reports: LLM calls, tool calls, ends (default: none).
    pub fn telemetry(mut self, telemetry: Arc<dyn Telemetry>) -> Self {
        self.telemetry = Some(telemetry);
        self
    }

    /// Counts tokens for `agent.context_tokens` (default: a conservative estimate).
    /// Where the spans of runs go (OpenTelemetry in the facade); none by default.
    pub fn tracer(mut self, tracer: Arc<dyn Tracer>) -> Self {
        self.tracer = Some(tracer);
        self
    }

    pub fn token_counter(mut self, counter: Arc<dyn TokenCounter>) -> Self {
        self.counter = Some(counter);
        self
    }

    pub fn tool_settings(mut self, tool: impl Into<String>, settings: ToolSettings) -> Self {
        self.tool_settings.insert(tool.into(), settings);
        self
    }

    /// Lists the tools of every source (at the same time) and builds the agent. A source that
    /// fails is left out with a warning.
    pub async fn build(mut self) -> Result<Agent, AgentError> {
        let llm = self.llm.ok_or(AgentError::MissingLlm)?;
        self.settings
            .validate()
            .map_err(AgentError::InvalidSettings)?;
        for (tool, settings) in &self.tool_settings {
            settings
                .validate(tool)
                .map_err(AgentError::InvalidSettings)?;
        }
        for (name, agent) in &self.agents {
            agent.validate(name).map_err(AgentError::InvalidSettings)?;
            // The task's time limit, unless [tools."agent.NAME"] sets one.
            let tool = format!("{AGENT_TOOL_PREFIX}{name}");
            let settings = self.tool_settings.entry(tool).or_default();
            settings.timeout_s = settings.timeout_s.or(Some(agent.timeout_s));
        }
        let settings = Arc::new(self.settings);
        let counter = self
            .counter
            .unwrap_or_else(|| Arc::new(EstimatedTokens) as Arc<dyn TokenCounter>);
        let telemetry = self
            .telemetry
            .unwrap_or_else(|| Arc::new(NoTelemetry) as Arc<dyn Telemetry>);
        let tracer = self
            .tracer
            .unwrap_or_else(|| Arc::new(NoTracer) as Arc<dyn Tracer>);
        let hooks = Arc::new(self.hooks);
        let workflows = Arc::new(self.workflows);
        let limiter = self
            .policy
            .mutation_rate
            .map(|rate| Arc::new(MutationLimiter::new(rate)));
        let parent = Parent {
            llm: llm.clone(),
            settings: settings.clone(),
            counter: counter.clone(),
            telemetry: telemetry.clone(),
            tracer: tracer.clone(),
            hooks: hooks.clone(),
            workflows: workflows.clone(),
            limiter: limiter.clone(),
            inputs: self.inputs.clone(),
        };
        let can_clarify = settings.planning.enabled || settings.ask_user;
        let unclarifiable: Vec<String> = self
            .tool_settings
            .iter()
            .filter(|(_, settings)| settings.requires_clarity && !can_clarify)
            .map(|(tool, _)| {
                format!(
                    "tools.\"{tool}\" requires_clarity, but nothing can clarify a request \
                     (enable [agent.planning] or agent.ask_user): it will never be offered"
                )
            })
            .collect();
        let (mut tools, agents, tool_settings, descriptions) = (
            self.tools,
            self.agents,
            self.tool_settings,
            self.descriptions,
        );
        let registry = Arc::new_cyclic(|registry| {
            for (name, agent) in agents {
                let tool = SubAgentTool::new(&name, agent, parent.clone(), registry.clone());
                tools.push(Arc::new(tool));
            }
            ToolRegistry::new(tools, tool_settings, descriptions)
        });
        let listed = futures::future::join_all(
            self.sources
                .into_iter()
                .map(|source| registry.add_source(source)),
        )
        .await;
        let mut warnings: Vec<String> = listed
            .into_iter()
            .filter_map(|listed| listed.err().map(|left_out| left_out.to_string()))
            .collect();
        let catalog = registry.catalog();
        warnings.extend(catalog.warnings().iter().cloned());
        warnings.extend(unclarifiable);
        for builtin in crate::machine::builtin_tools(&settings) {
            if catalog.get(builtin).is_some() {
                warnings.push(format!(
                    "tool {builtin} is hidden by the built-in tool of the same name"
                ));
            }
        }
        for (name, workflow) in workflows.iter() {
            for pattern in &workflow.tools {
                let single = WorkflowSettings {
                    tools: vec![pattern.clone()],
                };
                if !catalog
                    .entries()
                    .iter()
                    .any(|entry| single.allows(entry.name()))
                {
                    warnings.push(format!(
                        "workflows.{name} names {pattern:?}, which matches no tool offered"
                    ));
                }
            }
        }
        Ok(Agent {
            services: RunServices {
                llm,
                tools: registry,
                settings,
                counter,
                telemetry,
                tracer,
                trace: RunTrace::default(),
                hooks,
                inputs: self.inputs,
                steering: Arc::default(),
                questions: Arc::default(),
            },
            store: self.store,
            workflows,
            limiter,
            warnings: Arc::new(warnings),
            ownership: Ownership::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use async_trait::async_trait;
    use serde_json::json;

    use super::*;
    use crate::{
        llm::{LlmError, ModelReply, ModelRequest, TextSink},
        tool::{FnTool, ToolOutput},
    };

    #[test]
    fn a_session_id_made_for_a_request_is_new_and_one_it_names_is_not() {
        let mut request = RunRequest::new("hi");
        let made = request.new_session_id();
        assert_eq!(request.session_id, Some(made));
        assert!(request.session_is_new);
        assert_eq!(request.new_session_id(), made, "made once");

        let named = Uuid::now_v7();
        let mut request = RunRequest {
            session_id: Some(named),
            ..RunRequest::new("hi")
        };
        assert_eq!(request.new_session_id(), named);
        assert!(!request.session_is_new);
    }

    struct NoLlm;

    #[async_trait]
    impl Llm for NoLlm {
        async fn complete(
            &self,
            _request: &ModelRequest,
            _on_text: TextSink<'_>,
        ) -> Result<ModelReply, LlmError> {
            Err(LlmError::Protocol("not used".into()))
        }
    }

    fn tool(name: &str) -> FnTool {
        FnTool::new(name, "", json!({"type": "object"}), |_, _| async {
            Ok(ToolOutput::text(""))
        })
    }

    #[tokio::test]
    async fn what_can_never_work_as_configured_is_reported_when_building() {
        let mut settings = AgentSettings::default();
        settings.planning.enabled = true;
        let agent = Agent::builder()
            .llm(Arc::new(NoLlm))
            .settings(settings)
            .tool(tool("write_plan"))
            .tool(tool("ask_user"))
            .build()
            .await
            .unwrap();
        let warnings = agent.warnings().join("\n");
        assert!(
            warnings.contains("tool write_plan is hidden by the built-in tool"),
            "{warnings}"
        );
        assert!(
            !warnings.contains("ask_user"),
            "ask_user is off: {warnings}"
        );

        let agent = Agent::builder()
            .llm(Arc::new(NoLlm))
            .tool(tool("kb.fetch"))
            .tool_settings(
                "kb.fetch",
                ToolSettings {
                    requires_clarity: true,
                    ..ToolSettings::default()
                },
            )
            .build()
            .await
            .unwrap();
        let warnings = agent.warnings().join("\n");
        assert!(
            warnings.contains("tools.\"kb.fetch\" requires_clarity, but nothing can clarify"),
            "{warnings}"
        );
    }
}
