//! The JSON Schemas of what the loop asks the model for in JSON (a plan, a review verdict) and
//! of its built-in tools' arguments: each derived from the Rust type that reads it
//! ([`schema_for`]), compiled once.

use std::sync::LazyLock;

use agentloop_protocol::Plan;
use serde_json::Value;

use super::{builtins::AskUserArgs, planning::PlanUpdate, review::Verdict};
use crate::{
    catalog::{SchemaViolations, check_schema},
    tool::schema_for,
};

/// A plan: `{goal, sub_tasks: [{id, description, status, depends_on}], needs_clarification,
/// clarification_question}`; one that needs clarification must ask something.
pub(crate) fn plan_schema() -> Value {
    schema_for::<Plan>()
}

/// A reviewer's verdict: `{action: continue|replan|ask_user|stop, reason, plan, question}`,
/// each action with its field.
fn review_schema() -> Value {
    schema_for::<Verdict>()
}

/// Arguments of the built-in `write_plan` tool.
pub(crate) fn write_plan_schema() -> Value {
    schema_for::<PlanUpdate>()
}

/// Arguments of the built-in `ask_user` tool.
pub(crate) fn ask_user_schema() -> Value {
    schema_for::<AskUserArgs>()
}

/// The schemas the loop validates against.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Schema {
    Plan,
    Review,
}

/// A schema of the loop, compiled once. One that does not compile fails every check, saying so.
pub(crate) type Compiled = Result<jsonschema::Validator, SchemaViolations>;

pub(crate) fn compile(schema: &Value) -> Compiled {
    jsonschema::validator_for(schema).map_err(|error| {
        SchemaViolations(vec![format!(
            "internal error: the schema does not compile: {error}"
        )])
    })
}

/// Checks `value` against a compiled schema.
pub(crate) fn check(compiled: &Compiled, value: &Value) -> Result<(), SchemaViolations> {
    let validator = compiled.as_ref().map_err(Clone::clone)?;
    check_schema(validator, value)
}

static PLAN: LazyLock<Compiled> = LazyLock::new(|| compile(&plan_schema()));
static REVIEW: LazyLock<Compiled> = LazyLock::new(|| compile(&review_schema()));

/// Checks `value`; the error lists every problem with where it was found.
pub(crate) fn validate(schema: Schema, value: &Value) -> Result<(), SchemaViolations> {
    match schema {
        Schema::Plan => check(&PLAN, value),
        Schema::Review => check(&REVIEW, value),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_schema_compiles() {
        for schema in [
            plan_schema(),
            review_schema(),
            write_plan_schema(),
            ask_user_schema(),
        ] {
            jsonschema::validator_for(&schema).unwrap();
            // Self-contained, so that a model needs nothing else to read it.
            let text = schema.to_string();
            assert!(
                !text.contains("$ref") && !text.contains("$schema"),
                "{text}"
            );
        }
    }

    #[test]
    fn what_a_schema_accepts_its_type_reads() {
        let update = json!({"goal": "g", "sub_tasks": [{"id": "1", "status": "done"}]});
        assert!(validate_with(&write_plan_schema(), &update).is_ok());
        assert!(serde_json::from_value::<PlanUpdate>(update).is_ok());
        let extra = json!({"sub_tasks": [], "priority": "high"});
        assert!(validate_with(&write_plan_schema(), &extra).is_err());
        assert!(serde_json::from_value::<PlanUpdate>(extra).is_err());
        let plan = json!({"goal": "g", "sub_tasks": [{"id": "1", "description": "d"}]});
        assert!(validate(Schema::Plan, &plan).is_ok());
        assert!(serde_json::from_value::<Plan>(plan).is_ok());
    }

    fn validate_with(schema: &Value, value: &Value) -> Result<(), SchemaViolations> {
        check(&compile(schema), value)
    }

    #[test]
    fn a_plan_that_needs_clarification_must_ask_something() {
        let good = json!({"goal": "g", "sub_tasks": [], "needs_clarification": true,
                          "clarification_question": "Which Alex?"});
        assert!(validate(Schema::Plan, &good).is_ok());
        let silent = json!({"goal": "g", "sub_tasks": [], "needs_clarification": true});
        let error = validate(Schema::Plan, &silent).unwrap_err().to_string();
        assert!(error.contains("clarification_question"), "{error}");
        let clear = json!({"goal": "g", "sub_tasks": [], "needs_clarification": false,
                           "clarification_question": null});
        assert!(validate(Schema::Plan, &clear).is_ok());
    }

    #[test]
    fn plan_problems_name_their_place() {
        let bad = json!({"goal": "", "sub_tasks": [{"id": "1"}], "needs_clarification": "no"});
        let error = validate(Schema::Plan, &bad).unwrap_err().to_string();
        assert!(error.contains("at /goal"), "{error}");
        assert!(error.contains("at /sub_tasks/0"), "{error}");
        assert!(error.contains("at /needs_clarification"), "{error}");
    }

    #[test]
    fn each_review_action_needs_its_field() {
        assert!(validate(Schema::Review, &json!({"action": "continue"})).is_ok());
        assert!(validate(Schema::Review, &json!({"action": "stop"})).is_err());
        assert!(validate(Schema::Review, &json!({"action": "stop", "reason": "done"})).is_ok());
        assert!(validate(Schema::Review, &json!({"action": "ask_user"})).is_err());
        assert!(validate(Schema::Review, &json!({"action": "replan"})).is_err());
        assert!(validate(Schema::Review, &json!({"action": "dance"})).is_err());
        let replan = json!({"action": "replan", "plan":
            {"goal": "g", "sub_tasks": [], "needs_clarification": false}});
        assert!(validate(Schema::Review, &replan).is_ok());
    }
}
