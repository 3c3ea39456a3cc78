//! A run's steps as the messages of MCP `notifications/progress`: one line per step a person
//! follows (the model thinking, a tool called, a tool done, a question, ...). Pure: an event
//! in, a message or nothing out. Text the model streams (`assistant_delta`, `final_response`,
//! `output_delta`) and bookkeeping (`llm_call`, `done`) are no steps.
//!
//! A sub-agent's events (`parent_run_id`) are steps too, named by the sub-agent's tool call
//! that its caller made.

use agentloop_core::protocol::{Event, EventKind, InputKind, ToolStatus};

/// The longest tool result or error quoted in a message, in characters.
const QUOTED: usize = 200;

/// The message of `event`'s step, if it is one.
pub fn step_message(event: &Event) -> Option<String> {
    let prefix = if event.parent_run_id.is_some() {
        "(sub-agent) "
    } else {
        ""
    };
    let message = match &event.kind {
        EventKind::RunStarted { .. } => String::from("run started"),
        EventKind::Thinking { iteration } => format!("thinking (step {iteration})"),
        EventKind::ToolSelected {
            tool, arguments, ..
        } => format!("calling {tool} {}", shortened(&arguments.to_string())),
        EventKind::ToolExecuted {
            tool,
            status,
            duration_ms,
            result,
            error,
            ..
        } => match status {
            ToolStatus::Success => format!(
                "{tool} done in {duration_ms} ms: {}",
                shortened(result.as_deref().unwrap_or_default())
            ),
            ToolStatus::Error => format!(
                "{tool} failed: {}",
                shortened(error.as_deref().unwrap_or("an error"))
            ),
            ToolStatus::Blocked => format!(
                "{tool} refused: {}",
                shortened(error.as_deref().unwrap_or("not allowed"))
            ),
            ToolStatus::Skipped => format!("{tool} skipped"),
        },
        EventKind::ToolProgress {
            tool,
            progress,
            total,
            message,
            ..
        } => {
            let done = match total {
                Some(total) => format!("{progress}/{total}"),
                None => format!("{progress}"),
            };
            match message {
                Some(message) => format!("{tool}: {done} {}", shortened(message)),
                None => format!("{tool}: {done}"),
            }
        }
        EventKind::SideEffect { tool, note, .. } => format!("{tool}: {}", shortened(note)),
        EventKind::DuplicateDetected { tool, .. } => {
            format!("{tool}: the same call again, not repeated")
        }
        EventKind::ForcedFinalize { reason } => {
            format!("writing the answer now ({})", reason.as_str())
        }
        EventKind::UserMessage { text } => format!("message taken: {}", shortened(text)),
        EventKind::RunResumed { .. } => String::from("run resumed"),
        EventKind::PlanUpdated { plan } => {
            format!("plan: {}", shortened(&plan.goal))
        }
        EventKind::InputRequired {
            kind,
            question,
            elicitation,
            ..
        } => match kind {
            InputKind::Clarification => format!(
                "question for you: {}",
                question.as_deref().unwrap_or_default()
            ),
            InputKind::Approval => String::from("waiting for approval"),
            InputKind::Elicitation => format!(
                "a tool asks: {}",
                elicitation
                    .as_ref()
                    .map_or("", |asked| asked.message.as_str())
            ),
        },
        EventKind::GuardrailTripped { name, reason, .. } => {
            format!("guardrail {name}: {}", shortened(reason))
        }
        EventKind::AnswerRetracted { name } => format!("answer retracted by guardrail {name}"),
        EventKind::AssistantDelta { .. }
        | EventKind::FinalResponse { .. }
        | EventKind::OutputDelta { .. }
        | EventKind::LlmCall { .. }
        | EventKind::GuardrailChecked { .. }
        | EventKind::Done { .. }
        | EventKind::Error { .. } => return None,
    };
    Some(format!("{prefix}{message}"))
}

/// `text` on one line, cut at [`QUOTED`] characters.
fn shortened(text: &str) -> String {
    let line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match line.char_indices().nth(QUOTED) {
        Some((end, _)) => format!("{}…", &line[..end]),
        None => line,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use agentloop_core::protocol::{RunStatus, Usage};
    use serde_json::json;
    use uuid::Uuid;

    fn event(kind: EventKind) -> Event {
        Event {
            run_id: Uuid::nil(),
            seq: 1,
            parent_run_id: None,
            kind,
        }
    }

    #[test]
    fn a_tool_call_is_two_steps_and_its_result_is_quoted_short() {
        let selected = event(EventKind::ToolSelected {
            iteration: 1,
            call_id: "c1".into(),
            tool: "test.echo".into(),
            arguments: json!({"text": "hi"}),
        });
        assert_eq!(
            step_message(&selected).unwrap(),
            r#"calling test.echo {"text":"hi"}"#
        );
        let long = "x".repeat(500);
        let executed = event(EventKind::ToolExecuted {
            call_id: "c1".into(),
            tool: "test.echo".into(),
            status: ToolStatus::Success,
            duration_ms: 12,
            result: Some(long),
            error: None,
        });
        let message = step_message(&executed).unwrap();
        assert!(
            message.starts_with("test.echo done in 12 ms: xxx"),
            "{message}"
        );
        assert!(
            message.ends_with('…') && message.chars().count() < 260,
            "{message}"
        );
        let failed = event(EventKind::ToolExecuted {
            call_id: "c2".into(),
            tool: "test.fail".into(),
            status: ToolStatus::Error,
            duration_ms: 1,
            result: None,
            error: Some("boom\nat line 2".into()),
        });
        assert_eq!(
            step_message(&failed).unwrap(),
            "test.fail failed: boom at line 2"
        );
    }

    #[test]
    fn streamed_text_and_the_end_are_no_steps() {
        for kind in [
            EventKind::AssistantDelta { text: "a".into() },
            EventKind::FinalResponse { delta: "b".into() },
            EventKind::Done {
                status: RunStatus::Completed,
                iterations: 1,
                tools_used: 0,
                message_id: None,
                usage: Usage::default(),
                should_refresh: false,
                output: None,
            },
        ] {
            assert_eq!(step_message(&event(kind)), None);
        }
    }

    #[test]
    fn a_question_and_a_sub_agents_step_say_so() {
        let question = event(EventKind::InputRequired {
            kind: InputKind::Clarification,
            question: Some("Which city?".into()),
            calls: Vec::new(),
            elicitation: None,
        });
        assert_eq!(
            step_message(&question).unwrap(),
            "question for you: Which city?"
        );
        let mut nested = event(EventKind::Thinking { iteration: 2 });
        nested.parent_run_id = Some(Uuid::nil());
        assert_eq!(
            step_message(&nested).unwrap(),
            "(sub-agent) thinking (step 2)"
        );
    }
}
