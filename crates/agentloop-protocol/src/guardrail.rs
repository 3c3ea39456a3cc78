//! The words of guardrails on the wire: which side of a run a guardrail checks, and what a
//! tripped one does (`guardrail_checked`, `guardrail_tripped`).

use serde::{Deserialize, Serialize};

/// What a guardrail checks: the question before the first LLM call, or the answer before it
/// is shown.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailSide {
    #[default]
    Input,
    Output,
}

impl GuardrailSide {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardrailSide::Input => "input",
            GuardrailSide::Output => "output",
        }
    }
}

/// What a tripped guardrail does: end the run `blocked`, or (output guardrails) give the model
/// the reason and let it answer again.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailAction {
    #[default]
    Block,
    Retry,
}

impl GuardrailAction {
    pub fn as_str(self) -> &'static str {
        match self {
            GuardrailAction::Block => "block",
            GuardrailAction::Retry => "retry",
        }
    }
}
