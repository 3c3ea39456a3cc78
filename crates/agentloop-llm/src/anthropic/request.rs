//! The body of `POST /v1/messages`, built from a [`ModelRequest`] of chat messages written by
//! any provider.
//!
//! - System messages before the conversation become the top-level `system` blocks, in order
//!   (the stable system prompt, then the plan block or the JSON-planner prompt); a system message
//!   inside the conversation (a note after tool results, the closing instruction of a summary, a
//!   plan or a review) becomes a text block of the user turn at its place, marked as coming from
//!   the system, since Anthropic has no system role in `messages`.
//! - An assistant turn becomes `text` and `tool_use` blocks; the tool messages after it become
//!   `tool_result` blocks of one user message, in the order of the calls (`is_error` for results
//!   the loop wrote as errors), with the images a tool returned as `image` blocks of its result.
//! - A user's attachments are `image` and `document` blocks after the message's text.
//! - Messages of one role in a row merge into one message: Anthropic wants the roles to
//!   alternate, beginning with the user.
//! - A call offered no tools (a plan, a review) shows earlier tool calls and results as text:
//!   Anthropic refuses `tool_use` blocks in a request that defines no tools.
//! - Prompt caching: `cache_control` on the last tool and on the first system block, the prefix
//!   every call of a run shares, so later calls read it from the cache.

use agentloop_core::protocol::{ChatMessage, Role, ToolCall};
use agentloop_core::{ModelRequest, ToolChoice, is_tool_error_message};
use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::attachments;

#[derive(Debug, Serialize)]
pub(crate) struct MessagesRequest<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub system: Vec<Value>,
    pub messages: Vec<Message>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<Value>,
    pub stream: bool,
    /// `{format: {type: json_schema, schema}}`: structured output (JSON outputs), only on a
    /// call that asks for the typed answer and offers no tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output_config: Option<Value>,
}

/// One message of `messages`: a role and its content blocks.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct Message {
    pub role: &'static str,
    pub content: Vec<Value>,
}

/// The request options that do not come from the loop.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Options<'a> {
    pub model: &'a str,
    pub max_tokens: u32,
    pub stream: bool,
    pub cache: bool,
}

const USER: &str = "user";
const ASSISTANT: &str = "assistant";

impl<'a> MessagesRequest<'a> {
    pub fn new(request: &'a ModelRequest, options: Options<'a>) -> Self {
        let leading = request
            .messages
            .iter()
            .take_while(|message| message.role == Role::System)
            .count();
        let mut system: Vec<Value> = request.messages[..leading]
            .iter()
            .filter(|message| !message.text_content().is_empty())
            .map(|message| json!({"type": "text", "text": message.text_content()}))
            .collect();
        let as_blocks = !request.tools.is_empty();
        let mut messages = Vec::new();
        for message in &request.messages[leading..] {
            push(&mut messages, convert(message, as_blocks));
        }
        order_tool_results(&mut messages);
        if messages.first().is_none_or(|first| first.role != USER) {
            // The window may begin after the user's question; Anthropic wants a user first.
            let opening = text_block("(The conversation so far continues below.)");
            messages.insert(
                0,
                Message {
                    role: USER,
                    content: vec![opening],
                },
            );
        }
        let mut tools: Vec<Value> = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters.as_ref(),
                })
            })
            .collect();
        if options.cache {
            // A breakpoint caches everything before it: tools, then the stable system prompt.
            if let Some(last) = tools.last_mut() {
                last["cache_control"] = ephemeral();
            }
            if let Some(first) = system.first_mut() {
                first["cache_control"] = ephemeral();
            }
        }
        let tool_choice = (!tools.is_empty()).then(|| match request.tool_choice {
            ToolChoice::Auto => json!({"type": "auto"}),
            ToolChoice::None => json!({"type": "none"}),
        });
        Self {
            model: request.model.as_deref().unwrap_or(options.model),
            max_tokens: options.max_tokens,
            system,
            messages,
            tools,
            tool_choice,
            stream: options.stream,
            output_config: request
                .native_output()
                .map(|spec| json!({"format": {"type": "json_schema", "schema": spec.schema}})),
        }
    }
}

fn ephemeral() -> Value {
    json!({"type": "ephemeral"})
}

