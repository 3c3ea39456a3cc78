//! The body of `POST {base_url}/responses`, built from a [`ModelRequest`] of chat messages
//! written by any provider: system, user and assistant text as `message` items, tool calls as
//! `function_call` items (after the reasoning items that led to them, when this client saw that
//! reply), tool results as `function_call_output` items. Attachments go as `input_image` and
//! `input_file` content, in a user message or in a tool's output.

use agentloop_core::protocol::Role;
use agentloop_core::{ModelRequest, ToolChoice};
use serde::Serialize;
use serde_json::{Value, json};

use super::reasoning::ReasoningCache;
use crate::attachments;

#[derive(Debug, Serialize)]
pub(crate) struct ResponsesRequest<'a> {
    pub model: &'a str,
    pub input: Vec<Value>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    pub stream: bool,
    /// Stateless: OpenAI keeps nothing; what the next call needs is sent again.
    pub store: bool,
    /// The reasoning items come back encrypted, to be sent with the next call of the run.
    pub include: [&'static str; 1],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// `{format: {type: json_schema, ...}}`: structured output, only on a call that asks for
    /// the typed answer and offers no tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<Value>,
}

impl<'a> ResponsesRequest<'a> {
    pub fn new(
        request: &'a ModelRequest,
        model: &'a str,
        stream: bool,
        max_output_tokens: Option<u32>,
        reasoning: &ReasoningCache,
    ) -> Self {
        let mut input = Vec::new();
        for message in &request.messages {
            let text = message.text_content();
            match message.role {
                Role::User if !message.attachments.is_empty() => {
                    input.push(json!({
                        "type": "message",
                        "role": "user",
                        "content": attachments::responses_parts(text, &message.attachments),
                    }));
                }
                Role::System | Role::User => {
                    input.push(json!({
                        "type": "message",
                        "role": message.role.as_str(),
                        "content": text,
                    }));
                }
                Role::Assistant => {
                    if let Some(first) = message.tool_calls.first() {
                        input.extend(reasoning.items_before(&first.id));
                    }
                    if !text.is_empty() {
                        input
                            .push(json!({"type": "message", "role": "assistant", "content": text}));
                    }
                    for call in &message.tool_calls {
                        input.push(json!({
                            "type": "function_call",
                            "call_id": call.id,
                            "name": call.name,
                            "arguments": call.arguments,
                        }));
                    }
                }
                Role::Tool => input.push(json!({
                    "type": "function_call_output",
                    "call_id": message.tool_call_id.as_deref().unwrap_or_default(),
                    // With images, the output is content: its text, then the images.
                    "output": match message.attachments.is_empty() {
                        true => Value::from(text),
                        false => Value::from(attachments::responses_parts(
                            text,
                            &message.attachments,
                        )),
                    },
                })),
            }
        }
        let tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters.as_ref(),
                    // The loop validates arguments against the schema itself; strict mode would
                    // reject the many MCP schemas that are not in OpenAI's strict subset.
                    "strict": false,
                })
            })
            .collect();
        let tool_choice = (!tools.is_empty()).then_some(match request.tool_choice {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        });
        Self {
            model: request.model.as_deref().unwrap_or(model),
            input,
            tools,
            tool_choice,
            stream,
            store: false,
            include: ["reasoning.encrypted_content"],
            max_output_tokens,
            text: request.native_output().map(|spec| {
                json!({"format": {
                    "type": "json_schema",
                    "name": spec.name,
                    "schema": spec.schema,
                    "strict": spec.strict,
                }})
            }),
        }
    }
}
