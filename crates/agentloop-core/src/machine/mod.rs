//! The run as a state machine that does no I/O.
//!
//! The machine has one way in, [`RunMachine::handle`]: the driver feeds it [`Input::Start`] for
//! the first [`Step`], performs it (an LLM call or tool calls), and feeds the result back, each
//! input with the time it happened; every input says what came of it ([`Handled`]), until
//! [`Step::Finished`]. New messages, tool records and events pile up until the driver takes
//! them with [`RunMachine::take_changes`], so it can persist a step's changes before it emits
//! its events.

mod batch;
mod builtins;
mod checkpoint;
mod clarify;
mod ending;
mod guardrails;
mod guidance;
mod pipeline;
mod planning;
mod recovery;
mod request;
mod resolution;
mod review;
mod schemas;
mod spending;
mod state;
mod steering;
pub(crate) mod text;
mod typed;
mod view;

use std::{collections::HashMap, sync::Arc};

use agentloop_protocol::{
    ChatMessage, ErrorCode, EventKind, FinalizeReason, InputKind, InputRequest, MessageKind,
    PendingCall, Plan, RunStatus, SessionMessage, ToolExecutionRecord, Usage,
};
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// A human's answer to a paused run (the body of `POST /v1/runs/{id}/input` without `stream`).
pub use agentloop_protocol::InputAnswer;
pub use batch::{CallRefusal, SideEffectNote, ToolInvocation, ToolOutcome, ToolResult};
pub use checkpoint::{OtherStateVersion, UnreadableState, first_checkpoint};
pub use pipeline::recheck;
pub use spending::SampledCall;
pub use state::RunState;
pub use steering::SteerError;
pub use text::{OUTCOME_UNKNOWN, bound, fallback_answer, one_line, records_digest};

use crate::{
    catalog::ToolCatalog,
    guardrail::{GuardrailCheck, GuardrailVerdict},
    llm::{LlmError, ModelReply, ModelRequest, ToolChoice},
    policy::RunPolicy,
    settings::AgentSettings,
    tokens::{TokenCounter, message_tokens},
};
use builtins::Builtin;
use state::Phase;
use view::Viewed;

/// The names of the built-in tools runs under `settings` are offered (`write_plan`,
/// `ask_user`); they hide catalog tools of the same name.
pub(crate) fn builtin_tools(settings: &AgentSettings) -> impl Iterator<Item = &'static str> + '_ {
    Builtin::all_offered(settings).map(Builtin::name)
}

/// Why a run does not offer a tool of its catalog now.
enum Withheld {
    /// A built-in tool of the same name hides it.
    Hidden,
    /// It failed too often in this run.
    Withdrawn,
    /// It waits for a clear request (`requires_clarity`), and the request was not clarified.
    Unclear,
    /// The run's policy does not allow it.
    Refused(CallRefusal),
}

/// Who a run is for and under which rules.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunContext {
    pub user_id: Option<String>,
    pub entity_id: Option<String>,
    pub workflow: Option<String>,
    pub read_only: bool,
}

/// Everything a run starts from.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunInput {
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub query: String,
    /// The images and files of the question (`[agent.attachments]`); their bytes in memory
    /// until the question's message is saved, as the message's are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<agentloop_protocol::Attachment>,
    /// Earlier messages of the session, oldest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<ChatMessage>,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub system_prompt: String,
    pub model: Option<String>,
    pub max_iterations: u32,
    pub context: RunContext,
    /// When the run started: the time of its first message.
    pub started_at: chrono::DateTime<chrono::Utc>,
    /// What the run may spend: the agent's `[agent.budget]`, lowered by the request's.
    #[serde(default)]
    pub budget: crate::settings::Budget,
    /// What the run may do with its tools (read-only, workflow allowlist, rate limit); rebuilt
    /// from the context when a paused run resumes.
    #[serde(skip)]
    pub policy: RunPolicy,
    /// Tools the run's client declared and answers itself (`client_tool.rs`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub client_tools: Vec<crate::client_tool::ClientTool>,
    /// Why the run cannot start (a workflow the agent does not have, a store that could not
    /// begin it): its start ends it failed with this, after `run_started`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<RunFailure>,
    /// The typed answer the run must give (`[agent] output_schema`, the request's `output`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<crate::output::TypedOutput>,
}

/// What the driver must do next.
#[derive(Debug)]
pub enum Step {
    CallModel(ModelRequest),
    CallTools(Vec<ToolInvocation>),
    /// Check the question or the answer with the run's guardrails
    /// ([`Input::GuardrailVerdicts`]).
    CheckGuardrails(GuardrailCheck),
    Finished(Box<RunOutcome>),
}