fn text_block(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// One stored message as an Anthropic message (its role and blocks), before merging.
fn convert(message: &ChatMessage, as_blocks: bool) -> Message {
    let text = message.text_content();
    match message.role {
        Role::User => {
            let mut content = non_empty_text(text);
            content.extend(attachments::anthropic_blocks(&message.attachments));
            Message {
                role: USER,
                content,
            }
        }
        Role::System => Message {
            role: USER,
            content: non_empty_text(text)
                .into_iter()
                .map(|_| text_block(&format!("<system>\n{text}\n</system>")))
                .collect(),
        },
        Role::Assistant => {
            let mut content = non_empty_text(text);
            for call in &message.tool_calls {
                content.push(if as_blocks {
                    tool_use_block(call)
                } else {
                    text_block(&format!(
                        "[called the tool {} with the arguments {} (call {})]",
                        call.name, call.arguments, call.id
                    ))
                });
            }
            Message {
                role: ASSISTANT,
                content,
            }
        }
        Role::Tool => {
            let id = message.tool_call_id.as_deref().unwrap_or_default();
            let block = if as_blocks {
                let mut block = json!({"type": "tool_result", "tool_use_id": tool_use_id(id)});
                // Anthropic refuses an empty text; a result without content is allowed. Images
                // a tool returned are blocks of its result.
                if !message.attachments.is_empty() {
                    let mut content = non_empty_text(text);
                    content.extend(attachments::anthropic_blocks(&message.attachments));
                    block["content"] = Value::from(content);
                } else if !text.is_empty() {
                    block["content"] = Value::from(text);
                }
                if is_tool_error_message(text) {
                    block["is_error"] = Value::Bool(true);
                }
                block
            } else {
                text_block(&format!("[result of the call {id}]\n{text}"))
            };
            let mut content = vec![block];
            if !as_blocks {
                content.extend(attachments::anthropic_blocks(&message.attachments));
            }
            Message {
                role: USER,
                content,
            }
        }
    }
}

fn non_empty_text(text: &str) -> Vec<Value> {
    if text.trim().is_empty() {
        Vec::new()
    } else {
        vec![text_block(text)]
    }
}

/// Appends `message`, merged into the last one when the role repeats; empty messages (an
/// assistant turn that said nothing) disappear.
fn push(messages: &mut Vec<Message>, message: Message) {
    if message.content.is_empty() {
        return;
    }
    match messages.last_mut() {
        Some(last) if last.role == message.role => last.content.extend(message.content),
        _ => messages.push(message),
    }
}

/// Within each user message, the `tool_result` blocks first, in the order of the `tool_use`
/// blocks of the assistant turn before it (Anthropic wants results before any text).
fn order_tool_results(messages: &mut [Message]) {
    for pair in 1..messages.len() {
        let order: Vec<Value> = messages[pair - 1]
            .content
            .iter()
            .filter(|block| block["type"] == "tool_use")
            .map(|block| block["id"].clone())
            .collect();
        let user = &mut messages[pair];
        if user.role != USER || order.is_empty() {
            continue;
        }
        let rank = |block: &Value| match block["type"].as_str() {
            Some("tool_result") => order
                .iter()
                .position(|id| *id == block["tool_use_id"])
                .unwrap_or(order.len()),
            _ => usize::MAX,
        };
        user.content.sort_by_key(rank);
    }
}

fn tool_use_block(call: &ToolCall) -> Value {
    json!({
        "type": "tool_use",
        "id": tool_use_id(&call.id),
        "name": call.name,
        "input": input_object(&call.arguments),
    })
}

/// Anthropic's `input` must be an object; arguments written by another provider may be any
/// text (broken JSON the loop already answered with an error), kept under `arguments`.
fn input_object(arguments: &str) -> Value {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(object)) => Value::Object(object),
        _ if arguments.trim().is_empty() => Value::Object(Map::new()),
        _ => json!({"arguments": arguments}),
    }
}

/// Anthropic's ids match `^[a-zA-Z0-9_-]+$`; ids written by other servers may not. The same
/// mapping is applied to the call and to its result, so they still pair.
fn tool_use_id(id: &str) -> String {
    let safe: String = id
        .chars()
        .map(|ch| {
            if ch.is_ascii_alphanumeric() || ch == '_' || ch == '-' {
                ch
            } else {
                '_'
            }
        })
        .collect();
    if safe.is_empty() {
        "call".to_owned()
    } else {
        safe
    }
}

/// An assistant turn of the reply, as sent back to continue a paused turn.
pub(crate) fn assistant_message(text: Option<&str>, calls: &[ToolCall]) -> Message {
    let mut content = non_empty_text(text.unwrap_or_default());
    content.extend(calls.iter().map(tool_use_block));
    Message {
        role: ASSISTANT,
        content,
    }
}
