use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{
    Elicitation, ElicitationAnswer, ErrorCode, GuardrailAction, GuardrailSide, Plan, ToolStatus,
};

/// One event of a run: the single source for the SSE stream, `agentloop run --json`, the store's
/// event log and the web panel. Serialises as `{"type", "run_id", "seq", ...fields}`.
///
/// A sub-agent's events appear in the stream of the run that called it: their `run_id` is the
/// sub-agent's run, `parent_run_id` the caller's, and `seq` their place in the caller's stream.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub run_id: Uuid,
    /// Position of the event in the stream of its (top-level) run, from 1, without gaps.
    pub seq: u64,
    /// Set on the events of a sub-agent: the run that called it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent_run_id: Option<Uuid>,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened. The variant names are the `type` of DESIGN §6.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EventKind {
    RunStarted {
        session_id: Uuid,
    },
    /// The model is being asked for its next step.
    Thinking {
        iteration: u32,
    },
    /// Text the model writes while it works, live, as it streams in.
    AssistantDelta {
        text: String,
    },
    ToolSelected {
        iteration: u32,
        call_id: String,
        tool: String,
        arguments: Value,
    },
    ToolExecuted {
        call_id: String,
        tool: String,
        status: ToolStatus,
        duration_ms: u64,
        /// The result as the model saw it (bounded).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<String>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    SideEffect {
        call_id: String,
        tool: String,
        note: String,
    },
    /// How far a running call has come, as its tool reported it (MCP
    /// `notifications/progress`): live, before the call's `tool_executed`. `progress` grows
    /// with each report; `total` when the tool knows it.
    ToolProgress {
        call_id: String,
        tool: String,
        progress: f64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total: Option<f64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        message: Option<String>,
    },
    DuplicateDetected {
        call_id: String,
        tool: String,
        arguments: Value,
    },
    ForcedFinalize {
        reason: FinalizeReason,
    },
    /// One LLM call of the run ended with a reply: what it was for, how long it took, what it
    /// spent. `cost_usd` is null when the model has no price (`[prices."MODEL"]`).
    LlmCall {
        iteration: u32,
        purpose: LlmCallPurpose,
        /// The model that answered (as the provider named it), else the one asked for.
        #[serde(default)]
        model: Option<String>,
        duration_ms: u64,
        prompt_tokens: u64,
        completion_tokens: u64,
        /// Of `prompt_tokens`, those read from the provider's prompt cache.
        cached_tokens: u64,
        #[serde(default)]
        cost_usd: Option<f64>,
    },
    /// A message the user sent while the run worked, added to the conversation before the next
    /// LLM call (steering).
    UserMessage {
        text: String,
    },
    /// The run goes on after the process that ran it stopped: from its last saved step, in
    /// `instance` (the seam between the two parts of its stream).
    RunResumed {
        reason: ResumeReason,
        instance: String,
    },
    /// The run's plan was made or changed (planning phase, `write_plan`, a reviewer's replan).
    PlanUpdated {
        plan: Plan,
    },
    InputRequired {
        kind: InputKind,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        question: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        calls: Vec<PendingCall>,
        /// Kind `elicitation`: what a running tool call asks (the run does not pause; the call
        /// waits for `POST /v1/runs/{id}/input` with `elicitation`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        elicitation: Option<Box<Elicitation>>,
    },
    /// A chunk of the final answer; the chunks of a run, in order, are the whole answer.
    FinalResponse {
        delta: String,
    },
    /// The typed answer as it stands while the model writes it (runs with an output schema):
    /// the JSON written so far, closed where it was cut. Not validated; `done.output` is.
    OutputDelta {
        partial: Value,
    },
    Done {
        status: RunStatus,
        iterations: u32,
        /// Number of tool calls that actually ran (successfully or not).
        tools_used: u32,
        #[serde(default)]
        message_id: Option<Uuid>,
        usage: Usage,
        should_refresh: bool,
        /// The typed answer (runs with an output schema), valid against the schema.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        output: Option<Value>,
    },
    Error {
        code: ErrorCode,
        message: String,
    },
    /// A guardrail checked the question (`on: input`) or the answer (`on: output`). `allowed`
    /// is false when it tripped (`guardrail_tripped` follows); `error` says why a guardrail
    /// that could not decide was let through or not (its `fail` setting).
    GuardrailChecked {
        name: String,
        on: GuardrailSide,
        allowed: bool,
        duration_ms: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<String>,
    },
    /// A guardrail refused the question or the answer: the run ends `blocked`
    /// (`action: block`), or the model is told `reason` and answers again (`action: retry`).
    GuardrailTripped {
        name: String,
        on: GuardrailSide,
        reason: String,
        action: GuardrailAction,
    },
    /// With `guardrail_mode = "after"`: the answer text streamed since the last `thinking` or
    /// `forced_finalize` event was refused by the guardrail `name`; a client removes it.
    AnswerRetracted {
        name: String,
    },
}

