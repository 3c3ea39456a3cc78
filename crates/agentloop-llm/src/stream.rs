//! Folding streamed chunks into one reply.

use agentloop_core::protocol::{ToolCall, Usage};
use agentloop_core::{LlmError, ModelReply};

use crate::exchange::{AttemptError, EventFolder, Folded};
use crate::wire::{
    Chunk, ToolCallDelta, WireError, arguments_text, call_id_or_generated, error_message,
};

/// Accumulates the deltas of a streamed completion. Only choice 0 is read: agentloop never asks
/// for more than one.
#[derive(Debug, Default)]
pub(crate) struct ReplyAssembler {
    text: String,
    calls: Vec<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    model: Option<String>,
    id: Option<String>,
}

#[derive(Debug)]
struct PartialCall {
    index: Option<usize>,
    id: String,
    name: String,
    arguments: String,
}

impl EventFolder for ReplyAssembler {
    fn push(&mut self, _event: &str, data: &str) -> Result<Folded, AttemptError> {
        if data == "[DONE]" {
            return Ok(Folded::End);
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            AttemptError::protocol(format!(
                "a stream chunk is not valid JSON ({error}): {}",
                error_message(data)
            ))
        })?;
        match self.push_chunk(chunk) {
            Ok(Some(text)) => Ok(Folded::Text(text)),
            Ok(None) => Ok(Folded::Nothing),
            Err(error) => Err(AttemptError::from_wire_error(error)),
        }
    }

    fn finish(self) -> Result<ModelReply, LlmError> {
        ReplyAssembler::finish(self)
    }
}

