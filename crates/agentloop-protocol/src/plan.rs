use serde::{Deserialize, Serialize};

/// A run's plan (seed 003): what it is for, and the steps to get there. With the `schema`
/// feature, its JSON Schema is the one a model's plan is checked against.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(
    feature = "schema",
    schemars(extend(
        // A plan that needs clarification must ask something.
        "if" = {
            "required": ["needs_clarification"],
            "properties": {"needs_clarification": {"const": true}}
        },
        "then" = {
            "required": ["clarification_question"],
            "properties": {"clarification_question": {"type": "string", "minLength": 1}}
        }
    ))
)]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub goal: String,
    pub sub_tasks: Vec<SubTask>,
    /// The request is ambiguous: ask `clarification_question` before acting.
    #[serde(default)]
    pub needs_clarification: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clarification_question: Option<String>,
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubTask {
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub id: String,
    #[cfg_attr(feature = "schema", schemars(length(min = 1)))]
    pub description: String,
    #[serde(default = "pending")]
    pub status: SubTaskStatus,
    #[serde(default)]
    pub depends_on: Vec<String>,
}

fn pending() -> SubTaskStatus {
    SubTaskStatus::Pending
}

#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubTaskStatus {
    Pending,
    Done,
    Blocked,
}

impl SubTaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            SubTaskStatus::Pending => "pending",
            SubTaskStatus::Done => "done",
            SubTaskStatus::Blocked => "blocked",
        }
    }
}
