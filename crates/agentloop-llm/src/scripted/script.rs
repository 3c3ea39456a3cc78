//! The format of a scripted model's script (`llm.script`), in TOML or JSON:
//!
//! ```toml
//! [[scenarios]]
//! name = "sum"                 # optional: named in errors
//! when = "add"                 # optional: the question contains it (any case); none: any question
//! plan = '{"steps": []}'       # optional: the reply to planning calls ([agent.planning])
//! review = '{"verdict": "continue"}'  # optional: the reply to review calls ([agent.review])
//!
//! [[scenarios.steps]]          # the run's first LLM call
//! text = "Adding."             # optional with tool calls
//! tool_calls = [{ name = "everything.get-sum", arguments = { a = 2, b = 40 } }]
//! delay_ms = 200               # optional: wait before answering
//!
//! [[scenarios.steps]]          # the second
//! fail = { status = 503, message = "overloaded" }
//! ```

use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

/// A whole script: scenarios, tried in order.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Script {
    pub scenarios: Vec<Scenario>,
}

/// The answers to one kind of question.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub name: Option<String>,
    /// The scenario answers questions containing this text (compared without case); without
    /// it, any question.
    #[serde(default)]
    pub when: Option<String>,
    /// The reply to the planning call of `[agent.planning]`.
    #[serde(default)]
    pub plan: Option<String>,
    /// The reply to review calls of `[agent.review]`.
    #[serde(default)]
    pub review: Option<String>,
    /// One per LLM call of the run, in order.
    pub steps: Vec<Step>,
}

/// The answer to one LLM call.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    #[serde(default)]
    pub delay_ms: Option<u64>,
    /// Answer with this error instead, as a provider's HTTP error after its retries.
    #[serde(default)]
    pub fail: Option<Failure>,
}

/// A tool call the model makes: `name` is the tool's name as agentloop shows it (`server.tool`)
/// or as the model sees it (`server__tool`); `arguments` an object, or a string sent as is
/// (to test what the loop does with arguments that are not JSON).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// An error like a provider's: the HTTP status decides which (401 a refused key, 429 a rate
/// limit, 5xx a server error, any other a rejected request).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Failure {
    pub status: u16,
    #[serde(default)]
    pub message: Option<String>,
}

impl Scenario {
    /// How errors name it: its name, else its `when`, else its place.
    pub fn label(&self, index: usize) -> String {
        match (&self.name, &self.when) {
            (Some(name), _) => format!("scenario {name:?}"),
            (None, Some(when)) => format!("scenario when = {when:?}"),
            (None, None) => format!("scenario #{}", index + 1),
        }
    }

    pub fn matches(&self, question: &str) -> bool {
        match &self.when {
            Some(when) => question.to_lowercase().contains(&when.to_lowercase()),
            None => true,
        }
    }
}

impl ScriptedCall {
    /// The arguments as the model writes them: JSON text.
    pub fn arguments_text(&self) -> String {
        match &self.arguments {
            None => "{}".to_string(),
            Some(Value::String(raw)) => raw.clone(),
            Some(value) => value.to_string(),
        }
    }
}

/// Reads a script: JSON when `name` ends in `.json`, else TOML. The error names the problem.
pub fn parse(text: &str, name: &Path) -> Result<Script, String> {
    let is_json = name
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
    let script: Script = if is_json {
        serde_json::from_str(text).map_err(|error| error.to_string())?
    } else {
        toml::from_str(text).map_err(|error| error.to_string().trim_end().to_string())?
    };
    if script.scenarios.is_empty() {
        return Err(
            "the script has no scenario: add a [[scenarios]] with [[scenarios.steps]]".into(),
        );
    }
    for (index, scenario) in script.scenarios.iter().enumerate() {
        for (number, step) in scenario.steps.iter().enumerate() {
            let empty = step.text.is_none() && step.tool_calls.is_empty() && step.fail.is_none();
            if empty {
                return Err(format!(
                    "step {} of the {} has no text, no tool_calls and no fail",
                    number + 1,
                    scenario.label(index)
                ));
            }
        }
    }
    Ok(script)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses_in_toml_and_json() {
        let toml_text = r#"
            [[scenarios]]
            name = "sum"
            when = "add"
            [[scenarios.steps]]
            text = "Adding."
            tool_calls = [{ name = "everything.get-sum", arguments = { a = 2, b = 40 } }]
            delay_ms = 5
            [[scenarios.steps]]
            fail = { status = 503, message = "overloaded" }
            [[scenarios]]
            [[scenarios.steps]]
            text = "Hello."
        "#;
        let script = parse(toml_text, Path::new("script.toml")).unwrap();
        assert_eq!(script.scenarios.len(), 2);
        let call = &script.scenarios[0].steps[0].tool_calls[0];
        assert_eq!(call.arguments_text(), r#"{"a":2,"b":40}"#);
        assert!(script.scenarios[0].matches("Please ADD 2 and 40"));
        assert!(!script.scenarios[0].matches("hello"));
        assert!(script.scenarios[1].matches("anything"));

        let json_text = r#"{"scenarios": [{"steps": [{"text": "Hi", "tool_calls":
            [{"name": "t", "arguments": "not json"}]}]}]}"#;
        let script = parse(json_text, Path::new("s.JSON")).unwrap();
        assert_eq!(
            script.scenarios[0].steps[0].tool_calls[0].arguments_text(),
            "not json"
        );
    }

    #[test]
    fn mistakes_are_named() {
        let unknown = parse("[[scenarios]]\nstep = []\n", Path::new("s.toml")).unwrap_err();
        assert!(unknown.contains("step"), "{unknown}");
        let empty = parse(
            "[[scenarios]]\nname = \"x\"\n[[scenarios.steps]]\ndelay_ms = 3\n",
            Path::new("s.toml"),
        )
        .unwrap_err();
        assert!(
            empty.contains("step 1 of the scenario \"x\" has no text"),
            "{empty}"
        );
        let none = parse("scenarios = []", Path::new("s.toml")).unwrap_err();
        assert!(none.contains("no scenario"), "{none}");
    }
}