impl ReplyAssembler {
    /// Folds one chunk in and returns its text, if any, for the caller to show. An error object
    /// inside the stream is returned as is.
    pub fn push_chunk(&mut self, chunk: Chunk) -> Result<Option<String>, WireError> {
        if let Some(error) = chunk.error {
            return Err(error);
        }
        if let Some(usage) = chunk.usage {
            self.usage = Some(usage.into());
        }
        if let Some(model) = chunk.model.filter(|model| !model.is_empty()) {
            self.model = Some(model);
        }
        if let Some(id) = chunk.id.filter(|id| !id.is_empty()) {
            self.id = Some(id);
        }
        let mut text: Option<String> = None;
        for choice in chunk.choices.into_iter().filter(|choice| choice.index == 0) {
            if let Some(delta) = choice.delta {
                if let Some(content) = delta.content.filter(|content| !content.is_empty()) {
                    self.text.push_str(&content);
                    text.get_or_insert_with(String::new).push_str(&content);
                }
                for call in delta.tool_calls.unwrap_or_default() {
                    self.push_call(call);
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|reason| !reason.is_empty()) {
                self.finish_reason = Some(reason);
            }
        }
        Ok(text)
    }

    /// The reply, once the stream is over. Without a `finish_reason` the stream was cut and the
    /// reply may be missing text or half a tool call, so it is refused.
    pub fn finish(self) -> Result<ModelReply, LlmError> {
        let Some(finish_reason) = self.finish_reason else {
            return Err(LlmError::TruncatedStream);
        };
        let tool_calls = self
            .calls
            .into_iter()
            .enumerate()
            .map(|(position, call)| ToolCall {
                id: call_id_or_generated(Some(call.id), position),
                name: call.name,
                arguments: call.arguments,
            })
            .collect();
        Ok(ModelReply {
            content: (!self.text.is_empty()).then_some(self.text),
            tool_calls,
            finish_reason: Some(finish_reason),
            usage: self.usage,
            model: self.model,
            id: self.id,
        })
    }

    fn push_call(&mut self, delta: ToolCallDelta) {
        let id = delta.id.filter(|id| !id.is_empty());
        let position = self.position_for(delta.index, id.as_deref());
        let call = &mut self.calls[position];
        if let Some(id) = id {
            call.id = id;
        }
        let Some(function) = delta.function else {
            return;
        };
        if let Some(name) = function.name.filter(|name| !name.is_empty()) {
            // Servers that repeat the name in every delta must not make it "readread".
            if call.name.is_empty() {
                call.name = name;
            } else if call.name != name {
                call.name.push_str(&name);
            }
        }
        call.arguments.push_str(&arguments_text(function.arguments));
    }

    /// Where a delta belongs: the latest call with its `index` (or the latest call at all when
    /// the server sends no index), unless it carries a new id — some servers number every call
    /// 0 and tell them apart only by id.
    fn position_for(&mut self, index: Option<usize>, id: Option<&str>) -> usize {
        let latest = self
            .calls
            .iter()
            .rposition(|call| index.is_none() || call.index == index);
        let same_call = latest.filter(|&position| match id {
            Some(id) => {
                let known = &self.calls[position].id;
                known.is_empty() || known == id
            }
            None => true,
        });
        match same_call {
            Some(position) => position,
            None => {
                self.calls.push(PartialCall {
                    index,
                    id: String::new(),
                    name: String::new(),
                    arguments: String::new(),
                });
                self.calls.len() - 1
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn assemble(chunks: &[Value]) -> (Vec<String>, Result<ModelReply, LlmError>) {
        let mut assembler = ReplyAssembler::default();
        let mut texts = Vec::new();
        for chunk in chunks {
            let chunk: Chunk = serde_json::from_value(chunk.clone()).unwrap();
            if let Some(text) = assembler.push_chunk(chunk).unwrap() {
                texts.push(text);
            }
        }
        (texts, assembler.finish())
    }

    fn delta(delta: Value) -> Value {
        json!({"object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    }

    fn finish(reason: &str) -> Value {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    }

    #[test]
    fn text_deltas_are_passed_on_and_concatenated() {
        let (texts, reply) = assemble(&[
            delta(json!({"role": "assistant", "content": ""})),
            delta(json!({"content": "Hel"})),
            delta(json!({"content": "lo"})),
            finish("stop"),
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
        ]);
        assert_eq!(texts, ["Hel", "lo"]);
        let reply = reply.unwrap();
        assert_eq!(reply.content.as_deref(), Some("Hello"));
        assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
        assert_eq!(
            reply.usage,
            Some(Usage {
                prompt_tokens: 12,
                completion_tokens: 3,
                ..Usage::default()
            })
        );
    }

    #[test]
    fn parallel_tool_calls_are_assembled_by_index() {
        let (texts, reply) = assemble(&[
            delta(json!({"tool_calls": [
                {"index": 0, "id": "call_a", "type": "function", "function": {"name": "read", "arguments": ""}}
            ]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "{\"pa"}}]})),
            delta(json!({"tool_calls": [
                {"index": 1, "id": "call_b", "type": "function", "function": {"name": "list", "arguments": "{}"}}
            ]})),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": "th\":\"a\"}"}}]})),
            finish("tool_calls"),
        ]);
        assert!(texts.is_empty());
        let reply = reply.unwrap();
        assert_eq!(
            reply.tool_calls,
            vec![
                ToolCall {
                    id: "call_a".into(),
                    name: "read".into(),
                    arguments: r#"{"path":"a"}"#.into()
                },
                ToolCall {
                    id: "call_b".into(),
                    name: "list".into(),
                    arguments: "{}".into()
                },
            ]
        );
        assert_eq!(reply.content, None);
    }

    #[test]
    fn repeated_ids_and_names_are_not_duplicated() {
        let (_, reply) = assemble(&[
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read", "arguments": "{\"a\":"}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "read", "arguments": "1}"}}]}),
            ),
            finish("tool_calls"),
        ]);
        let calls = reply.unwrap().tool_calls;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].name, "read");
        assert_eq!(calls[0].arguments, r#"{"a":1}"#);
    }

    #[test]
    fn calls_that_all_claim_index_zero_are_told_apart_by_id() {
        let (_, reply) = assemble(&[
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "a", "arguments": "{}"}}]}),
            ),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c2", "function": {"name": "b", "arguments": "{\"x\""}}]}),
            ),
            delta(json!({"tool_calls": [{"index": 0, "function": {"arguments": ":1}"}}]})),
            finish("tool_calls"),
        ]);
        let calls = reply.unwrap().tool_calls;
        let summary: Vec<(&str, &str, &str)> = calls
            .iter()
            .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
            .collect();
        assert_eq!(summary, [("c1", "a", "{}"), ("c2", "b", r#"{"x":1}"#)]);
    }

    #[test]
    fn whole_calls_without_index_or_id_get_generated_ids() {
        let (_, reply) = assemble(&[
            delta(json!({"tool_calls": [{"function": {"name": "a", "arguments": {"k": 1}}}]})),
            finish("tool_calls"),
        ]);
        let calls = reply.unwrap().tool_calls;
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].arguments, r#"{"k":1}"#);
        assert!(!calls[0].id.is_empty());
    }

    #[test]
    fn a_stream_without_finish_reason_is_truncated() {
        let (_, reply) = assemble(&[
            delta(json!({"content": "partial"})),
            delta(
                json!({"tool_calls": [{"index": 0, "id": "c1", "function": {"name": "a", "arguments": "{\"x"}}]}),
            ),
        ]);
        assert_eq!(reply, Err(LlmError::TruncatedStream));
    }

    #[test]
    fn an_error_object_in_the_stream_is_returned() {
        let mut assembler = ReplyAssembler::default();
        let chunk: Chunk =
            serde_json::from_value(json!({"error": {"message": "overloaded", "code": 503}}))
                .unwrap();
        let error = assembler.push_chunk(chunk).unwrap_err();
        assert_eq!(error.message.as_deref(), Some("overloaded"));
        assert_eq!(error.status(), Some(503));
    }

    #[test]
    fn null_fields_and_unknown_fields_are_tolerated() {
        let (texts, reply) = assemble(&[
            json!({"choices": [{"index": 0, "delta": {"content": null, "reasoning_content": "hmm", "tool_calls": null}, "finish_reason": null}], "usage": null}),
            json!({"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}),
        ]);
        assert_eq!(texts, ["ok"]);
        assert_eq!(reply.unwrap().usage, None);
    }
}
