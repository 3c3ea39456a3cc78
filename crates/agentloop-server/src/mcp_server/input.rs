//! A paused run's request for input as MCP elicitation, and the client's answer back as the
//! run's answer. Pure: the forms, the answers and the words of a result that says input is
//! needed.
//!
//! - A clarification is a form with one string, `answer`; the question is its message.
//! - An approval is a form with one boolean per call, named by the call's id (titled with the
//!   tool and its arguments); `true` approves the call, anything else denies it.
//! - `decline` of an approval denies every call; `cancel` (the form dismissed), or `decline` of
//!   a question, leaves the run waiting: the tool's result then says how to answer later.

use agentloop_core::protocol::{InputAnswer, InputKind, InputRequest};
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// The longest arguments quoted in an approval's title, in characters.
const QUOTED_ARGUMENTS: usize = 120;

/// The message and requested schema of the form that asks `request`.
pub fn form(request: &InputRequest) -> (String, Value) {
    match request.kind {
        InputKind::Clarification => {
            let question = request
                .question
                .clone()
                .unwrap_or_else(|| String::from("The agent needs more information."));
            let schema = json!({
                "type": "object",
                "properties": {"answer": {
                    "type": "string",
                    "title": "Answer",
                    "description": question,
                }},
                "required": ["answer"],
            });
            (question, schema)
        }
        InputKind::Approval => {
            let mut properties = Map::new();
            for call in &request.calls {
                properties.insert(
                    call.call_id.clone(),
                    json!({
                        "type": "boolean",
                        "title": format!("Approve {}", described(&call.tool, &call.arguments)),
                        "default": false,
                    }),
                );
            }
            let required: Vec<&str> = request.calls.iter().map(|c| c.call_id.as_str()).collect();
            let message = match request.calls.as_slice() {
                [call] => format!(
                    "The agent wants to call {}. Approve?",
                    described(&call.tool, &call.arguments)
                ),
                calls => format!(
                    "The agent wants to make {} calls that need approval.",
                    calls.len()
                ),
            };
            let schema = json!({"type": "object", "properties": properties, "required": required});
            (message, schema)
        }
        // A tool's question does not pause its run (`call.rs` relays it as it comes); its own
        // form, should one be asked for.
        InputKind::Elicitation => match &request.elicitation {
            Some(asked) => (
                asked.message.clone(),
                asked
                    .requested_schema
                    .clone()
                    .unwrap_or_else(|| json!({"type": "object", "properties": {}})),
            ),
            None => (
                String::from("A tool asks a question."),
                json!({"type": "object", "properties": {}}),
            ),
        },
    }
}

/// What the client said to the form, as MCP's `ElicitResult` reads it.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    Accept(Value),
    Decline,
    Cancel,
}

impl Reply {
    /// An `ElicitResult` as JSON (`{action, content}`); anything else is a cancel.
    pub fn read(result: &Value) -> Reply {
        match result["action"].as_str() {
            Some("accept") => Reply::Accept(result["content"].clone()),
            Some("decline") => Reply::Decline,
            _ => Reply::Cancel,
        }
    }
}

/// The run's answer from the client's `reply` to the form of `request`; `None` leaves the run
/// waiting (dismissed, a question declined or answered with nothing).
pub fn answer_of(request: &InputRequest, reply: &Reply) -> Option<InputAnswer> {
    match (request.kind, reply) {
        (InputKind::Clarification, Reply::Accept(content)) => {
            let answer = content["answer"].as_str()?.trim();
            (!answer.is_empty()).then(|| InputAnswer {
                answer: Some(answer.to_string()),
                ..InputAnswer::default()
            })
        }
        (InputKind::Approval, Reply::Accept(content)) => {
            let mut answer = InputAnswer::default();
            for call in request.calls.iter().filter(|call| !call.client) {
                if content[&call.call_id] == Value::Bool(true) {
                    answer.approve.push(call.call_id.clone());
                } else {
                    answer.deny.push(call.call_id.clone());
                }
            }
            Some(answer)
        }
        (InputKind::Approval, Reply::Decline) => Some(InputAnswer {
            deny: request.calls.iter().map(|c| c.call_id.clone()).collect(),
            ..InputAnswer::default()
        }),
        (InputKind::Clarification, Reply::Decline)
        | (InputKind::Elicitation, _)
        | (_, Reply::Cancel) => None,
    }
}

/// The run's answer from a follow-up call's `question` (`session_id` naming the session of a
/// waiting run): the answer to a clarification; `approve` / `yes` or `deny` / `no` for every
/// call of an approval. `Err` says what to send instead.
pub fn answer_from_text(request: &InputRequest, text: &str) -> Result<InputAnswer, String> {
    let text = text.trim();
    match request.kind {
        InputKind::Clarification => Ok(InputAnswer {
            answer: Some(text.to_string()),
            ..InputAnswer::default()
        }),
        InputKind::Approval => {
            let calls = || request.calls.iter().map(|c| c.call_id.clone()).collect();
            match text.to_ascii_lowercase().trim_end_matches('.') {
                "approve" | "approved" | "yes" | "y" | "ok" => Ok(InputAnswer {
                    approve: calls(),
                    ..InputAnswer::default()
                }),
                "deny" | "denied" | "no" | "n" => Ok(InputAnswer {
                    deny: calls(),
                    ..InputAnswer::default()
                }),
                _ => Err(String::from(
                    "the agent's run waits for an approval: answer with the question \
                     \"approve\" or \"deny\" (for every call it waits for)",
                )),
            }
        }
        InputKind::Elicitation => Err(String::from(
            "a tool of the agent's run asks a question: answer it with POST \
             /v1/runs/{id}/input and `elicitation`",
        )),
    }
}

