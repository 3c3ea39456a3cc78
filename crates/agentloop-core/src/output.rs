//! Typed answers: what a run's answer must be (`TypedOutput`, saved with the run's input), the
//! `[agent] output_*` settings, the check of a schema before a run starts, and reading a value
//! out of the model's text.

use std::{path::PathBuf, sync::Arc};

pub use agentloop_protocol::{OutputMode, OutputSpec};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The name of the tool whose arguments are the answer (`output_mode = "tool"`).
pub const FINAL_ANSWER_TOOL: &str = "final_answer";

/// How many times an invalid answer goes back to the model by default (`agent.output_retries`).
pub const DEFAULT_OUTPUT_RETRIES: u32 = 2;

/// `[agent] output_schema`: the JSON Schema written inline (a TOML table), or the path of a
/// JSON file holding it (relative to the configuration file; read when the configuration is
/// loaded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum OutputSchemaSetting {
    File(PathBuf),
    Inline(serde_json::Map<String, Value>),
}

/// What a run's answer must be, and how the model is asked for it. Part of the run's input, so
/// a resumed or adopted run keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedOutput {
    pub spec: OutputSpec,
    pub mode: OutputMode,
    /// How many invalid answers go back to the model before the run fails `output_invalid`.
    pub retries: u32,
}

/// An output spec that cannot be used; the message names the key it was given under and
/// where in the schema it is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidOutput {
    /// The key as the client or the configuration wrote it: `output.schema`,
    /// `agent.output_schema`.
    pub key: String,
    pub message: String,
}

impl InvalidOutput {
    fn new(key: &str, message: String) -> Self {
        Self {
            key: key.to_string(),
            message,
        }
    }
}

/// Checks an output spec before a run starts: a usable name, and a schema that compiles. The
/// error names `key` (`agent.output_schema`, `output.schema`) and where in the schema it is
/// wrong.
pub fn check_spec(spec: &OutputSpec, key: &str) -> Result<(), InvalidOutput> {
    if !agentloop_protocol::is_valid_output_name(&spec.name) {
        return Err(InvalidOutput::new(
            key,
            format!(
                "the output's name {:?} must be 1 to 64 letters, digits, '_' or '-'",
                spec.name
            ),
        ));
    }
    compile(&spec.schema).map(drop).map_err(|error| {
        let path = error.instance_path().to_string();
        let place = if path.is_empty() {
            String::from("at the top")
        } else {
            format!("at {path}")
        };
        InvalidOutput::new(
            key,
            format!("{key} is not a valid JSON Schema {place}: {error}"),
        )
    })
}

/// The compiled schema of a run's answer.
pub(crate) fn compile(
    schema: &Value,
) -> Result<jsonschema::Validator, jsonschema::ValidationError<'static>> {
    if !(schema.is_object() || schema.is_boolean()) {
        return jsonschema::validator_for(&Value::Null);
    }
    jsonschema::validator_for(schema)
}

/// A compiled answer schema, shared by the machines of the runs that use it.
pub(crate) type CompiledOutput = Arc<Result<jsonschema::Validator, String>>;

pub(crate) fn compiled(spec: &OutputSpec) -> CompiledOutput {
    Arc::new(compile(&spec.schema).map_err(|error| error.to_string()))
}

/// The problems of `value` against the answer's schema, each with where it is (`at /x: ...`).
pub(crate) fn violations(compiled: &CompiledOutput, value: &Value) -> Vec<String> {
    match compiled.as_ref() {
        Ok(validator) => validator
            .iter_errors(value)
            .map(|error| {
                let path = error.instance_path().to_string();
                if path.is_empty() {
                    error.to_string()
                } else {
                    format!("at {path}: {error}")
                }
            })
            .collect(),
        Err(error) => vec![format!("the output schema does not compile: {error}")],
    }
}

/// The JSON value a model wrote as its answer: the whole text, the inside of a code fence, or
/// the first object in prose (read leniently).
pub(crate) fn read_value(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(String::from("the answer was empty"));
    }
    if let Ok(value) = serde_json::from_str(trimmed) {
        return Ok(value);
    }
    if let Some(body) = fenced(trimmed)
        && let Ok(value) = serde_json::from_str(body.trim())
    {
        return Ok(value);
    }
    crate::json_text::extract_object(trimmed).map_err(|error| error.to_string())
}

fn fenced(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after = &text[open + 3..];
    let start = after.find('\n').map_or(after.len(), |at| at + 1);
    let body = &after[start..];
    Some(&body[..body.find("```").unwrap_or(body.len())])
}

/// The instruction that asks for the answer as JSON (prompted mode, and every answer call that
/// is not native).
pub(crate) fn prompted_instruction(spec: &OutputSpec) -> String {
    format!(
        "Your final answer must be only a JSON value (no prose, no code fence) that matches \
         this JSON Schema ({}):\n{}",
        spec.name, spec.schema
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    fn spec(schema: Value) -> OutputSpec {
        OutputSpec {
            name: "ticket".into(),
            schema,
            strict: false,
        }
    }

    #[test]
    fn a_bad_schema_is_refused_naming_where_it_is_wrong() {
        let good = spec(json!({"type": "object", "properties": {"n": {"type": "integer"}}}));
        assert!(check_spec(&good, "output.schema").is_ok());
        let bad = spec(json!({"type": "object", "properties": {"n": {"type": "integr"}}}));
        let error = check_spec(&bad, "output.schema").unwrap_err();
        assert_eq!(error.key, "output.schema");
        assert!(
            error.message.contains("/properties/n/type"),
            "{}",
            error.message
        );
        let not_a_schema = spec(json!("object"));
        assert!(check_spec(&not_a_schema, "output.schema").is_err());
        let mut unnamed = good.clone();
        unnamed.name = "my ticket".into();
        assert!(check_spec(&unnamed, "output.schema").is_err());
    }

    #[test]
    fn values_are_read_from_plain_fenced_or_talkative_text() {
        assert_eq!(read_value(" [1, 2] ").unwrap(), json!([1, 2]));
        assert_eq!(
            read_value("```json\n{\"a\": 1}\n```").unwrap(),
            json!({"a": 1})
        );
        assert_eq!(
            read_value("Here it is: {'a': 1,}").unwrap(),
            json!({"a": 1})
        );
        assert!(read_value("no json here").is_err());
        assert!(read_value("  ").is_err());
    }

    #[test]
    fn violations_name_their_paths() {
        let compiled = compiled(&spec(json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
            "required": ["n", "m"]
        })));
        let problems = violations(&compiled, &json!({"n": "x"}));
        assert!(
            problems.iter().any(|p| p.starts_with("at /n:")),
            "{problems:?}"
        );
        assert!(problems.iter().any(|p| p.contains("\"m\"")), "{problems:?}");
        assert!(violations(&compiled, &json!({"n": 1, "m": 2})).is_empty());
    }
}