impl EventKind {
    /// The `type` of the event, as written on the wire.
    pub fn type_name(&self) -> &'static str {
        match self {
            EventKind::RunStarted { .. } => "run_started",
            EventKind::Thinking { .. } => "thinking",
            EventKind::AssistantDelta { .. } => "assistant_delta",
            EventKind::ToolSelected { .. } => "tool_selected",
            EventKind::ToolExecuted { .. } => "tool_executed",
            EventKind::SideEffect { .. } => "side_effect",
            EventKind::ToolProgress { .. } => "tool_progress",
            EventKind::DuplicateDetected { .. } => "duplicate_detected",
            EventKind::ForcedFinalize { .. } => "forced_finalize",
            EventKind::LlmCall { .. } => "llm_call",
            EventKind::RunResumed { .. } => "run_resumed",
            EventKind::UserMessage { .. } => "user_message",
            EventKind::PlanUpdated { .. } => "plan_updated",
            EventKind::InputRequired { .. } => "input_required",
            EventKind::FinalResponse { .. } => "final_response",
            EventKind::OutputDelta { .. } => "output_delta",
            EventKind::Done { .. } => "done",
            EventKind::Error { .. } => "error",
            EventKind::GuardrailChecked { .. } => "guardrail_checked",
            EventKind::GuardrailTripped { .. } => "guardrail_tripped",
            EventKind::AnswerRetracted { .. } => "answer_retracted",
        }
    }
}

/// Why the loop stopped calling tools and asked the model for a summary.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinalizeReason {
    MaxIterations,
    DegenerateResponse,
    DuplicateCalls,
    ConsecutiveFailures,
    /// The reviewer stopped the work.
    ReviewStop,
    /// The next call would have gone over the run's budget (`[agent.budget]`, the request's
    /// `budget`).
    Budget,
}

impl FinalizeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalizeReason::MaxIterations => "max_iterations",
            FinalizeReason::DegenerateResponse => "degenerate_response",
            FinalizeReason::DuplicateCalls => "duplicate_calls",
            FinalizeReason::ConsecutiveFailures => "consecutive_failures",
            FinalizeReason::ReviewStop => "review_stop",
            FinalizeReason::Budget => "budget",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            FinalizeReason::MaxIterations,
            FinalizeReason::DegenerateResponse,
            FinalizeReason::DuplicateCalls,
            FinalizeReason::ConsecutiveFailures,
            FinalizeReason::ReviewStop,
            FinalizeReason::Budget,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == text)
    }
}

/// What an LLM call was for (`llm_call.purpose`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LlmCallPurpose {
    /// An iteration of the loop: tool calls or the answer.
    Step,
    /// The planning call (`[agent.planning]`).
    Plan,
    /// A reviewer's verdict (`[agent.review]`).
    Review,
    /// The forced summary.
    Summary,
    /// An `llm` guardrail's verdict.
    Guardrail,
    /// An MCP server's `sampling/createMessage`, answered by the run's model.
    Sampling,
}

impl LlmCallPurpose {
    pub fn as_str(self) -> &'static str {
        match self {
            LlmCallPurpose::Step => "step",
            LlmCallPurpose::Plan => "plan",
            LlmCallPurpose::Review => "review",
            LlmCallPurpose::Summary => "summary",
            LlmCallPurpose::Guardrail => "guardrail",
            LlmCallPurpose::Sampling => "sampling",
        }
    }
}

/// Why a run goes on in another process than the one that started it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ResumeReason {
    /// Another instance took it over: its owner stopped showing signs of life, or handed it
    /// over while shutting down.
    Adopted,
    /// The program was started again (the same store, a single instance, or
    /// `agentloop resume`).
    Restarted,
}

impl ResumeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            ResumeReason::Adopted => "adopted",
            ResumeReason::Restarted => "restarted",
        }
    }
}

/// How a run ended (or paused).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Running,
    Completed,
    Failed,
    Cancelled,
    AwaitingInput,
    /// A guardrail refused the question or the answer (`guardrail_tripped`).
    Blocked,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::AwaitingInput => "awaiting_input",
            RunStatus::Blocked => "blocked",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            RunStatus::Running,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::AwaitingInput,
            RunStatus::Blocked,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }

    /// The run will not change any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled | RunStatus::Blocked
        )
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    Clarification,
    Approval,
    /// A running tool call's question (MCP elicitation): the event's `elicitation`.
    Elicitation,
}

