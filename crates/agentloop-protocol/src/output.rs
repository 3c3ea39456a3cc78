//! Typed answers: the JSON Schema a run's answer must match (`OutputSpec`) and how the model is
//! asked for it (`OutputMode`). Saved with the run's input, so a resumed or adopted run keeps
//! its schema.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The JSON Schema of a run's answer: the answer is a JSON value that matches `schema`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutputSpec {
    /// A name for the schema (`^[a-zA-Z0-9_-]{1,64}$`), sent to providers that want one.
    #[serde(default = "default_name")]
    pub name: String,
    /// The JSON Schema of the answer.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub schema: Value,
    /// Asks the provider to hold the model to the schema exactly (OpenAI's `strict`), where
    /// it can; agentloop validates the answer either way.
    #[serde(default)]
    pub strict: bool,
}

fn default_name() -> String {
    String::from("answer")
}

/// How the model is asked for a typed answer (`[agent] output_mode`).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// A `final_answer` tool whose arguments are the schema, offered beside the other tools.
    Tool,
    /// The provider's structured output (`response_format`, `text.format`, Anthropic's
    /// `output_format`), only on the call that produces the answer.
    Native,
    /// The schema in the instructions, the JSON read from the answer's text.
    Prompted,
}

impl OutputMode {
    pub fn as_str(self) -> &'static str {
        match self {
            OutputMode::Tool => "tool",
            OutputMode::Native => "native",
            OutputMode::Prompted => "prompted",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        [OutputMode::Tool, OutputMode::Native, OutputMode::Prompted]
            .into_iter()
            .find(|mode| mode.as_str() == text)
    }
}

/// Whether `name` can name a schema on every provider's wire.
pub fn is_valid_output_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spec_reads_with_defaults_and_modes_by_name() {
        let spec: OutputSpec = serde_json::from_str(r#"{"schema": {"type": "object"}}"#)
            .unwrap_or_else(|_| OutputSpec {
                name: String::new(),
                schema: Value::Null,
                strict: true,
            });
        assert_eq!(spec.name, "answer");
        assert!(!spec.strict);
        for mode in [OutputMode::Tool, OutputMode::Native, OutputMode::Prompted] {
            assert_eq!(OutputMode::parse(mode.as_str()), Some(mode));
        }
        assert!(is_valid_output_name("ticket_v2"));
        assert!(!is_valid_output_name("a b"));
        assert!(!is_valid_output_name(""));
    }
}
