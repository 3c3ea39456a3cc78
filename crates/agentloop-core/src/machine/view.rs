//! What the model sees: the stable system prompt first, then the conversation with tool results
//! bounded and tool names in their provider-safe spelling.

use agentloop_protocol::{ChatMessage, FinalizeReason, Role, ToolCall};

use super::{RunMachine, text};
use crate::llm::{CallPurpose, ModelRequest, ToolChoice};

pub(super) fn build_request(
    machine: &RunMachine,
    tool_choice: ToolChoice,
    purpose: CallPurpose,
    finalize: Option<FinalizeReason>,
) -> ModelRequest {
    let max_chars = machine.settings.tool_output_max_chars;
    let mut messages = Vec::with_capacity(machine.input.history.len() + machine.turn.len() + 2);
    messages.push(ChatMessage::system(machine.input.system_prompt.clone()));
    for message in machine.input.history.iter().chain(&machine.turn) {
        messages.push(for_model(machine, message, max_chars));
    }
    if let Some(reason) = finalize {
        messages.push(ChatMessage::system(text::finalize_instruction(reason)));
    }
    ModelRequest {
        model: machine.input.model.clone(),
        messages,
        tools: machine
            .offered_entries()
            .map(|entry| entry.spec())
            .collect(),
        tool_choice,
        purpose,
    }
}

fn for_model(machine: &RunMachine, message: &ChatMessage, max_chars: usize) -> ChatMessage {
    let content = match (message.role, &message.content) {
        (Role::Tool, Some(content)) => Some(text::bound(content, max_chars)),
        (_, content) => content.clone(),
    };
    ChatMessage {
        role: message.role,
        content,
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: machine.catalog.provider_name(&call.name),
                arguments: call.arguments.clone(),
            })
            .collect(),
        tool_call_id: message.tool_call_id.clone(),
    }
}
