//! Serde shapes of the Chat Completions API: the request we send, the completion and stream
//! chunks we read. Reading is lenient (missing fields default, `null` is accepted where servers
//! disagree) because many OpenAI-compatible servers differ in details.

use agentloop_core::protocol::{ChatMessage, Role, ToolCall, Usage};
use agentloop_core::{ModelRequest, ToolChoice};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::attachments;

#[derive(Debug, Serialize)]
pub(crate) struct ChatRequest<'a> {
    pub model: &'a str,
    pub messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<&'static str>,
    pub stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// Only when `llm.max_tokens` is set: servers have their own defaults.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Structured output, only on a call that asks for the typed answer and offers no tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
}

#[derive(Debug, Serialize)]
pub(crate) struct StreamOptions {
    pub include_usage: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireMessage<'a> {
    pub role: &'static str,
    /// Always present: `null` only for an assistant turn that is nothing but tool calls, since
    /// some servers reject a missing or null `content` elsewhere.
    pub content: Option<WireContent<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<WireToolCall<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<&'a str>,
}

/// A message's content: text, or content parts (a user message with attachments).
#[derive(Debug, Serialize)]
#[serde(untagged)]
pub(crate) enum WireContent<'a> {
    Text(&'a str),
    Parts(Vec<Value>),
}

#[derive(Debug, Serialize)]
pub(crate) struct WireToolCall<'a> {
    pub id: &'a str,
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireFunction<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireFunction<'a> {
    pub name: &'a str,
    pub arguments: &'a str,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireTool<'a> {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub function: WireToolFunction<'a>,
}

#[derive(Debug, Serialize)]
pub(crate) struct WireToolFunction<'a> {
    pub name: &'a str,
    pub description: &'a str,
    pub parameters: &'a Value,
}

impl<'a> ChatRequest<'a> {
    pub fn new(
        request: &'a ModelRequest,
        default_model: &'a str,
        stream: bool,
        max_tokens: Option<u32>,
    ) -> Self {
        let tools: Vec<WireTool<'a>> = request
            .tools
            .iter()
            .map(|tool| WireTool {
                kind: "function",
                function: WireToolFunction {
                    name: &tool.name,
                    description: &tool.description,
                    parameters: &tool.parameters,
                },
            })
            .collect();
        // Some servers reject `tool_choice` without `tools`.
        let tool_choice = (!tools.is_empty()).then_some(match request.tool_choice {
            ToolChoice::Auto => "auto",
            ToolChoice::None => "none",
        });
        Self {
            model: request.model.as_deref().unwrap_or(default_model),
            messages: wire_messages(request),
            tools,
            tool_choice,
            stream,
            stream_options: stream.then_some(StreamOptions {
                include_usage: true,
            }),
            max_tokens,
            response_format: request.native_output().map(|spec| {
                serde_json::json!({
                    "type": "json_schema",
                    "json_schema": {"name": spec.name, "schema": spec.schema, "strict": spec.strict},
                })
            }),
        }
    }
}

/// The messages of the request. A tool message holds text only: the images tool results
/// returned follow the results of their reply as one user message.
fn wire_messages(request: &ModelRequest) -> Vec<WireMessage<'_>> {
    let mut messages = Vec::with_capacity(request.messages.len());
    let mut tool_images: Vec<Value> = Vec::new();
    for message in &request.messages {
        if message.role != Role::Tool && !tool_images.is_empty() {
            messages.push(WireMessage::parts(std::mem::take(&mut tool_images)));
        }
        if message.role == Role::Tool && !message.attachments.is_empty() {
            let id = message.tool_call_id.as_deref().unwrap_or_default();
            tool_images.extend(attachments::chat_parts(
                &format!("The tool call {id} returned:"),
                &message.attachments,
            ));
        }
        messages.push(WireMessage::from(message.as_ref()));
    }
    if !tool_images.is_empty() {
        messages.push(WireMessage::parts(tool_images));
    }
    messages
}

impl WireMessage<'_> {
    fn parts(parts: Vec<Value>) -> Self {
        Self {
            role: "user",
            content: Some(WireContent::Parts(parts)),
            tool_calls: Vec::new(),
            tool_call_id: None,
        }
    }
}

impl<'a> From<&'a ChatMessage> for WireMessage<'a> {
    fn from(message: &'a ChatMessage) -> Self {
        let content = match (&message.content, message.tool_calls.is_empty()) {
            _ if message.role == Role::User && !message.attachments.is_empty() => {
                Some(WireContent::Parts(attachments::chat_parts(
                    message.text_content(),
                    &message.attachments,
                )))
            }
            (Some(text), _) => Some(WireContent::Text(text.as_str())),
            (None, false) => None,
            (None, true) => Some(WireContent::Text("")),
        };
        Self {
            role: message.role.as_str(),
            content,
            tool_calls: message
                .tool_calls
                .iter()
                .map(|call: &'a ToolCall| WireToolCall {
                    id: &call.id,
                    kind: "function",
                    function: WireFunction {
                        name: &call.name,
                        arguments: &call.arguments,
                    },
                })
                .collect(),
            tool_call_id: match message.role {
                Role::Tool => message.tool_call_id.as_deref(),
                _ => None,
            },
        }
    }
}

