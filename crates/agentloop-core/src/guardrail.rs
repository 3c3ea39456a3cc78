//! Guardrails: checks on what goes into a run (the question, before the first LLM call) and
//! what comes out (the answer, before a client sees it).
//!
//! A guardrail is a [`Guardrail`]: given the text and who the run is for, it allows it or trips
//! with a reason; an error (a webhook down, a verdict that cannot be read) is neither, and its
//! rule's `fail` setting decides. The machine never calls one: it asks the driver for a check
//! (`Step::CheckGuardrails`) and is fed the verdicts with their time
//! (`Input::GuardrailVerdicts`), so a run's input log replays them and a resumed run does not
//! check again what passed. The `regex` kind lives here; `webhook` and `llm` in the facade.

mod patterns;

use std::sync::Arc;

use agentloop_protocol::Usage;
pub use agentloop_protocol::{GuardrailAction, GuardrailSide};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

pub use self::patterns::RegexGuardrail;
use crate::llm::{Llm, LlmError, ModelReply, ModelRequest};

/// How many times an output guardrail with `action = "retry"` sends the model back by default.
pub const DEFAULT_RETRIES: u32 = 2;

/// What a guardrail decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// Refused, and why (told to the model on a retry, and to the user when the run ends
    /// `blocked`: a reason should not quote the refused text).
    Trip {
        reason: String,
    },
}

/// A guardrail that could not decide; its rule's `fail` says whether the text passes.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct GuardrailError {
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl GuardrailError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            source: None,
        }
    }

    pub fn caused_by(mut self, source: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.source = Some(Box::new(source));
        self
    }
}

/// Makes the LLM calls of a guardrail for its run: each gets a chat span under the run's, and
/// its usage is counted in the run's (priced, reported as `llm_call` with purpose
/// `guardrail`). The driver's; a request made by hand calls the model directly.
#[async_trait]
pub trait GuardrailModels: Send + Sync {
    async fn complete(&self, llm: &dyn Llm, request: &ModelRequest)
    -> Result<ModelReply, LlmError>;
}

/// One check: the text, which side of the run it is, and who the run is for.
pub struct GuardrailRequest<'a> {
    pub on: GuardrailSide,
    pub text: &'a str,
    pub run_id: Uuid,
    pub session_id: Uuid,
    pub user_id: Option<&'a str>,
    models: Option<&'a dyn GuardrailModels>,
}

impl<'a> GuardrailRequest<'a> {
    pub fn new(on: GuardrailSide, text: &'a str, run_id: Uuid, session_id: Uuid) -> Self {
        Self {
            on,
            text,
            run_id,
            session_id,
            user_id: None,
            models: None,
        }
    }

    pub fn user(mut self, user_id: Option<&'a str>) -> Self {
        self.user_id = user_id;
        self
    }

    /// LLM calls go through `models` (the run's: traced and counted).
    pub fn models(mut self, models: &'a dyn GuardrailModels) -> Self {
        self.models = Some(models);
        self
    }

    /// Asks `llm` for the guardrail: through the run, when the request has one (see
    /// [`GuardrailModels`]).
    pub async fn call_model(
        &self,
        llm: &dyn Llm,
        request: &ModelRequest,
    ) -> Result<ModelReply, LlmError> {
        match self.models {
            Some(models) => models.complete(llm, request).await,
            None => llm.complete(request, &mut |_: &str| {}).await,
        }
    }
}

/// A check on a run's question or answer. Called on the run's task; a slow one holds the run
/// (give it its own time limit).
#[async_trait]
pub trait Guardrail: Send + Sync {
    async fn check(&self, request: &GuardrailRequest<'_>) -> Result<Decision, GuardrailError>;
}

/// Whether a guardrail that could not decide lets the text through (`open`) or not
/// (`closed`: a trip that ends the run `blocked`, as a retry would meet the same error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailMode {
    Open,
    #[default]
    Closed,
}

/// How the answer reaches clients when output guardrails check it (`[agent] guardrail_mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailMode {
    /// The answer's text is held until every output guardrail passed it.
    #[default]
    Hold,
    /// The text streams as it comes; a tripped guardrail retracts it (`answer_retracted`).
    After,
}

