//! The JSON Schemas of what the loop asks the model for in JSON (a plan, a review verdict) and
//! of its built-in tools' arguments, compiled once.

use std::sync::LazyLock;

use serde_json::{Value, json};

use crate::catalog::{SchemaViolations, check_schema};

/// A plan: `{goal, sub_tasks: [{id, description, status, depends_on}], needs_clarification,
/// clarification_question}`.
pub(crate) fn plan_schema() -> Value {
    json!({
        "type": "object",
        "required": ["goal", "sub_tasks", "needs_clarification"],
        "properties": {
            "goal": {"type": "string", "minLength": 1},
            "sub_tasks": {"type": "array", "items": {
                "type": "object",
                "required": ["id", "description"],
                "properties": {
                    "id": {"type": "string", "minLength": 1},
                    "description": {"type": "string", "minLength": 1},
                    "status": {"enum": ["pending", "done", "blocked"]},
                    "depends_on": {"type": "array", "items": {"type": "string"}}
                }
            }},
            "needs_clarification": {"type": "boolean"},
            "clarification_question": {"type": ["string", "null"]}
        },
        "if": {"properties": {"needs_clarification": {"const": true}}},
        "then": {
            "required": ["clarification_question"],
            "properties": {"clarification_question": {"type": "string", "minLength": 1}}
        }
    })
}

/// A reviewer's verdict: `{action: continue|replan|ask_user|stop, reason, plan, question}`.
fn review_schema() -> Value {
    json!({
        "type": "object",
        "required": ["action"],
        "properties": {
            "action": {"enum": ["continue", "replan", "ask_user", "stop"]},
            "reason": {"type": "string"},
            "question": {"type": "string"},
            "plan": plan_schema()
        },
        "allOf": [
            {"if": {"properties": {"action": {"const": "replan"}}},
             "then": {"required": ["plan"]}},
            {"if": {"properties": {"action": {"const": "ask_user"}}},
             "then": {"required": ["question"], "properties": {"question": {"minLength": 1}}}},
            {"if": {"properties": {"action": {"const": "stop"}}},
             "then": {"required": ["reason"], "properties": {"reason": {"minLength": 1}}}}
        ]
    })
}

/// Arguments of the built-in `write_plan` tool.
pub(crate) fn write_plan_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "goal": {"type": "string", "minLength": 1, "description": "A new goal, when it changed."},
            "sub_tasks": {
                "type": "array",
                "description": "Sub-tasks to change (by id) or to add (a new id, with a description).",
                "items": {
                    "type": "object",
                    "required": ["id"],
                    "properties": {
                        "id": {"type": "string", "minLength": 1},
                        "status": {"enum": ["pending", "done", "blocked"]},
                        "description": {"type": "string", "minLength": 1},
                        "depends_on": {"type": "array", "items": {"type": "string"}}
                    },
                    "additionalProperties": false
                }
            }
        },
        "required": ["sub_tasks"],
        "additionalProperties": false
    })
}

/// Arguments of the built-in `ask_user` tool.
pub(crate) fn ask_user_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "question": {
                "type": "string",
                "minLength": 1,
                "description": "One short, specific question for the user."
            }
        },
        "required": ["question"],
        "additionalProperties": false
    })
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
        }
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
