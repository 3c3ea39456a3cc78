//! What a request asks its answer to be (`response_format` of Chat Completions, `text.format`
//! of Responses): the one place that maps it to a run's typed answer (`OutputSpec`, see
//! docs/typed-answers.md): the answer is then a JSON value checked against the schema.

use agentloop_core::OutputSpec;
use serde_json::{Value, json};

use crate::error::ApiError;

/// The typed answer a request asks for: none for text; `json_schema` its schema (Chat
/// Completions nests it under `json_schema`, Responses' `text.format` has it flat); a
/// `json_object` any JSON object. A schema that does not compile is a 400 naming `field`.
pub fn output_of(format: Option<&Value>, field: &str) -> Result<Option<OutputSpec>, ApiError> {
    let Some(format) = format.filter(|format| !format.is_null()) else {
        return Ok(None);
    };
    let spec = match format["type"].as_str() {
        Some("text") => return Ok(None),
        Some("json_object") => OutputSpec {
            name: String::from("answer"),
            schema: json!({"type": "object"}),
            strict: false,
        },
        Some("json_schema") => {
            // Chat Completions: `{type, json_schema: {name, schema, strict}}`; Responses:
            // `{type, name, schema, strict}`.
            let spec = format.get("json_schema").unwrap_or(format);
            OutputSpec {
                name: spec["name"].as_str().unwrap_or("answer").to_string(),
                schema: spec.get("schema").cloned().unwrap_or_else(|| json!({})),
                strict: spec["strict"].as_bool().unwrap_or(false),
            }
        }
        _ => {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("{field}: type must be text, json_object or json_schema"),
            )
            .with_details(json!({ "field": field })));
        }
    };
    agentloop_core::output::check_spec(&spec, field).map_err(|problem| {
        ApiError::bad_request("invalid_request", problem.to_string())
            .with_details(json!({ "field": field }))
    })?;
    Ok(Some(spec))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn text_is_no_typed_answer_and_a_schema_in_either_shape_is_one() {
        assert!(output_of(None, "response_format").unwrap().is_none());
        let text = json!({"type": "text"});
        assert!(output_of(Some(&text), "response_format").unwrap().is_none());
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let chat = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": schema, "strict": true}});
        let spec = output_of(Some(&chat), "response_format").unwrap().unwrap();
        assert_eq!(
            (spec.name.as_str(), &spec.schema, spec.strict),
            ("x", &schema, true)
        );
        let responses = json!({"type": "json_schema", "name": "y", "schema": schema});
        let spec = output_of(Some(&responses), "text.format").unwrap().unwrap();
        assert_eq!(
            (spec.name.as_str(), &spec.schema, spec.strict),
            ("y", &schema, false)
        );
        let object = json!({"type": "json_object"});
        let spec = output_of(Some(&object), "response_format")
            .unwrap()
            .unwrap();
        assert_eq!(spec.schema, json!({"type": "object"}));
    }

    #[test]
    fn a_bad_schema_or_type_is_a_400_naming_the_field() {
        let bad =
            json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 5}}});
        let error = output_of(Some(&bad), "response_format").unwrap_err();
        assert_eq!(error.code, "invalid_request");
        assert_eq!(error.details.unwrap()["field"], "response_format");
        let error = output_of(Some(&json!({"type": "yaml"})), "text.format").unwrap_err();
        assert_eq!(error.details.unwrap()["field"], "text.format");
    }
}
