//! Reads the action a planner reply should be: one JSON object (found and read tolerantly by
//! [`agentloop_core::find_object`]) of the shape `{"action": "tool", "tool", "parameters",
//! "reasoning"}` or `{"action": "finalize", "answer"}`; what is wrong is reported in words the
//! model can act on.

use agentloop_core::ObjectError;
use serde_json::{Map, Value};

/// What the model decided to do this turn.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    Tool {
        tool: String,
        parameters: Map<String, Value>,
        reasoning: String,
    },
    Finalize {
        answer: String,
    },
}

/// Why an object is not an action, in words the model can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum ActionProblem {
    #[error("the reply must be a JSON object")]
    NotAnObject,
    #[error("\"action\" must be the string \"tool\" or \"finalize\", got {0}")]
    ActionNotAString(String),
    #[error("the object has no \"action\": it must be \"tool\" or \"finalize\"")]
    NoAction,
    #[error("\"action\" must be \"tool\" or \"finalize\", got {0:?}")]
    UnknownAction(String),
    #[error("\"action\": \"tool\" needs \"tool\": the name of one of the tools, as a string")]
    NoTool,
    #[error(
        "\"parameters\" must be a JSON object of the tool's arguments (names to values), got {0}"
    )]
    ParametersNotAnObject(&'static str),
    #[error("\"answer\" must not be empty")]
    EmptyAnswer,
    #[error("\"action\": \"finalize\" needs \"answer\": the answer for the user, as a string")]
    NoAnswer,
    /// A tool action where only the answer may come (the forced summary).
    #[error("calling tools is not possible now; only {{\"action\": \"finalize\"}} is allowed")]
    ToolsNotAllowed,
}

/// The action of a reply, or why there is none. Every complete `{…}` of the reply is tried in
/// order; the first that reads as an action wins, else the first problem is reported.
pub(crate) fn parse_reply(reply: &str) -> Result<Action, ObjectError<ActionProblem>> {
    agentloop_core::find_object(reply, into_action)
}

fn into_action(value: Value) -> Result<Action, ActionProblem> {
    let Value::Object(mut object) = value else {
        return Err(ActionProblem::NotAnObject);
    };
    let action = match object.get("action") {
        Some(Value::String(action)) => action.trim().to_ascii_lowercase(),
        Some(other) => return Err(ActionProblem::ActionNotAString(other.to_string())),
        // The intent is plain even when the model forgot the key.
        None if object.contains_key("tool") => "tool".to_string(),
        None if object.contains_key("answer") => "finalize".to_string(),
        None => return Err(ActionProblem::NoAction),
    };
    match action.as_str() {
        "tool" => {
            let tool = match object.get("tool") {
                Some(Value::String(tool)) if !tool.trim().is_empty() => tool.trim().to_string(),
                _ => return Err(ActionProblem::NoTool),
            };
            let parameters = parameters(object.remove("parameters"))?;
            let reasoning = match object.remove("reasoning") {
                Some(Value::String(reasoning)) => reasoning.trim().to_string(),
                _ => String::new(),
            };
            Ok(Action::Tool {
                tool,
                parameters,
                reasoning,
            })
        }
        "finalize" => match object.remove("answer") {
            Some(Value::String(answer)) if !answer.trim().is_empty() => {
                Ok(Action::Finalize { answer })
            }
            Some(Value::String(_)) => Err(ActionProblem::EmptyAnswer),
            // A typed answer written as JSON in place of a string: its JSON text is the answer.
            Some(value @ (Value::Object(_) | Value::Array(_))) => Ok(Action::Finalize {
                answer: value.to_string(),
            }),
            _ => Err(ActionProblem::NoAnswer),
        },
        other => Err(ActionProblem::UnknownAction(other.to_string())),
    }
}