/// What a paused run waits for: the fields of its `input_required` event.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRequest {
    pub kind: InputKind,
    /// The question to answer (`clarification`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// The calls to approve or deny (`approval`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<PendingCall>,
    /// The question of a running call (`elicitation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<Box<Elicitation>>,
}

/// A human's answer to a paused run: decisions on the calls waiting for approval, or the answer
/// to its question. The body of `POST /v1/runs/{id}/input` (with its `stream`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InputAnswer {
    /// The answer to the run's clarification question (`input_required.question`).
    #[serde(default)]
    pub answer: Option<String>,
    /// Ids of the calls allowed to run (`input_required.calls[].call_id`).
    #[serde(default)]
    pub approve: Vec<String>,
    /// Ids of the calls that must not run; the model is told they were denied.
    #[serde(default)]
    pub deny: Vec<String>,
    /// The results of calls of client tools (`PendingCall.client`), by call id: what the
    /// client's own code answered, given to the model as the tool's output.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub results: BTreeMap<String, String>,
    /// The answer to a running call's question (`input_required` with kind `elicitation`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<ElicitationAnswer>,
}

/// A tool call waiting for a human decision.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PendingCall {
    pub call_id: String,
    pub tool: String,
    pub arguments: Value,
    /// A call of a client tool (one the run's client declared and runs itself, such as an
    /// AG-UI frontend tool): it is answered with its result (`InputAnswer.results`), not
    /// approved.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client: bool,
}

/// Tokens spent on LLM calls, and what they cost.
///
/// The cost comes from the price table (`[prices."MODEL"]`): `cost_usd` is the sum of the calls
/// that had a price (and of costs tools reported), `cost_complete` says whether every LLM call
/// had one. A run none of whose calls had a price has `cost_usd: null` (unknown), and
/// `cost_complete: false`; a run some of whose calls had one has the cost of those, only a
/// lower bound with `cost_complete: false`, never to be read as the cost. The usage a provider
/// reports for one call has no cost yet (`null`, `false`): the loop prices it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token of the calls, cached or not (Anthropic's uncached `input_tokens` plus
    /// its cache reads and writes), so the number means the same for every provider.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Of `prompt_tokens`, those read from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `cached_tokens`); billed at a fraction of the price.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_tokens: u64,
    /// Of `prompt_tokens`, those written to Anthropic's prompt cache
    /// (`cache_creation_input_tokens`); billed above the normal input price.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_tokens: u64,
    /// Of `completion_tokens`, those a reasoning model spent thinking (OpenAI
    /// `reasoning_tokens`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub reasoning_tokens: u64,
    /// USD, from the price table.
    #[serde(default)]
    pub cost_usd: Option<f64>,
    /// Every call counted had a price: `cost_usd` is the whole cost, not a lower bound.
    #[serde(default)]
    pub cost_complete: bool,
}

