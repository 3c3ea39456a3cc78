//! What a request asks its answer to be (`response_format` of Chat Completions, `text.format`
//! of Responses): the one place that maps it, so that typed answers (a JSON answer checked
//! against a schema) become a one-line change here once runs have them.

use serde_json::{Value, json};

use crate::error::ApiError;

/// Checks the answer's format a request asks for: text is what a run answers; a JSON answer
/// (`json_object`, `json_schema`) is refused with 400 `unsupported`, naming the field, until
/// runs have typed answers.
pub fn output_of(format: Option<&Value>) -> Result<(), ApiError> {
    let Some(format) = format.filter(|format| !format.is_null()) else {
        return Ok(());
    };
    match format["type"].as_str() {
        Some("text") => Ok(()),
        Some(kind @ ("json_schema" | "json_object")) => Err(ApiError::bad_request(
            "unsupported",
            format!(
                "response_format: {kind} is not supported yet: this server's runs answer with \
                 text; leave response_format out or make it {{\"type\": \"text\"}}"
            ),
        )
        .with_details(json!({"field": "response_format"}))),
        _ => Err(ApiError::bad_request(
            "invalid_request",
            "response_format: type must be text, json_object or json_schema",
        )
        .with_details(json!({"field": "response_format"}))),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn text_passes_and_a_json_answer_is_refused_naming_the_field() {
        assert!(output_of(None).is_ok());
        assert!(output_of(Some(&json!({"type": "text"}))).is_ok());
        let schema = json!({"type": "json_schema", "json_schema": {"name": "x", "schema": {}}});
        let error = output_of(Some(&schema)).unwrap_err();
        assert_eq!(error.code, "unsupported");
        assert_eq!(error.details.unwrap()["field"], "response_format");
        assert_eq!(
            output_of(Some(&json!({"type": "yaml"}))).unwrap_err().code,
            "invalid_request"
        );
    }
}