/// The tool's arguments: an object, nothing (no arguments), or an object encoded as a string
/// (some models quote it).
fn parameters(value: Option<Value>) -> Result<Map<String, Value>, ActionProblem> {
    match value {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(parameters)) => Ok(parameters),
        Some(Value::String(text)) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(parameters)) => Ok(parameters),
            _ => Err(ActionProblem::ParametersNotAnObject("a string")),
        },
        Some(Value::Array(_)) => Err(ActionProblem::ParametersNotAnObject("an array")),
        Some(_) => Err(ActionProblem::ParametersNotAnObject("a single value")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(reply: &str) -> (String, Value, String) {
        match parse_reply(reply) {
            Ok(Action::Tool {
                tool,
                parameters,
                reasoning,
            }) => (tool, Value::Object(parameters), reasoning),
            other => panic!("expected a tool action from {reply:?}, got {other:?}"),
        }
    }

    fn error(reply: &str) -> String {
        match parse_reply(reply) {
            Err(error) => error.to_string(),
            Ok(action) => panic!("expected an error for {reply:?}, got {action:?}"),
        }
    }

    #[test]
    fn plain_json_is_read() {
        let (name, parameters, reasoning) = tool(
            r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "hi"}, "reasoning": "to echo"}"#,
        );
        assert_eq!(name, "test__echo");
        assert_eq!(parameters, json!({"text": "hi"}));
        assert_eq!(reasoning, "to echo");
        assert_eq!(
            parse_reply(r#"{"action": "finalize", "answer": "Paris."}"#).ok(),
            Some(Action::Finalize {
                answer: "Paris.".into()
            })
        );
    }

    #[test]
    fn code_fences_with_and_without_a_language_are_stripped() {
        let fenced = "```json\n{\"action\": \"finalize\", \"answer\": \"fenced\"}\n```";
        let bare = "```\n{\"action\": \"finalize\", \"answer\": \"bare\"}\n```";
        let cases = [(fenced, "fenced"), (bare, "bare")];
        for (reply, expected) in cases {
            assert_eq!(
                parse_reply(reply).ok(),
                Some(Action::Finalize {
                    answer: expected.into()
                })
            );
        }
    }

    #[test]
    fn text_before_and_after_the_object_is_ignored() {
        let reply = "Sure! I'll add them {as asked}:\n{\"action\": \"tool\", \"tool\": \"add\", \
                     \"parameters\": {\"a\": 1}} and then I'll tell you.";
        let (name, parameters, _) = tool(reply);
        assert_eq!(name, "add");
        assert_eq!(parameters, json!({"a": 1}));
    }

    #[test]
    fn braces_and_quotes_inside_strings_do_not_end_the_object() {
        let reply = r#"{"action": "finalize", "answer": "use {x} and \"}\" or '{'"} trailing }"#;
        assert_eq!(
            parse_reply(reply).ok(),
            Some(Action::Finalize {
                answer: "use {x} and \"}\" or '{'".into()
            })
        );
    }

    #[test]
    fn single_quotes_trailing_commas_and_python_literals_are_tolerated() {
        let (name, parameters, reasoning) = tool(
            "{'action': 'tool', 'tool': 'test__echo', 'parameters': {'text': \"it's {here}\", \
             'loud': True, 'n': None,}, 'reasoning': 'because',}",
        );
        assert_eq!(name, "test__echo");
        assert_eq!(
            parameters,
            json!({"text": "it's {here}", "loud": true, "n": null})
        );
        assert_eq!(reasoning, "because");
    }

    #[test]
    fn raw_line_breaks_inside_strings_are_tolerated() {
        assert_eq!(
            parse_reply("{\"action\": \"finalize\", \"answer\": \"line one\nline two\"}").ok(),
            Some(Action::Finalize {
                answer: "line one\nline two".into()
            })
        );
    }

    #[test]
    fn nested_parameters_are_kept_whole() {
        let (_, parameters, _) = tool(
            r#"{"action":"tool","tool":"search","parameters":{"filter":{"tags":["a","b"],"range":{"from":1}},"limit":5}}"#,
        );
        assert_eq!(
            parameters,
            json!({"filter": {"tags": ["a", "b"], "range": {"from": 1}}, "limit": 5})
        );
    }

    #[test]
    fn parameters_default_to_empty_and_may_be_a_quoted_object() {
        let (_, parameters, reasoning) = tool(r#"{"action": "tool", "tool": "list"}"#);
        assert_eq!(parameters, json!({}));
        assert_eq!(reasoning, "");
        let (_, parameters, _) =
            tool(r#"{"action": "tool", "tool": "add", "parameters": "{\"a\": 2}"}"#);
        assert_eq!(parameters, json!({"a": 2}));
    }

    #[test]
    fn a_later_object_is_used_when_the_first_is_not_an_action() {
        let reply = r#"The schema is {"type": "object"}. {"action": "finalize", "answer": "ok"}"#;
        assert_eq!(
            parse_reply(reply).ok(),
            Some(Action::Finalize {
                answer: "ok".into()
            })
        );
    }

    #[test]
    fn a_typed_answer_may_be_written_as_json_in_place_of_a_string() {
        assert_eq!(
            parse_reply(r#"{"action": "finalize", "answer": {"n": 1}}"#).ok(),
            Some(Action::Finalize {
                answer: r#"{"n":1}"#.into()
            })
        );
    }

    #[test]
    fn a_missing_action_is_inferred_from_tool_or_answer() {
        assert_eq!(tool(r#"{"tool": "list"}"#).0, "list");
        assert_eq!(
            parse_reply(r#"{"answer": "42"}"#).ok(),
            Some(Action::Finalize {
                answer: "42".into()
            })
        );
    }

    #[test]
    fn problems_are_named() {
        let cases = [
            ("I will call echo now", "holds no JSON object"),
            ("   ", "the reply was empty"),
            (r#"{"action": "tool", "tool": "echo""#, "not complete"),
            (r#"{"action": "tool" "tool": "echo"}"#, "not valid JSON"),
            (
                r#"{"action": "tool", "parameters": {}}"#,
                "needs \"tool\": the name of one of the tools",
            ),
            (
                r#"{"action": "search", "tool": "x"}"#,
                "\"action\" must be \"tool\" or \"finalize\", got \"search\"",
            ),
            (r#"{"action": 3}"#, "\"action\" must be the string"),
            (r#"{"reasoning": "hmm"}"#, "has no \"action\""),
            (r#"{"action": "finalize"}"#, "needs \"answer\""),
            (
                r#"{"action": "finalize", "answer": " "}"#,
                "must not be empty",
            ),
            (
                r#"{"action": "tool", "tool": "x", "parameters": [1]}"#,
                "\"parameters\" must be a JSON object",
            ),
        ];
        for (reply, expected) in cases {
            let message = error(reply);
            assert!(
                message.contains(expected),
                "{reply:?}: {message:?} should contain {expected:?}"
            );
        }
    }

    #[test]
    fn the_first_problem_is_reported_when_no_object_reads() {
        let message = error(r#"{"action": "dance"} then {"action": "sing"}"#);
        assert!(message.contains("\"dance\""), "{message}");
    }
}
