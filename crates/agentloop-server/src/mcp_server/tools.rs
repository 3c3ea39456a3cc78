//! The agents as MCP tools: the main agent (`agentloop`) and each public sub-agent, as
//! `GET /v1/models` lists them; each takes `{question, session_id?}`. When the agent answers
//! with a typed value (`[agent] output_schema`), the tool declares it as its `outputSchema`:
//! the schema itself when it describes an object (MCP wants an object at the root), else an
//! object with the value under the schema's name.

use agentloop_core::OutputSpec;
use rmcp::model::{JsonObject, Tool};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use std::sync::Arc;

use crate::{openai::models::MAIN_AGENT, state::PublicAgent};

/// What a person or a model reads about the main agent when the configuration says nothing.
const MAIN_DESCRIPTION: &str = "Ask the agent: it works on the question with its tools and \
    answers. Pass the session_id of an earlier answer to continue that conversation.";

/// The arguments of every agent's tool.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Question {
    pub question: String,
    #[serde(default)]
    pub session_id: Option<String>,
}

impl Question {
    /// The arguments of a call; `Err` says what is wrong, for a tool error the caller repairs.
    pub fn read(arguments: Option<&JsonObject>) -> Result<Question, String> {
        let arguments = Value::Object(arguments.cloned().unwrap_or_default());
        let question: Question = serde_json::from_value(arguments).map_err(|error| {
            format!("the arguments must be {{question, session_id?}} (strings): {error}")
        })?;
        if question.question.trim().is_empty() {
            return Err(String::from("question: must not be empty"));
        }
        Ok(question)
    }
}

/// How a typed answer is put in `structuredContent`.
#[derive(Debug, Clone, PartialEq)]
pub enum Typed {
    /// The value is the structured content (its schema describes an object).
    Whole,
    /// The value is under this key.
    Under(String),
}

impl Typed {
    /// The tool's `outputSchema` for `spec`, and where the value goes.
    pub fn of(spec: &OutputSpec) -> (Typed, JsonObject) {
        match &spec.schema {
            Value::Object(schema) if schema.get("type") == Some(&json!("object")) => {
                (Typed::Whole, schema.clone())
            }
            schema => {
                let mut wrapper = Map::new();
                wrapper.insert("type".into(), json!("object"));
                wrapper.insert(
                    "properties".into(),
                    json!({ spec.name.clone(): schema.clone() }),
                );
                wrapper.insert("required".into(), json!([spec.name.clone()]));
                (Typed::Under(spec.name.clone()), wrapper)
            }
        }
    }

    /// The structured content of a typed answer `value`.
    pub fn content(&self, value: Value) -> Value {
        match self {
            Typed::Whole => value,
            Typed::Under(name) => json!({ name.clone(): value }),
        }
    }
}

/// The tools: the main agent, then the public sub-agents (one named like the main agent is
/// left out, as `GET /v1/models` does).
pub fn list(agents: &[PublicAgent], output: Option<&OutputSpec>) -> Vec<Tool> {
    let output_schema = output.map(|spec| Arc::new(Typed::of(spec).1));
    let input = Arc::new(input_schema());
    let tool = |name: &str, description: &str| {
        let mut tool = Tool::default();
        tool.name = name.to_string().into();
        tool.description = Some(description.to_string().into());
        tool.input_schema = input.clone();
        tool.output_schema = output_schema.clone();
        tool
    };
    let mut tools = vec![tool(MAIN_AGENT, MAIN_DESCRIPTION)];
    tools.extend(
        agents
            .iter()
            .filter(|agent| agent.name != MAIN_AGENT)
            .map(|agent| {
                let description = match agent.description.trim() {
                    "" => format!("Ask the agent {}.", agent.name),
                    text => text.to_string(),
                };
                tool(&agent.name, &description)
            }),
    );
    tools
}

fn input_schema() -> JsonObject {
    let schema = json!({
        "type": "object",
        "properties": {
            "question": {"type": "string", "description": "What to ask the agent."},
            "session_id": {"type": "string", "description":
                "The conversation to continue: the session_id of an earlier answer (or any id \
                 of your own, to start one with it)."},
        },
        "required": ["question"],
        "additionalProperties": false,
    });
    match schema {
        Value::Object(schema) => schema,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn agent(name: &str, description: &str) -> PublicAgent {
        PublicAgent {
            name: name.into(),
            description: description.into(),
            system_prompt: String::new(),
            model: None,
            max_iterations: None,
            workflow: None,
        }
    }

    #[test]
    fn the_main_agent_and_each_public_one_are_tools_of_the_same_input() {
        let tools = list(
            &[
                agent("researcher", "Looks things up"),
                agent("agentloop", ""),
            ],
            None,
        );
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        assert_eq!(names, ["agentloop", "researcher"]);
        assert_eq!(tools[1].description.as_deref(), Some("Looks things up"));
        assert_eq!(tools[0].input_schema["required"], json!(["question"]));
        assert!(tools[0].output_schema.is_none());
    }

    #[test]
    fn an_object_schema_is_the_output_schema_and_another_is_wrapped() {
        let object = OutputSpec {
            name: "ticket".into(),
            schema: json!({"type": "object", "properties": {"title": {"type": "string"}}}),
            strict: false,
        };
        let tools = list(&[], Some(&object));
        let schema = tools[0].output_schema.clone().unwrap();
        assert_eq!(Value::Object((*schema).clone()), object.schema);
        let (typed, _) = Typed::of(&object);
        assert_eq!(typed.content(json!({"title": "x"})), json!({"title": "x"}));

        let list_of = OutputSpec {
            name: "tags".into(),
            schema: json!({"type": "array", "items": {"type": "string"}}),
            strict: false,
        };
        let (typed, schema) = Typed::of(&list_of);
        assert_eq!(schema["required"], json!(["tags"]));
        assert_eq!(typed.content(json!(["a"])), json!({"tags": ["a"]}));
    }

    #[test]
    fn arguments_are_a_question_and_maybe_a_session() {
        let read = |value: Value| Question::read(value.as_object());
        assert_eq!(
            read(json!({"question": "hi", "session_id": "s1"})).unwrap(),
            Question {
                question: "hi".into(),
                session_id: Some("s1".into())
            }
        );
        assert!(read(json!({"question": " "})).is_err());
        assert!(
            read(json!({"query": "hi"}))
                .unwrap_err()
                .contains("question")
        );
        assert!(Question::read(None).is_err());
    }
}