impl Step {
    /// How the run ended, when this step is its end.
    pub fn ended(&self) -> Option<&RunOutcome> {
        match self {
            Step::Finished(outcome) => Some(outcome),
            Step::CallModel(_) | Step::CallTools(_) | Step::CheckGuardrails(_) => None,
        }
    }
}

/// What the machine did with an input ([`RunMachine::handle`]).
#[derive(Debug)]
#[must_use]
pub enum Handled {
    /// The next step for the driver.
    Next(Step),
    /// A call of the batch ended and others still run: nothing to do until they end.
    BatchRunning,
    /// A message sent while the run works: queued for the next LLM call, or refused.
    Steered(Result<(), SteerError>),
    /// An answer that does not fit what the paused run waits for; the run stays paused.
    AnswerRefused(InvalidAnswer),
}

impl Handled {
    /// The next step, when the input led to one.
    pub fn step(self) -> Option<Step> {
        match self {
            Handled::Next(step) => Some(step),
            _ => None,
        }
    }
}

/// What the driver feeds the machine: each input arrives with the time it happened
/// ([`RunMachine::handle`]). The inputs of a run, fed again to its first state, give the same
/// events and the same state.
#[derive(Debug, Clone)]
pub enum Input {
    Start,
    /// The reply to the LLM call the last step asked for, and how long the call took (input
    /// data, so that a replay reports the same `llm_call`).
    ModelReply {
        reply: Result<ModelReply, LlmError>,
        duration_ms: u64,
    },
    ToolResult(ToolResult),
    /// A human's answer to a paused run; one that does not fit changes nothing.
    Answer(InputAnswer),
    Cancel,
    Fail {
        code: ErrorCode,
        message: String,
    },
    /// The last step could not be saved: the run ends failed with `store_unavailable`, in any
    /// phase (an ending that was not saved did not happen).
    StoreLost {
        error: String,
        announced: bool,
    },
    /// A message the user sends while the run works (steering): it joins the conversation
    /// before the next LLM call, never in the middle of a tool batch.
    Steer {
        text: String,
    },
    /// The run goes on from its saved state in another process than the one that saved it
    /// (`instance`): a crash, a deploy, a handover.
    Resume {
        reason: agentloop_protocol::ResumeReason,
        instance: String,
    },
    /// The verdicts of the check the last step asked for, each with how long it took.
    GuardrailVerdicts(Vec<GuardrailVerdict>),
    /// A tool call's MCP server had the run's model answer it (sampling): counted in the run.
    Sampled(SampledCall),
}

/// Counters of a run in progress.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunProgress {
    pub iterations: u32,
    pub tools_used: u32,
    pub usage: Usage,
}

/// Why a run failed.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct RunFailure {
    pub code: ErrorCode,
    pub message: String,
}

/// How a run ended, with everything it produced.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RunOutcome {
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub status: RunStatus,
    /// The answer; `None` only when the run failed.
    pub answer: Option<String>,
    pub failure: Option<RunFailure>,
    /// Set when the loop had to force the summary.
    pub finalize_reason: Option<FinalizeReason>,
    /// The plan as it stood at the end (with `[agent.planning]`).
    pub plan: Option<Plan>,
    /// What a paused run (`awaiting_input`) waits for.
    pub input_required: Option<InputRequest>,
    pub iterations: u32,
    pub tools_used: u32,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub records: Vec<ToolExecutionRecord>,
    /// This run's messages: the question, tool calls and results, the trace and the answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<SessionMessage>,
    pub usage: Usage,
    /// Id of the final assistant message.
    pub message_id: Option<Uuid>,
    pub should_refresh: bool,
    /// The typed answer (runs with an output schema), valid against the schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
}

/// Why an answer does not fit what a paused run waits for; the run stays paused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum InvalidAnswer {
    #[error("the run is not waiting for input")]
    NotWaiting,
    #[error("the run waits for decisions on its tool calls (approve, deny), not for an answer")]
    DecisionsExpected,
    #[error("{call_id} is not a call waiting for approval (waiting: {})", waiting.join(", "))]
    NotWaitingForApproval {
        call_id: String,
        waiting: Vec<String>,
    },
    #[error("{0} is given more than one decision (approved, denied, a result)")]
    ApprovedAndDenied(String),
    #[error("{0} is a call of a client tool: answer it with its result, not an approval")]
    ResultExpected(String),
    #[error("{0} is not a call of a client tool: approve or deny it")]
    NotAClientCall(String),
    #[error("approve or deny every waiting call; undecided: {}", .0.join(", "))]
    Undecided(Vec<String>),
    #[error("no call waits for approval; the run waits for an answer to: {question}")]
    NoCallWaits { question: String },
    #[error("the run waits for an answer to: {question} (send it as \"answer\")")]
    AnswerExpected { question: String },
}