/// A whole (non-streamed) completion.
#[derive(Debug, Deserialize)]
pub(crate) struct Completion {
    /// The provider's id of the reply (`chatcmpl-...`).
    #[serde(default)]
    pub id: Option<String>,
    /// The model that answered (often a dated snapshot of the one asked for).
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub choices: Vec<CompletionChoice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    /// Some servers answer HTTP 200 with an error object.
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CompletionChoice {
    #[serde(default)]
    pub message: CompletionMessage,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct CompletionMessage {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<CompletionToolCall>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CompletionToolCall {
    #[serde(default)]
    pub id: Option<String>,
    pub function: CompletionFunction,
}

#[derive(Debug, Deserialize)]
pub(crate) struct CompletionFunction {
    #[serde(default)]
    pub name: String,
    #[serde(default)]
    pub arguments: Option<Value>,
}

/// One `data:` event of a streamed completion.
#[derive(Debug, Deserialize)]
pub(crate) struct Chunk {
    /// The provider's id of the reply, the same on every chunk.
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub choices: Vec<ChunkChoice>,
    #[serde(default)]
    pub usage: Option<WireUsage>,
    #[serde(default)]
    pub error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ChunkChoice {
    #[serde(default)]
    pub index: u32,
    #[serde(default)]
    pub delta: Option<Delta>,
    #[serde(default)]
    pub finish_reason: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct Delta {
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Option<Vec<ToolCallDelta>>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ToolCallDelta {
    #[serde(default)]
    pub index: Option<usize>,
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub function: Option<FunctionDelta>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct FunctionDelta {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub arguments: Option<Value>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct WireUsage {
    #[serde(default)]
    pub prompt_tokens: Option<u64>,
    #[serde(default)]
    pub completion_tokens: Option<u64>,
    #[serde(default)]
    pub prompt_tokens_details: Option<TokenDetails>,
    #[serde(default)]
    pub completion_tokens_details: Option<TokenDetails>,
}

/// `cached_tokens` of the prompt, `reasoning_tokens` of the completion (OpenAI; other servers
/// send neither, or `null`).
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) struct TokenDetails {
    #[serde(default)]
    pub cached_tokens: Option<u64>,
    #[serde(default)]
    pub reasoning_tokens: Option<u64>,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage {
            prompt_tokens: usage.prompt_tokens.unwrap_or(0),
            completion_tokens: usage.completion_tokens.unwrap_or(0),
            cache_read_tokens: usage
                .prompt_tokens_details
                .and_then(|details| details.cached_tokens)
                .unwrap_or(0),
            cache_creation_tokens: 0,
            reasoning_tokens: usage
                .completion_tokens_details
                .and_then(|details| details.reasoning_tokens)
                .unwrap_or(0),
            cost_usd: None,
            cost_complete: false,
        }
    }
}

/// `{"error": {"message", "type", "code"}}`; `code` is a number on some servers (vLLM,
/// OpenRouter) and a string on others (OpenAI).
#[derive(Debug, Clone, Deserialize)]
pub(crate) struct WireError {
    #[serde(default)]
    pub message: Option<String>,
    #[serde(default)]
    pub code: Option<Value>,
}

impl WireError {
    /// The HTTP status the error stands for, when the server says so.
    pub fn status(&self) -> Option<u16> {
        self.code
            .as_ref()
            .and_then(Value::as_u64)
            .and_then(|code| u16::try_from(code).ok())
            .filter(|code| (400..600).contains(code))
    }
}

/// Tool arguments are text on the wire, but a few servers send a JSON object instead.
pub(crate) fn arguments_text(arguments: Option<Value>) -> String {
    match arguments {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(text)) => text,
        Some(other) => other.to_string(),
    }
}

/// The provider's own words from an error body: `error.message`, a bare `error` string, a
/// top-level `message`, or else the body itself. Bounded, because some proxies answer with a
/// whole HTML page.
pub(crate) fn error_message(body: &str) -> String {
    const MAX_CHARS: usize = 500;
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|value| {
        let error = value.get("error");
        error
            .and_then(|error| error.get("message"))
            .or(error)
            .or_else(|| value.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    let message = from_json.unwrap_or_else(|| body.trim().to_owned());
    match message.char_indices().nth(MAX_CHARS) {
        Some((cut, _)) => format!("{}…", &message[..cut]),
        None => message,
    }
}

/// Some local servers send no call ids, but the loop pairs results with calls by id.
pub(crate) fn call_id_or_generated(id: Option<String>, position: usize) -> String {
    id.filter(|id| !id.is_empty())
        .unwrap_or_else(|| format!("call_{}", position + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentloop_core::{CallPurpose, ToolSpec};
    use serde_json::json;

    fn request(tools: Vec<ToolSpec>, tool_choice: ToolChoice) -> ModelRequest {
        ModelRequest {
            model: None,
            messages: [
                ChatMessage::system("be brief"),
                ChatMessage::user("hi"),
                ChatMessage::assistant_tool_calls(
                    None,
                    vec![ToolCall {
                        id: "call_9".into(),
                        name: "fs_read".into(),
                        arguments: r#"{"path":"a"}"#.into(),
                    }],
                ),
                ChatMessage::tool_result("call_9", "contents"),
            ]
            .map(std::sync::Arc::new)
            .to_vec(),
            tools: tools.into_iter().map(std::sync::Arc::new).collect(),
            tool_choice,
            purpose: CallPurpose::Step,
            output: None,
        }
    }

    #[test]
    fn messages_use_the_chat_completions_shape() {
        let request = request(Vec::new(), ToolChoice::Auto);
        let body = serde_json::to_value(ChatRequest::new(&request, "m", false, None)).unwrap();
        assert_eq!(
            body,
            json!({
                "model": "m",
                "messages": [
                    {"role": "system", "content": "be brief"},
                    {"role": "user", "content": "hi"},
                    {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_9", "type": "function",
                         "function": {"name": "fs_read", "arguments": "{\"path\":\"a\"}"}}
                    ]},
                    {"role": "tool", "content": "contents", "tool_call_id": "call_9"},
                ],
                "stream": false,
            })
        );
    }

    #[test]
    fn tools_and_stream_options_appear_only_when_relevant() {
        let tool = ToolSpec {
            name: "fs_read".into(),
            description: "Read a file".into(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        };
        let mut request = request(vec![tool], ToolChoice::None);
        request.model = Some("override".into());
        let body = serde_json::to_value(ChatRequest::new(&request, "m", true, None)).unwrap();
        assert_eq!(body["model"], "override");
        assert_eq!(body["tool_choice"], "none");
        assert_eq!(body["stream_options"], json!({"include_usage": true}));
        assert_eq!(
            body["tools"],
            json!([{"type": "function", "function": {
                "name": "fs_read", "description": "Read a file", "parameters": {"type": "object"}
            }}])
        );
    }

    #[test]
    fn the_answer_format_goes_only_on_a_call_without_tools() {
        let spec = agentloop_core::OutputSpec {
            name: "ticket".into(),
            schema: json!({"type": "object"}),
            strict: true,
        };
        let format = agentloop_core::OutputFormat {
            spec: std::sync::Arc::new(spec),
            native: true,
        };
        let mut answer = request(Vec::new(), ToolChoice::None);
        answer.output = Some(format.clone());
        let body = serde_json::to_value(ChatRequest::new(&answer, "m", false, None)).unwrap();
        assert_eq!(
            body["response_format"],
            json!({"type": "json_schema", "json_schema":
                {"name": "ticket", "schema": {"type": "object"}, "strict": true}})
        );
        let tool = ToolSpec {
            name: "fs_read".into(),
            description: String::new(),
            parameters: std::sync::Arc::new(json!({"type": "object"})),
        };
        let mut turn = request(vec![tool], ToolChoice::Auto);
        turn.output = Some(format.clone());
        let body = serde_json::to_value(ChatRequest::new(&turn, "m", false, None)).unwrap();
        assert!(body.get("response_format").is_none(), "{body}");
        let mut prompted = request(Vec::new(), ToolChoice::None);
        prompted.output = Some(agentloop_core::OutputFormat {
            native: false,
            ..format
        });
        let body = serde_json::to_value(ChatRequest::new(&prompted, "m", false, None)).unwrap();
        assert!(body.get("response_format").is_none(), "{body}");
    }

    #[test]
    fn error_message_prefers_the_providers_words() {
        assert_eq!(
            error_message(r#"{"error": {"message": "Incorrect API key", "type": "x"}}"#),
            "Incorrect API key"
        );
        assert_eq!(
            error_message(r#"{"error": "model not found"}"#),
            "model not found"
        );
        assert_eq!(error_message("  Bad Gateway \n"), "Bad Gateway");
        let long = "x".repeat(2000);
        assert_eq!(error_message(&long).chars().count(), 501);
    }

    #[test]
    fn error_codes_map_to_http_statuses_only_when_numeric() {
        let numeric: WireError =
            serde_json::from_value(json!({"message": "m", "code": 429})).unwrap();
        assert_eq!(numeric.status(), Some(429));
        let text: WireError =
            serde_json::from_value(json!({"message": "m", "code": "invalid_api_key"})).unwrap();
        assert_eq!(text.status(), None);
    }

    #[test]
    fn arguments_given_as_an_object_become_json_text() {
        assert_eq!(arguments_text(Some(json!({"a": 1}))), r#"{"a":1}"#);
        assert_eq!(arguments_text(Some(json!("{\"a\""))), "{\"a\"");
        assert_eq!(arguments_text(None), "");
    }
}