// Zero counts are left out so that data written before these fields existed, and usage of
// providers without caches, look as they always did.
fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Usage {
    /// The usage of a run that has not called a model yet: nothing spent, and all of it known.
    pub fn nothing_spent() -> Self {
        Self {
            cost_usd: Some(0.0),
            cost_complete: true,
            ..Self::default()
        }
    }

    /// Adds `other`'s tokens and cost: the costs known add up, and the sum is complete only
    /// when both were.
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
        self.cost_usd = match (self.cost_usd, other.cost_usd) {
            (Some(mine), Some(theirs)) => Some(mine + theirs),
            (mine, theirs) => mine.or(theirs),
        };
        self.cost_complete = self.cost_complete && other.cost_complete;
        self.forget_unknown_nothing();
    }

    /// Adds a cost that is not an LLM call's (a tool that reports what it spent).
    pub fn add_cost(&mut self, cost_usd: f64) {
        self.cost_usd = Some(self.cost_usd.unwrap_or(0.0) + cost_usd);
        self.forget_unknown_nothing();
    }

    /// A cost not complete of which nothing is known is unknown (`null`), not `0.0`: a lower
    /// bound of nothing would read as free.
    fn forget_unknown_nothing(&mut self) {
        if !self.cost_complete && self.cost_usd == Some(0.0) {
            self.cost_usd = None;
        }
    }

    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn events_serialise_flat_with_type_run_id_and_seq() {
        let run_id = Uuid::nil();
        let event = Event {
            run_id,
            seq: 7,
            parent_run_id: None,
            kind: EventKind::ForcedFinalize {
                reason: FinalizeReason::DuplicateCalls,
            },
        };
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(
            value,
            json!({"type": "forced_finalize", "run_id": run_id, "seq": 7, "reason": "duplicate_calls"})
        );
        let back: Event = serde_json::from_value(value).unwrap();
        assert_eq!(back, event);
    }

    #[test]
    fn llm_call_serialises_with_its_purpose_tokens_and_cost() {
        let event = Event {
            run_id: Uuid::nil(),
            seq: 3,
            parent_run_id: None,
            kind: EventKind::LlmCall {
                iteration: 2,
                purpose: LlmCallPurpose::Summary,
                model: Some("gpt-4o-mini".into()),
                duration_ms: 1200,
                prompt_tokens: 1000,
                completion_tokens: 50,
                cached_tokens: 400,
                cost_usd: Some(0.000_15),
            },
        };
        let value = serde_json::to_value(&event).unwrap();
        assert_eq!(
            value,
            json!({
                "type": "llm_call", "run_id": Uuid::nil(), "seq": 3, "iteration": 2,
                "purpose": "summary", "model": "gpt-4o-mini", "duration_ms": 1200,
                "prompt_tokens": 1000, "completion_tokens": 50, "cached_tokens": 400,
                "cost_usd": 0.000_15
            })
        );
        assert_eq!(serde_json::from_value::<Event>(value).unwrap(), event);
        assert_eq!(event.kind.type_name(), "llm_call");
    }

    #[test]
    fn an_unpriced_call_has_a_null_cost_and_usage_adds_up_to_incomplete() {
        let kind = EventKind::LlmCall {
            iteration: 1,
            purpose: LlmCallPurpose::Step,
            model: Some("mystery".into()),
            duration_ms: 5,
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: 0,
            cost_usd: None,
        };
        assert_eq!(
            serde_json::to_value(&kind).unwrap()["cost_usd"],
            json!(null)
        );

        let mut run = Usage::nothing_spent();
        run.add(Usage {
            prompt_tokens: 10,
            cost_usd: Some(0.5),
            cost_complete: true,
            ..Usage::default()
        });
        assert_eq!((run.cost_usd, run.cost_complete), (Some(0.5), true));
        run.add(Usage {
            prompt_tokens: 10,
            ..Usage::default()
        });
        assert_eq!((run.cost_usd, run.cost_complete), (Some(0.5), false));
        assert_eq!(run.prompt_tokens, 20);
        let value = serde_json::to_value(run).unwrap();
        assert_eq!(value["cost_usd"], json!(0.5));
        assert_eq!(value["cost_complete"], json!(false));
    }

    #[test]
    fn a_run_whose_calls_had_no_price_has_an_unknown_cost_not_zero() {
        let unpriced = Usage {
            prompt_tokens: 10,
            ..Usage::default()
        };
        let mut run = Usage::nothing_spent();
        assert_eq!((run.cost_usd, run.cost_complete), (Some(0.0), true));
        run.add(unpriced);
        assert_eq!((run.cost_usd, run.cost_complete), (None, false));
        assert_eq!(serde_json::to_value(run).unwrap()["cost_usd"], json!(null));
        run.add(unpriced);
        assert_eq!(run.cost_usd, None, "still unknown");
        run.add(Usage {
            cost_usd: Some(0.25),
            cost_complete: true,
            ..Usage::default()
        });
        assert_eq!(
            (run.cost_usd, run.cost_complete),
            (Some(0.25), false),
            "the known part, a lower bound"
        );
        let mut tool_paid = Usage::nothing_spent();
        tool_paid.add(unpriced);
        tool_paid.add_cost(0.1);
        assert_eq!(
            (tool_paid.cost_usd, tool_paid.cost_complete),
            (Some(0.1), false)
        );
    }

    #[test]
    fn budget_is_a_finalize_reason() {
        let reason = FinalizeReason::parse("budget").unwrap();
        assert_eq!(reason, FinalizeReason::Budget);
        assert_eq!(serde_json::to_value(reason).unwrap(), json!("budget"));
    }

    #[test]
    fn type_name_matches_the_serialised_tag() {
        let kinds = [
            EventKind::Thinking { iteration: 1 },
            EventKind::FinalResponse { delta: "x".into() },
            EventKind::Done {
                status: RunStatus::AwaitingInput,
                iterations: 1,
                tools_used: 0,
                message_id: None,
                usage: Usage::default(),
                should_refresh: false,
                output: None,
            },
        ];
        for kind in kinds {
            let value = serde_json::to_value(&kind).unwrap();
            assert_eq!(value["type"], kind.type_name());
        }
    }
}