/// What a step changed: written to the store before its events are emitted.
#[derive(Debug, Default)]
pub struct MachineChanges {
    pub messages: Vec<SessionMessage>,
    pub records: Vec<ToolExecutionRecord>,
    pub events: Vec<EventKind>,
    pub progress: RunProgress,
}

/// One run of the loop: its state, what is derived from it, and what it changed since the
/// driver last took the changes.
pub struct RunMachine {
    /// Boxed: the machine is moved down the driver's calls, and each `async fn` that takes it
    /// keeps a copy in its future (a run's task was 14 KB, mostly copies of an inline state).
    state: Box<RunState>,
    settings: Arc<AgentSettings>,
    catalog: Arc<ToolCatalog>,
    counter: Arc<dyn TokenCounter>,
    /// How many of the state's `turn` were already taken by `take_changes`.
    taken_messages: usize,
    /// The model's view of the history and of `turn`, each message prepared and counted once.
    history_view: Vec<Viewed>,
    turn_view: Vec<Viewed>,
    /// The system prompt, and the tokens of it and of each tool's definition: they never
    /// change in a run.
    system: Arc<ChatMessage>,
    system_tokens: usize,
    /// The tokens of each catalog tool's spec (counted once per catalog).
    tool_tokens: Arc<HashMap<String, usize>>,
    /// The tokens of the offered built-in tools' specs, together.
    builtin_tokens: usize,
    /// Records that ended since the last `take_changes`, in the order they ended.
    new_records: Vec<ToolExecutionRecord>,
    record_by_call: HashMap<String, usize>,
    outbox: Vec<EventKind>,
    /// The cost of the last LLM call fed, for telemetry (not part of the state).
    last_call_cost: Option<f64>,
    /// Calls that ended without running since [`RunMachine::take_refused_calls`], for their
    /// spans (not part of the state).
    refused_here: Vec<ToolExecutionRecord>,
    /// The typed answer's compiled schema and tool (runs with an output schema).
    typed: Option<typed::Typed>,
}

impl RunMachine {
    /// The machine of a run that has not started: its question is its first message.
    pub fn new(
        input: RunInput,
        settings: Arc<AgentSettings>,
        catalog: Arc<ToolCatalog>,
        counter: Arc<dyn TokenCounter>,
    ) -> Self {
        let now = input.started_at;
        let mut machine = Self::from_state(RunState::new(input, now), settings, catalog, counter);
        machine.ask_question();
        machine
    }

    /// The run's question as its first message: a new run's, or that of a run restored from
    /// the checkpoint of its beginning (the question is saved with the first step, which that
    /// run never saved).
    fn ask_question(&mut self) {
        if self.state.turn.is_empty() {
            let question = ChatMessage::user(self.state.input.query.clone())
                .with_attachments(self.state.input.attachments.clone());
            self.push_message(MessageKind::Dialogue, question, serde_json::Value::Null);
        }
    }

