//! `agentloop eval --from-session ID`: a stored session as a case, to build regression sets from
//! real use: its questions as the conversation, the tools it called (in order) and its last
//! answer as what is expected. Printed as a `[[case]]` table to append to a case file.

use agentloop::core::protocol::{MessageKind, Role, SessionMessage};
use serde::Serialize;

/// The case a session's messages make; `None` when it holds no question.
pub fn case_toml(name: &str, messages: &[SessionMessage]) -> anyhow::Result<Option<String>> {
    let current = || messages.iter().filter(|m| m.superseded_by_run.is_none());
    let questions: Vec<String> = current()
        .filter(|m| m.kind == MessageKind::Dialogue && m.message.role == Role::User)
        .filter_map(|m| m.message.content.clone())
        .collect();
    if questions.is_empty() {
        return Ok(None);
    }
    let tools: Vec<String> = current()
        .filter(|m| m.kind == MessageKind::ToolCall)
        .flat_map(|m| m.message.tool_calls.iter().map(|call| call.name.clone()))
        .collect();
    let answer = current()
        .filter(|m| m.kind == MessageKind::Dialogue && m.message.role == Role::Assistant)
        .filter_map(|m| m.message.content.clone())
        .next_back();
    let (question, conversation) = match questions.as_slice() {
        [one] => (Some(one.clone()), Vec::new()),
        _ => (None, questions),
    };
    let case = Case {
        name: name.to_string(),
        question,
        conversation,
        expect: Expect {
            tools,
            answer_contains: answer.into_iter().collect(),
        },
    };
    let text = toml::to_string(&Cases { case: vec![case] })?;
    Ok(Some(text))
}

#[derive(Serialize)]
struct Cases {
    case: Vec<Case>,
}

#[derive(Serialize)]
struct Case {
    name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    question: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    conversation: Vec<String>,
    expect: Expect,
}

#[derive(Serialize)]
struct Expect {
    tools: Vec<String>,
    answer_contains: Vec<String>,
}

#[cfg(test)]
mod tests {
    use agentloop::core::protocol::{ChatMessage, ToolCall};
    use chrono::Utc;
    use uuid::Uuid;

    use super::*;
    use crate::commands::eval::cases::CaseFile;

    fn message(kind: MessageKind, message: ChatMessage) -> SessionMessage {
        SessionMessage {
            id: Uuid::now_v7(),
            session_id: Uuid::nil(),
            run_id: None,
            kind,
            message,
            metadata: serde_json::Value::Null,
            created_at: Utc::now(),
            superseded_by_run: None,
        }
    }

    #[test]
    fn a_session_becomes_a_case_the_case_file_reads() {
        let call = ChatMessage {
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "demo.get-sum".into(),
                arguments: "{}".into(),
            }],
            ..ChatMessage::assistant("")
        };
        let mut superseded = message(MessageKind::Dialogue, ChatMessage::assistant("old"));
        superseded.superseded_by_run = Some(Uuid::nil());
        let messages = vec![
            message(MessageKind::Dialogue, ChatMessage::user("sum 2 and 40")),
            message(MessageKind::ToolCall, call),
            message(
                MessageKind::ToolResult,
                ChatMessage::tool_result("c1", "42"),
            ),
            message(MessageKind::Dialogue, ChatMessage::assistant("It is 42.")),
            message(MessageKind::Dialogue, ChatMessage::user("thanks")),
            superseded,
            message(
                MessageKind::Dialogue,
                ChatMessage::assistant("You're welcome."),
            ),
        ];
        let text = case_toml("from use", &messages).unwrap().unwrap();
        let file: CaseFile = toml::from_str(&text).unwrap();
        let case = &file.cases[0];
        assert_eq!(case.name, "from use");
        assert_eq!(case.questions(), ["sum 2 and 40", "thanks"]);
        assert_eq!(case.expect.tools, ["demo.get-sum"]);
        assert_eq!(case.expect.answer_contains, ["You're welcome."]);
        assert_eq!(case_toml("empty", &[]).unwrap(), None);
    }
}
