//! Tools the loop itself answers: `write_plan` (offered with planning) changes the run's plan,
//! `ask_user` (offered with `agent.ask_user`) pauses the run with a question. They go through
//! the same checks, records and events as every other call, but never reach the driver.

use std::sync::{Arc, LazyLock};

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{planning::write_plan_schema, schemas};
use crate::{catalog::SchemaViolations, llm::ToolSpec, settings::AgentSettings};

/// The arguments of `ask_user`: its JSON Schema is derived from this type.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AskUserArgs {
    /// One short, specific question for the user.
    #[schemars(length(min = 1))]
    pub question: String,
}

/// Arguments of the built-in `ask_user` tool.
pub(crate) fn ask_user_schema() -> Value {
    crate::tool::schema_for::<AskUserArgs>()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Builtin {
    WritePlan,
    AskUser,
}

struct Definition {
    spec: Arc<ToolSpec>,
    validator: schemas::Compiled,
}

fn define(name: &str, description: &str, schema: Value) -> Definition {
    Definition {
        validator: schemas::compile(&schema),
        spec: Arc::new(ToolSpec {
            name: name.to_string(),
            description: description.to_string(),
            parameters: Arc::new(schema),
        }),
    }
}

static WRITE_PLAN: LazyLock<Definition> = LazyLock::new(|| {
    define(
        "write_plan",
        "Update the plan of this request as you make progress: mark sub-tasks done or blocked, \
         add sub-tasks you discovered (a new id with a description), or change the goal. Only the \
         sub-tasks you name change.",
        write_plan_schema(),
    )
});

static ASK_USER: LazyLock<Definition> = LazyLock::new(|| {
    define(
        "ask_user",
        "Ask the user one short question when the request is ambiguous in a way that changes \
         what to do (which person, which project, which period) and the conversation does not \
         settle it. The run pauses until the user answers; the answer is this tool's result.",
        ask_user_schema(),
    )
});

impl Builtin {
    const ALL: [Builtin; 2] = [Builtin::WritePlan, Builtin::AskUser];

    fn definition(self) -> &'static Definition {
        match self {
            Builtin::WritePlan => &WRITE_PLAN,
            Builtin::AskUser => &ASK_USER,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Builtin::WritePlan => "write_plan",
            Builtin::AskUser => "ask_user",
        }
    }

    pub fn spec(self) -> Arc<ToolSpec> {
        self.definition().spec.clone()
    }

    /// Whether runs under `settings` are offered this tool.
    pub fn offered(self, settings: &AgentSettings) -> bool {
        match self {
            Builtin::WritePlan => settings.planning.enabled,
            Builtin::AskUser => settings.ask_user,
        }
    }

    /// The built-in tools runs under `settings` are offered.
    pub fn all_offered(settings: &AgentSettings) -> impl Iterator<Item = Builtin> + '_ {
        Self::ALL
            .into_iter()
            .filter(move |builtin| builtin.offered(settings))
    }

    /// Whether `name` is a built-in tool's, offered or not (a client tool may not take it).
    pub fn is_builtin_name(name: &str) -> bool {
        Self::ALL.iter().any(|builtin| builtin.name() == name)
    }

    /// The offered built-in the model called by `name`.
    pub fn find(name: &str, settings: &AgentSettings) -> Option<Builtin> {
        Self::all_offered(settings).find(|builtin| builtin.name() == name)
    }

    pub fn validate(self, arguments: &Value) -> Result<(), SchemaViolations> {
        schemas::check(&self.definition().validator, arguments)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn builtins_are_offered_by_their_settings() {
        let mut settings = AgentSettings::default();
        assert_eq!(Builtin::all_offered(&settings).count(), 0);
        settings.ask_user = true;
        assert_eq!(Builtin::find("ask_user", &settings), Some(Builtin::AskUser));
        assert_eq!(Builtin::find("write_plan", &settings), None);
        settings.planning.enabled = true;
        assert_eq!(
            Builtin::find("write_plan", &settings),
            Some(Builtin::WritePlan)
        );
    }

    #[test]
    fn arguments_are_checked_against_their_schema() {
        assert!(
            Builtin::AskUser
                .validate(&json!({"question": "Which Alex?"}))
                .is_ok()
        );
        assert!(Builtin::AskUser.validate(&json!({"question": ""})).is_err());
        assert!(
            Builtin::WritePlan
                .validate(&json!({"sub_tasks": [{"id": "1", "status": "done"}]}))
                .is_ok()
        );
        assert!(
            Builtin::WritePlan
                .validate(&json!({"sub_tasks": [{"id": "1", "status": "finished"}]}))
                .is_err()
        );
    }
}
