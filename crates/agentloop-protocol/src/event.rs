use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::{ErrorCode, Plan, ToolStatus};

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
    DuplicateDetected {
        call_id: String,
        tool: String,
        arguments: Value,
    },
    ForcedFinalize {
        reason: FinalizeReason,
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
    },
    /// A chunk of the final answer; the chunks of a run, in order, are the whole answer.
    FinalResponse {
        delta: String,
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
    },
    Error {
        code: ErrorCode,
        message: String,
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
            EventKind::DuplicateDetected { .. } => "duplicate_detected",
            EventKind::ForcedFinalize { .. } => "forced_finalize",
            EventKind::RunResumed { .. } => "run_resumed",
            EventKind::UserMessage { .. } => "user_message",
            EventKind::PlanUpdated { .. } => "plan_updated",
            EventKind::InputRequired { .. } => "input_required",
            EventKind::FinalResponse { .. } => "final_response",
            EventKind::Done { .. } => "done",
            EventKind::Error { .. } => "error",
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
}

impl FinalizeReason {
    pub fn as_str(self) -> &'static str {
        match self {
            FinalizeReason::MaxIterations => "max_iterations",
            FinalizeReason::DegenerateResponse => "degenerate_response",
            FinalizeReason::DuplicateCalls => "duplicate_calls",
            FinalizeReason::ConsecutiveFailures => "consecutive_failures",
            FinalizeReason::ReviewStop => "review_stop",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            FinalizeReason::MaxIterations,
            FinalizeReason::DegenerateResponse,
            FinalizeReason::DuplicateCalls,
            FinalizeReason::ConsecutiveFailures,
            FinalizeReason::ReviewStop,
        ]
        .into_iter()
        .find(|reason| reason.as_str() == text)
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
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Completed => "completed",
            RunStatus::Failed => "failed",
            RunStatus::Cancelled => "cancelled",
            RunStatus::AwaitingInput => "awaiting_input",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [
            RunStatus::Running,
            RunStatus::Completed,
            RunStatus::Failed,
            RunStatus::Cancelled,
            RunStatus::AwaitingInput,
        ]
        .into_iter()
        .find(|status| status.as_str() == text)
    }

    /// The run will not change any more.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            RunStatus::Completed | RunStatus::Failed | RunStatus::Cancelled
        )
    }
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InputKind {
    Clarification,
    Approval,
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

/// Tokens spent on LLM calls.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
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
}

// Zero counts are left out so that data written before these fields existed, and usage of
// providers without caches, look as they always did.
fn is_zero(count: &u64) -> bool {
    *count == 0
}

impl Usage {
    pub fn add(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cache_read_tokens += other.cache_read_tokens;
        self.cache_creation_tokens += other.cache_creation_tokens;
        self.reasoning_tokens += other.reasoning_tokens;
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
            },
        ];
        for kind in kinds {
            let value = serde_json::to_value(&kind).unwrap();
            assert_eq!(value["type"], kind.type_name());
        }
    }
}
