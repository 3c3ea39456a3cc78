//! Messages in the shape of the GenAI conventions' opt-in content attributes
//! (`gen_ai.system_instructions`, `gen_ai.input.messages`, `gen_ai.output.messages`): JSON
//! arrays of messages, each a role and its parts.

use std::sync::Arc;

use agentloop_core::{
    ModelReply,
    protocol::{ChatMessage, Role, ToolCall},
};
use serde_json::{Value, json};

/// The system instructions (when there are any) and the other messages of a request.
pub(super) fn input_messages(messages: &[Arc<ChatMessage>]) -> (Option<String>, String) {
    let instructions: Vec<Value> = messages
        .iter()
        .filter(|message| message.role == Role::System)
        .filter_map(|message| message.content.as_deref())
        .map(|text| json!({"type": "text", "content": text}))
        .collect();
    let conversation: Vec<Value> = messages
        .iter()
        .filter(|message| message.role != Role::System)
        .map(|message| message_json(message, None))
        .collect();
    let instructions = (!instructions.is_empty()).then(|| Value::Array(instructions).to_string());
    (instructions, Value::Array(conversation).to_string())
}

/// The reply as the one output message.
pub(super) fn output_messages(reply: &ModelReply) -> String {
    let message = ChatMessage {
        role: Role::Assistant,
        content: reply.content.clone(),
        tool_calls: reply.tool_calls.clone(),
        tool_call_id: None,
        attachments: Vec::new(),
    };
    let finish = reply.finish_reason.as_deref().unwrap_or("stop");
    Value::Array(vec![message_json(&message, Some(finish))]).to_string()
}

fn message_json(message: &ChatMessage, finish_reason: Option<&str>) -> Value {
    let mut parts = Vec::new();
    match (&message.role, &message.tool_call_id) {
        (Role::Tool, Some(id)) => parts.push(json!({
            "type": "tool_call_response",
            "id": id,
            "response": message.content.as_deref().unwrap_or_default(),
        })),
        _ => {
            if let Some(text) = message.content.as_deref().filter(|text| !text.is_empty()) {
                parts.push(json!({"type": "text", "content": text}));
            }
        }
    }
    parts.extend(message.tool_calls.iter().map(tool_call_part));
    let mut value = json!({"role": message.role.as_str(), "parts": parts});
    if let Some(reason) = finish_reason {
        value["finish_reason"] = json!(reason);
    }
    value
}

fn tool_call_part(call: &ToolCall) -> Value {
    // Arguments are JSON text from the model; kept as text when they are not JSON.
    let arguments = serde_json::from_str::<Value>(&call.arguments)
        .unwrap_or_else(|_| Value::String(call.arguments.clone()));
    json!({"type": "tool_call", "id": call.id, "name": call.name, "arguments": arguments})
}
