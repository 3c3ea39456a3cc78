//! The JSON Schemas the loop checks what the model writes against: compiled once, each
//! derived from the Rust type that reads it ([`schema_for`]). The plan's is here (its type is
//! the protocol's); a verdict's, `write_plan`'s and `ask_user`'s live with their types
//! (`review.rs`, `planning.rs`, `builtins.rs`).

use std::sync::LazyLock;

use agentloop_protocol::Plan;
use serde_json::Value;

use crate::{
    catalog::{SchemaViolations, check_schema},
    tool::schema_for,
};

/// A plan: `{goal, sub_tasks: [{id, description, status, depends_on}], needs_clarification,
/// clarification_question}`; one that needs clarification must ask something.
pub(crate) fn plan_schema() -> Value {
    schema_for::<Plan>()
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

/// Checks a plan; the error lists every problem with where it was found.
pub(crate) fn validate_plan(value: &Value) -> Result<(), SchemaViolations> {
    check(&PLAN, value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::machine::{
        builtins::ask_user_schema,
        planning::{PlanUpdate, write_plan_schema},
        review::validate_verdict,
    };

    #[test]
    fn every_schema_compiles() {
        for schema in [
            plan_schema(),
            schema_for::<crate::machine::review::Verdict>(),
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
        assert!(validate_plan(&plan).is_ok());
        assert!(serde_json::from_value::<Plan>(plan).is_ok());
    }

    fn validate_with(schema: &Value, value: &Value) -> Result<(), SchemaViolations> {
        check(&compile(schema), value)
    }

    #[test]
    fn a_plan_that_needs_clarification_must_ask_something() {
        let good = json!({"goal": "g", "sub_tasks": [], "needs_clarification": true,
                          "clarification_question": "Which Alex?"});
        assert!(validate_plan(&good).is_ok());
        let silent = json!({"goal": "g", "sub_tasks": [], "needs_clarification": true});
        let error = validate_plan(&silent).unwrap_err().to_string();
        assert!(error.contains("clarification_question"), "{error}");
        let clear = json!({"goal": "g", "sub_tasks": [], "needs_clarification": false,
                           "clarification_question": null});
        assert!(validate_plan(&clear).is_ok());
    }

    #[test]
    fn plan_problems_name_their_place() {
        let bad = json!({"goal": "", "sub_tasks": [{"id": "1"}], "needs_clarification": "no"});
        let error = validate_plan(&bad).unwrap_err().to_string();
        assert!(error.contains("at /goal"), "{error}");
        assert!(error.contains("at /sub_tasks/0"), "{error}");
        assert!(error.contains("at /needs_clarification"), "{error}");
    }

    #[test]
    fn each_review_action_needs_its_field() {
        assert!(validate_verdict(&json!({"action": "continue"})).is_ok());
        assert!(validate_verdict(&json!({"action": "stop"})).is_err());
        assert!(validate_verdict(&json!({"action": "stop", "reason": "done"})).is_ok());
        assert!(validate_verdict(&json!({"action": "ask_user"})).is_err());
        assert!(validate_verdict(&json!({"action": "replan"})).is_err());
        assert!(validate_verdict(&json!({"action": "dance"})).is_err());
        let replan = json!({"action": "replan", "plan":
            {"goal": "g", "sub_tasks": [], "needs_clarification": false}});
        assert!(validate_verdict(&replan).is_ok());
    }
}
