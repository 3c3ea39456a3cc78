//! Questions an MCP server asks the user while one of its tools runs (MCP elicitation), and
//! the user's answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A question a tool call asks while it runs: the `elicitation` of an `input_required` event
/// with kind `elicitation`. The call waits for the answer (`InputAnswer.elicitation`); the run
/// goes on meanwhile and does not pause.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Elicitation {
    /// Names the question in its run: `{call_id}/{n}`.
    pub id: String,
    /// The call that asks (`tool_selected.call_id`).
    pub call_id: String,
    /// The tool that asks (`server.tool`).
    pub tool: String,
    /// The MCP server that asks.
    pub server: String,
    pub mode: ElicitationMode,
    /// What the server asks, to show the user.
    pub message: String,
    /// `form`: the JSON Schema of the answer's `content` (an object of flat properties:
    /// string, number, integer, boolean, enum).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    /// `url`: where the user goes to answer (out of band); the answer is only `accept`
    /// (the user went), `decline` or `cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// What answering means: the server's own question, or agentloop asking whether the
    /// server may use the run's model (`sampling = "approve"`).
    #[serde(default, skip_serializing_if = "ElicitationPurpose::is_question")]
    pub purpose: ElicitationPurpose,
}

/// How the user answers an elicitation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationMode {
    /// Fill in a form built from `requested_schema`.
    Form,
    /// Open `url` and finish there.
    Url,
}

/// Why agentloop shows the question.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationPurpose {
    /// The server asks the user (MCP `elicitation/create`).
    #[default]
    Question,
    /// The server asks to use the run's model (MCP `sampling/createMessage` with
    /// `sampling = "approve"`): `accept` lets it, `decline` or `cancel` refuse.
    Sampling,
}

impl ElicitationPurpose {
    pub fn is_question(&self) -> bool {
        *self == ElicitationPurpose::Question
    }
}

/// What the user does with an elicitation.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationAction {
    /// Answers (form: with `content`, valid against `requested_schema`).
    Accept,
    /// Says no.
    Decline,
    /// Dismisses the question without deciding.
    Cancel,
}

impl ElicitationAction {
    pub fn as_str(self) -> &'static str {
        match self {
            ElicitationAction::Accept => "accept",
            ElicitationAction::Decline => "decline",
            ElicitationAction::Cancel => "cancel",
        }
    }
}

/// The user's answer to an elicitation (`POST /v1/runs/{id}/input` with `elicitation`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ElicitationAnswer {
    /// The question answered (`elicitation.id`); may be left out when the run has only one
    /// open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    pub action: ElicitationAction,
    /// With `accept` on a form: the answer, an object valid against `requested_schema`
    /// (defaults of the schema fill what it leaves out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Value>,
}

impl ElicitationAnswer {
    pub fn decline() -> Self {
        Self {
            id: None,
            action: ElicitationAction::Decline,
            content: None,
        }
    }
}