/// When and how a guardrail runs (`[[guardrails]]`, without its kind's own keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardrailRule {
    pub name: String,
    pub on: GuardrailSide,
    pub action: GuardrailAction,
    /// With `action = "retry"`: answers the model may write again before the run is blocked.
    pub retries: u32,
    pub fail: FailMode,
}

impl GuardrailRule {
    pub fn new(name: impl Into<String>, on: GuardrailSide) -> Self {
        Self {
            name: name.into(),
            on,
            action: GuardrailAction::Block,
            retries: DEFAULT_RETRIES,
            fail: FailMode::Closed,
        }
    }

    pub fn action(mut self, action: GuardrailAction) -> Self {
        self.action = action;
        self
    }

    pub fn retries(mut self, retries: u32) -> Self {
        self.retries = retries;
        self
    }

    pub fn fail(mut self, fail: FailMode) -> Self {
        self.fail = fail;
        self
    }
}

/// An agent's guardrails, in the order they are configured (the first that trips decides).
#[derive(Clone, Default)]
pub struct Guardrails {
    list: Vec<(GuardrailRule, Arc<dyn Guardrail>)>,
}

impl Guardrails {
    pub fn push(&mut self, rule: GuardrailRule, guardrail: Arc<dyn Guardrail>) {
        self.list.push((rule, guardrail));
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    pub fn rules(&self) -> impl Iterator<Item = &GuardrailRule> {
        self.list.iter().map(|(rule, _)| rule)
    }

    /// The rules that check `on`.
    pub fn on(&self, on: GuardrailSide) -> impl Iterator<Item = &GuardrailRule> {
        self.rules().filter(move |rule| rule.on == on)
    }

    pub fn rule(&self, name: &str) -> Option<&GuardrailRule> {
        self.rules().find(|rule| rule.name == name)
    }

    pub fn get(&self, name: &str) -> Option<&Arc<dyn Guardrail>> {
        self.list
            .iter()
            .find(|(rule, _)| rule.name == name)
            .map(|(_, guardrail)| guardrail)
    }
}

impl std::fmt::Debug for Guardrails {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_list().entries(self.rules()).finish()
    }
}

/// Two sets are the same when their rules are (the checks themselves cannot be compared).
impl PartialEq for Guardrails {
    fn eq(&self, other: &Self) -> bool {
        self.rules().eq(other.rules())
    }
}

/// What the machine asks the driver to check: `text`, by the guardrails `names`.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailCheck {
    pub on: GuardrailSide,
    pub text: String,
    pub names: Vec<String>,
}

/// What came of one guardrail's check, fed to the machine.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailVerdict {
    pub name: String,
    pub outcome: GuardrailOutcome,
    pub duration_ms: u64,
    /// The LLM calls it made (`llm` guardrails), counted in the run's usage.
    pub llm_calls: Vec<GuardrailLlmCall>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum GuardrailOutcome {
    Allowed,
    Tripped {
        reason: String,
    },
    /// The guardrail could not decide (its `fail` setting decides).
    Failed {
        error: String,
    },
}

impl GuardrailOutcome {
    /// For metrics: `allowed`, `tripped` or `error`.
    pub fn as_str(&self) -> &'static str {
        match self {
            GuardrailOutcome::Allowed => "allowed",
            GuardrailOutcome::Tripped { .. } => "tripped",
            GuardrailOutcome::Failed { .. } => "error",
        }
    }
}

/// One LLM call a guardrail made.
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailLlmCall {
    pub model: Option<String>,
    pub usage: Usage,
    pub duration_ms: u64,
}

/// What a run reports of one guardrail's check (Prometheus counters).
#[derive(Debug, Clone, PartialEq)]
pub struct GuardrailReport<'a> {
    pub run_id: Uuid,
    pub name: &'a str,
    pub on: GuardrailSide,
    pub outcome: &'a GuardrailOutcome,
    pub duration_ms: u64,
}