    /// The machine of `state` (a new run, or one restored from the store), with what is
    /// derived from the state computed again. Nothing in it counts as a change to take.
    pub fn from_state(
        state: RunState,
        settings: Arc<AgentSettings>,
        catalog: Arc<ToolCatalog>,
        counter: Arc<dyn TokenCounter>,
    ) -> Self {
        let catalog = if state.input.client_tools.is_empty() {
            catalog
        } else {
            // A client tool without a name, or with a built-in tool's, is left out.
            let client_tools: Vec<_> = state
                .input
                .client_tools
                .iter()
                .filter(|tool| {
                    !tool.name.trim().is_empty() && !Builtin::is_builtin_name(&tool.name)
                })
                .cloned()
                .collect();
            Arc::new(catalog.with_client_tools(&client_tools))
        };
        let history_view = state
            .input
            .history
            .iter()
            .map(|message| view::view_message(&catalog, counter.as_ref(), message, &settings, true))
            .collect();
        let turn_view = state
            .turn
            .iter()
            .filter(|message| view::is_viewed(message.kind))
            .map(|message| {
                view::view_message(
                    &catalog,
                    counter.as_ref(),
                    &message.message,
                    &settings,
                    false,
                )
            })
            .collect();
        let system = Arc::new(ChatMessage::system(state.input.system_prompt.clone()));
        let system_tokens = message_tokens(counter.as_ref(), &system);
        let tool_tokens = catalog.spec_tokens(counter.as_ref());
        let typed = state.input.output.as_ref().map(typed::Typed::new);
        let builtin_tokens = Builtin::all_offered(&settings)
            .map(Builtin::spec)
            .chain(
                typed
                    .as_ref()
                    .filter(|typed| typed.mode == crate::output::OutputMode::Tool)
                    .map(|typed| typed.tool.clone()),
            )
            .map(|spec| crate::catalog::spec_tokens(counter.as_ref(), &spec))
            .sum();
        let record_by_call = state
            .records
            .iter()
            .enumerate()
            .map(|(index, record)| (record.call_id.clone(), index))
            .collect();
        Self {
            taken_messages: state.turn.len(),
            state: Box::new(state),
            settings,
            catalog,
            counter,
            history_view,
            turn_view,
            system,
            system_tokens,
            tool_tokens,
            builtin_tokens,
            new_records: Vec::new(),
            record_by_call,
            outbox: Vec::new(),
            last_call_cost: None,
            refused_here: Vec::new(),
            typed,
        }
    }

    /// Handles `input`, which happened at `now`, and says what came of it.
    pub fn handle(&mut self, input: Input, now: DateTime<Utc>) -> Handled {
        if let Input::Start = input {
            // A run restored from the checkpoint of its beginning asks its question first, at
            // the time it started, as a new run did when it was made.
            self.ask_question();
        }
        // Never backwards, should the clock that feeds the machine be adjusted.
        self.state.now = now.max(self.state.now);
        match input {
            Input::Start => Handled::Next(self.start()),
            Input::ModelReply { reply, duration_ms } => {
                Handled::Next(self.on_model_reply_after(reply, duration_ms))
            }
            Input::ToolResult(result) => match self.on_tool_result(result) {
                Some(step) => Handled::Next(step),
                None => Handled::BatchRunning,
            },
            Input::Answer(answer) => match self.resume(&answer) {
                Ok(step) => Handled::Next(step),
                Err(refused) => Handled::AnswerRefused(refused),
            },
            Input::Cancel => Handled::Next(self.cancel()),
            Input::Fail { code, message } => Handled::Next(self.fail(code, message)),
            Input::StoreLost { error, announced } => {
                Handled::Next(self.fail_unsaved(&error, announced))
            }
            Input::Resume { reason, instance } => Handled::Next(self.recover(reason, instance)),
            Input::Steer { text } => Handled::Steered(self.steer(text)),
            Input::GuardrailVerdicts(verdicts) => {
                Handled::Next(self.on_guardrail_verdicts(verdicts))
            }
            Input::Sampled(call) => {
                self.account_sampling(call);
                Handled::BatchRunning
            }
        }
    }