/// What a tool result says when the run waits for input the client cannot give through a form
/// (no elicitation capability, or the form was dismissed): what waits, and the two ways to
/// answer.
pub fn needs_input_text(request: &InputRequest, run_id: Uuid, session_id: Uuid) -> String {
    let what = match request.kind {
        InputKind::Clarification => format!(
            "The agent asks: {}\n\nTo answer, call this tool again with session_id \
             \"{session_id}\" and your answer as the question.",
            request.question.as_deref().unwrap_or("(no question)")
        ),
        InputKind::Approval => {
            let calls: Vec<String> = request
                .calls
                .iter()
                .map(|call| format!("- {}", described(&call.tool, &call.arguments)))
                .collect();
            format!(
                "The agent waits for approval of:\n{}\n\nTo answer, call this tool again with \
                 session_id \"{session_id}\" and the question \"approve\" or \"deny\".",
                calls.join("\n")
            )
        }
        InputKind::Elicitation => format!(
            "A tool of the agent's run asks: {}",
            request
                .elicitation
                .as_ref()
                .map_or("(no question)", |asked| asked.message.as_str())
        ),
    };
    format!("{what}\nOr answer over HTTP: POST /v1/runs/{run_id}/input (run {run_id} is waiting).")
}

/// `tool(arguments)`, the arguments cut short.
fn described(tool: &str, arguments: &Value) -> String {
    let arguments = arguments.to_string();
    let arguments = match arguments.char_indices().nth(QUOTED_ARGUMENTS) {
        Some((end, _)) => format!("{}…", &arguments[..end]),
        None => arguments,
    };
    format!("{tool}({arguments})")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop_core::protocol::PendingCall;

    fn approval() -> InputRequest {
        InputRequest {
            kind: InputKind::Approval,
            question: None,
            calls: ["call_a", "call_b"]
                .into_iter()
                .map(|id| PendingCall {
                    call_id: id.into(),
                    tool: "test.record".into(),
                    arguments: json!({"note": id}),
                    client: false,
                })
                .collect(),
            elicitation: None,
        }
    }

    fn question() -> InputRequest {
        InputRequest {
            kind: InputKind::Clarification,
            question: Some("Which city?".into()),
            calls: Vec::new(),
            elicitation: None,
        }
    }

    #[test]
    fn a_question_is_a_form_with_one_string_and_its_answer_goes_back() {
        let (message, schema) = form(&question());
        assert_eq!(message, "Which city?");
        assert_eq!(schema["properties"]["answer"]["type"], "string");
        assert_eq!(schema["required"], json!(["answer"]));
        let answer = answer_of(
            &question(),
            &Reply::read(&json!({"action": "accept", "content": {"answer": " Brest "}})),
        )
        .unwrap();
        assert_eq!(answer.answer.as_deref(), Some("Brest"));
        assert_eq!(
            answer_of(&question(), &Reply::read(&json!({"action": "decline"}))),
            None
        );
        let empty = Reply::Accept(json!({"answer": "  "}));
        assert_eq!(answer_of(&question(), &empty), None);
    }

    #[test]
    fn an_approval_is_a_boolean_per_call_and_only_true_approves() {
        let (message, schema) = form(&approval());
        assert!(message.contains("2 calls"), "{message}");
        assert_eq!(schema["properties"]["call_a"]["type"], "boolean");
        assert!(
            schema["properties"]["call_b"]["title"]
                .as_str()
                .unwrap()
                .contains(r#"test.record({"note":"call_b"})"#)
        );
        let reply = Reply::Accept(json!({"call_a": true, "call_b": "yes"}));
        let answer = answer_of(&approval(), &reply).unwrap();
        assert_eq!(answer.approve, ["call_a"]);
        assert_eq!(answer.deny, ["call_b"]);
        let declined = answer_of(&approval(), &Reply::Decline).unwrap();
        assert_eq!(declined.deny, ["call_a", "call_b"]);
        assert_eq!(answer_of(&approval(), &Reply::Cancel), None);
        assert_eq!(Reply::read(&json!({"action": 3})), Reply::Cancel);
    }

    #[test]
    fn a_follow_up_answers_with_words_or_is_told_which() {
        let yes = answer_from_text(&approval(), "Approve.").unwrap();
        assert_eq!(yes.approve.len(), 2);
        let no = answer_from_text(&approval(), "no").unwrap();
        assert_eq!(no.deny.len(), 2);
        assert!(answer_from_text(&approval(), "maybe").is_err());
        let answer = answer_from_text(&question(), "Brest").unwrap();
        assert_eq!(answer.answer.as_deref(), Some("Brest"));
    }

    #[test]
    fn the_text_without_a_form_says_both_ways_to_answer() {
        let run = Uuid::nil();
        let session = Uuid::max();
        let text = needs_input_text(&approval(), run, session);
        assert!(
            text.contains(&format!("session_id \"{session}\"")),
            "{text}"
        );
        assert!(
            text.contains(&format!("POST /v1/runs/{run}/input")),
            "{text}"
        );
        assert!(text.contains("- test.record("), "{text}");
        let text = needs_input_text(&question(), run, session);
        assert!(text.contains("The agent asks: Which city?"), "{text}");
    }
}
