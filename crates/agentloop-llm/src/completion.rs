//! Reading a whole (non-streamed) completion.

use agentloop_core::ModelReply;
use agentloop_core::protocol::ToolCall;

use crate::exchange::{AttemptError, Dialect, parse_json};
use crate::stream::ReplyAssembler;
use crate::wire::{Completion, WireError, arguments_text, call_id_or_generated};

/// The Chat Completions wire format of replies.
pub(crate) struct ChatDialect;

impl Dialect for ChatDialect {
    type Folder = ReplyAssembler;

    fn folder(&self) -> ReplyAssembler {
        ReplyAssembler::default()
    }

    fn read_body(&self, body: &[u8]) -> Result<ModelReply, AttemptError> {
        let completion: Completion = parse_json(body, "the completion")?;
        into_reply(completion).map_err(|error| match error {
            CompletionError::Provider(error) => AttemptError::from_wire_error(error),
            CompletionError::NoChoices => {
                AttemptError::protocol("the completion has no choices".into())
            }
        })
    }
}

/// Why a completion body is not a reply.
#[derive(Debug)]
pub(crate) enum CompletionError {
    /// The server answered with an error object.
    Provider(WireError),
    NoChoices,
}

pub(crate) fn into_reply(completion: Completion) -> Result<ModelReply, CompletionError> {
    if let Some(error) = completion.error {
        return Err(CompletionError::Provider(error));
    }
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(CompletionError::NoChoices);
    };
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .enumerate()
        .map(|(position, call)| ToolCall {
            id: call_id_or_generated(call.id, position),
            name: call.function.name,
            arguments: arguments_text(call.function.arguments),
        })
        .collect();
    Ok(ModelReply {
        content: choice.message.content.filter(|text| !text.is_empty()),
        tool_calls,
        finish_reason: choice.finish_reason,
        usage: completion.usage.map(Into::into),
        model: completion.model.filter(|model| !model.is_empty()),
        id: completion.id.filter(|id| !id.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentloop_core::protocol::Usage;
    use serde_json::json;

    fn reply(body: serde_json::Value) -> Result<ModelReply, CompletionError> {
        into_reply(serde_json::from_value(body).unwrap())
    }

    #[test]
    fn text_tool_calls_and_usage_are_read() {
        let reply = reply(json!({
            "id": "chatcmpl-1", "object": "chat.completion",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": "Let me look.",
                "tool_calls": [{"id": "call_x", "type": "function",
                                "function": {"name": "read", "arguments": "{\"p\":1}"}}]
            }}],
            "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27}
        }))
        .unwrap();
        assert_eq!(reply.content.as_deref(), Some("Let me look."));
        assert_eq!(
            reply.tool_calls,
            vec![ToolCall {
                id: "call_x".into(),
                name: "read".into(),
                arguments: r#"{"p":1}"#.into()
            }]
        );
        assert_eq!(reply.finish_reason.as_deref(), Some("tool_calls"));
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 20,
                completion_tokens: 7,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn null_tool_calls_and_missing_ids_are_tolerated() {
        let plain = reply(json!({"choices": [{"message": {"content": "hi", "tool_calls": null}}]}))
            .unwrap();
        assert!(plain.tool_calls.is_empty());
        let unnamed = reply(
            json!({"choices": [{"message": {"content": null, "tool_calls": [
                {"function": {"name": "a", "arguments": "{}"}},
                {"id": "", "function": {"name": "b", "arguments": "{}"}}
            ]}}]}),
        )
        .unwrap();
        let ids: Vec<&str> = unnamed.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_1", "call_2"]);
    }

    #[test]
    fn error_objects_and_empty_choices_are_errors() {
        assert!(matches!(
            reply(json!({"error": {"message": "nope"}})),
            Err(CompletionError::Provider(error)) if error.message.as_deref() == Some("nope")
        ));
        assert!(matches!(
            reply(json!({"choices": []})),
            Err(CompletionError::NoChoices)
        ));
    }
}