    /// The run's state: everything it needs to go on.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    pub fn run_id(&self) -> Uuid {
        self.state.input.run_id
    }

    pub fn input(&self) -> &RunInput {
        &self.state.input
    }

    pub fn iteration(&self) -> u32 {
        self.state.iteration
    }

    /// The tools of this run: the agent's catalog when the run started.
    pub fn catalog(&self) -> &Arc<ToolCatalog> {
        &self.catalog
    }

    /// What the last LLM call fed to the machine cost, when it had a price.
    pub fn last_call_cost(&self) -> Option<f64> {
        self.last_call_cost
    }

    /// The records of the calls that ended without running (refused, duplicates, skipped)
    /// since the last time they were taken: the driver gives each its span.
    pub fn take_refused_calls(&mut self) -> Vec<ToolExecutionRecord> {
        std::mem::take(&mut self.refused_here)
    }

    /// Events produced since the last call, in order.
    pub fn take_events(&mut self) -> Vec<EventKind> {
        std::mem::take(&mut self.outbox)
    }

    /// Messages, records and events produced since the last call, and the run's counters.
    pub fn take_changes(&mut self) -> MachineChanges {
        let messages = self.state.turn[self.taken_messages..].to_vec();
        self.taken_messages = self.state.turn.len();
        MachineChanges {
            messages,
            records: std::mem::take(&mut self.new_records),
            events: std::mem::take(&mut self.outbox),
            progress: self.progress(),
        }
    }

    pub fn progress(&self) -> RunProgress {
        RunProgress {
            iterations: self.state.iteration,
            tools_used: self.state.tools_used,
            usage: self.state.usage,
        }
    }

    /// Tools that failed too often and are no longer offered.
    pub fn withdrawn_tools(&self) -> impl Iterator<Item = &str> {
        self.state.withdrawn.iter().map(String::as_str)
    }

    /// Begins the run (or ends it at once, when it cannot start).
    fn start(&mut self) -> Step {
        if !matches!(self.state.phase, Phase::Created) {
            return self.unexpected("start");
        }
        if let Some(RunFailure { code, message }) = self.state.input.refused.clone() {
            return self.fail(code, message);
        }
        self.emit(EventKind::RunStarted {
            session_id: self.state.input.session_id,
        });
        if let Some(check) = self.check_question() {
            return check;
        }
        self.begin_work()
    }

    /// The work after the question passed its guardrails: the plan, or the first step.
    fn begin_work(&mut self) -> Step {
        if self.settings.planning.enabled {
            return self.begin_planning();
        }
        self.next_iteration()
    }

    /// Feeds the result of the LLM call asked for by the last step (as taking no time).
    #[cfg(test)]
    fn on_model_reply(&mut self, reply: Result<ModelReply, LlmError>) -> Step {
        self.on_model_reply_after(reply, 0)
    }

    /// Feeds the result of the LLM call asked for by the last step, which took `duration_ms`.
    /// A reply is priced and reported (`llm_call`) before anything it leads to.
    fn on_model_reply_after(
        &mut self,
        reply: Result<ModelReply, LlmError>,
        duration_ms: u64,
    ) -> Step {
        self.last_call_cost = None;
        let reply = match reply {
            Ok(reply) => reply,
            Err(error) => return self.fail(error.code(), error.to_string()),
        };
        self.account_call(&reply, duration_ms);
        match &self.state.phase {
            Phase::AwaitingPlan => self.on_plan_reply(reply),
            Phase::AwaitingReview => self.on_review_reply(reply),
            Phase::AwaitingStep => self.on_step_reply(reply),
            Phase::AwaitingFinalize { reason } if self.typed.is_some() => {
                let reason = Some(*reason);
                self.on_typed_answer_reply(reply.text(), reason)
            }
            Phase::AwaitingOutput { reason } => {
                let reason = *reason;
                self.on_typed_answer_reply(reply.text(), reason)
            }
            Phase::AwaitingFinalize { .. } => match reply.text() {
                // The driver streamed this text as the answer, unless it holds it.
                Some(text) => self.deliver(text.to_string(), !self.holds_answer()),
                None => self.deliver(fallback_answer(&self.state.records), false),
            },
            _ => self.unexpected("a model reply"),
        }
    }

    /// Whether the run is paused, waiting for an answer ([`Input::Answer`]).
    pub fn is_paused(&self) -> bool {
        self.state.phase.is_paused()
    }

    /// The question the paused run waits on, if it waits on one (not on approvals).
    pub fn question(&self) -> Option<String> {
        if !self.state.phase.is_paused() || !self.pending_approvals().is_empty() {
            return None;
        }
        self.open_question()
    }

    /// Continues a paused run with a human's answer. An answer that does not fit what the run
    /// waits for is refused (the run stays paused).
    fn resume(&mut self, answer: &InputAnswer) -> Result<Step, InvalidAnswer> {
        if !self.state.phase.is_paused() {
            return Err(InvalidAnswer::NotWaiting);
        }
        if !self.pending_approvals().is_empty() {
            if answer.answer.is_some() {
                return Err(InvalidAnswer::DecisionsExpected);
            }
            return self.decide(answer);
        }
        let Some(question) = self.open_question() else {
            return Err(InvalidAnswer::NotWaiting);
        };
        if !answer.approve.is_empty() || !answer.deny.is_empty() || !answer.results.is_empty() {
            return Err(InvalidAnswer::NoCallWaits { question });
        }
        match answer.answer.as_deref().map(str::trim) {
            Some(text) if !text.is_empty() => Ok(self.answer(text)),
            _ => Err(InvalidAnswer::AnswerExpected { question }),
        }
    }

    /// Pauses the run: `input_required`, then `done` with status `awaiting_input`. The batch
    /// being worked on, if any, waits in the pause.
    fn pause(
        &mut self,
        kind: InputKind,
        question: Option<String>,
        calls: Vec<PendingCall>,
    ) -> Step {
        let batch = self.state.phase.take_batch();
        self.state.phase = Phase::AwaitingInput { batch };
        let request = InputRequest {
            kind,
            question: question.clone(),
            calls: calls.clone(),
            elicitation: None,
        };
        self.emit(EventKind::InputRequired {
            kind,
            question,
            calls,
            elicitation: None,
        });
        self.emit(EventKind::Done {
            status: RunStatus::AwaitingInput,
            iterations: self.state.iteration,
            tools_used: self.state.tools_used,
            message_id: None,
            usage: self.state.usage,
            should_refresh: self.state.should_refresh,
            output: None,
        });
        let mut outcome = self.outcome_with(RunStatus::AwaitingInput, None, None, None);
        outcome.input_required = Some(request);
        Step::Finished(Box::new(outcome))
    }

    fn next_iteration(&mut self) -> Step {
        let at_cap = self.state.iteration >= self.state.input.max_iterations;
        if self.review_due(at_cap) {
            return self.begin_review(at_cap);
        }
        if at_cap {
            return self.force_finalize(FinalizeReason::MaxIterations);
        }
        self.apply_steering();
        if self.over_budget() {
            return self.force_finalize(FinalizeReason::Budget);
        }
        self.state.iteration += 1;
        self.state.phase = Phase::AwaitingStep;
        self.emit(EventKind::Thinking {
            iteration: self.state.iteration,
        });
        Step::CallModel(self.request(ToolChoice::Auto, None))
    }

    fn force_finalize(&mut self, reason: FinalizeReason) -> Step {
        self.apply_steering();
        self.state.phase = Phase::AwaitingFinalize { reason };
        self.emit(EventKind::ForcedFinalize { reason });
        Step::CallModel(self.request(ToolChoice::None, Some(reason)))
    }

    fn on_step_reply(&mut self, mut reply: ModelReply) -> Step {
        let text = reply.text().map(str::to_string);
        if let Some(step) = self.on_final_answer_call(text.clone(), &mut reply.tool_calls) {
            return step;
        }
        let goes_on = self.has_steering() && self.state.iteration < self.state.input.max_iterations;
        if let (true, Some(text)) = (self.holds_answer(), reply.text()) {
            // Held by the driver in case it was the answer: it is not, it is shown now.
            if !reply.tool_calls.is_empty() || goes_on {
                let text = text.to_string();
                self.emit(EventKind::AssistantDelta { text });
            }
        }
        if !reply.tool_calls.is_empty() {
            return self.begin_batch(text, reply.tool_calls);
        }
        match reply.text() {
            // The user wrote while the model answered: the answer stays in the conversation and
            // the run goes on with what the user wrote.
            Some(text) if goes_on => {
                let text = text.to_string();
                self.push_message(
                    MessageKind::Dialogue,
                    ChatMessage::assistant(text),
                    serde_json::Value::Null,
                );
                self.next_iteration()
            }
            Some(text) if self.typed.is_some() => self.on_typed_step_text(text.to_string()),
            Some(text) => self.deliver(text.to_string(), false),
            None => self.force_finalize(FinalizeReason::DegenerateResponse),
        }
    }

    /// Emits the whole answer as one `final_response` chunk and hands it back.
    fn emit_answer(&mut self, answer: String) -> String {
        self.emit(EventKind::FinalResponse {
            delta: answer.clone(),
        });
        answer
    }

    fn emit(&mut self, event: EventKind) {
        self.outbox.push(event);
    }

    /// Adds a message to the run; messages the model may read are prepared for its view now.
    fn push_message(
        &mut self,
        kind: MessageKind,
        message: ChatMessage,
        metadata: serde_json::Value,
    ) -> Uuid {
        let id = self.state.next_id();
        if view::is_viewed(kind) {
            let viewed = view::view_message(
                &self.catalog,
                self.counter.as_ref(),
                &message,
                &self.settings,
                false,
            );
            self.turn_view.push(viewed);
        }
        self.state.turn.push(SessionMessage {
            id,
            session_id: self.state.input.session_id,
            run_id: Some(self.state.input.run_id),
            kind,
            message,
            metadata,
            created_at: self.state.now,
            superseded_by_run: None,
        });
        id
    }

    /// A call that ran (or was answered), for `tools_used`; the review counts the calls of
    /// real tools only (`write_plan` and `ask_user` are bookkeeping, not progress).
    fn count_call(&mut self, reviewed: bool) {
        self.state.tools_used += 1;
        if reviewed {
            self.state.guidance.calls_since_review += 1;
        }
    }
}

#[cfg(test)]
mod tests;
