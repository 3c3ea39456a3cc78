//! Reading Anthropic's answers: a whole `message`, or the events of a stream
//! (`message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`, `ping`,
//! `error`), into a [`ModelReply`].

use std::collections::BTreeMap;

use agentloop_core::protocol::{ToolCall, Usage};
use agentloop_core::{LlmError, ModelReply};
use serde::Deserialize;
use serde_json::Value;

use crate::exchange::{AttemptError, Dialect, EventFolder, Folded, parse_json};
use crate::wire::error_message;

/// `finish_reason` of a turn paused by Anthropic (`pause_turn`): the client continues it.
pub(crate) const PAUSE_TURN: &str = "pause_turn";

/// Anthropic's reply format, for a request that set `max_tokens`.
pub(crate) struct MessagesDialect {
    pub max_tokens: u32,
}

impl Dialect for MessagesDialect {
    type Folder = StreamFolder;

    fn folder(&self) -> StreamFolder {
        StreamFolder {
            max_tokens: self.max_tokens,
            ..StreamFolder::default()
        }
    }

    fn read_body(&self, body: &[u8]) -> Result<ModelReply, AttemptError> {
        let message: WireMessage = parse_json(body, "the message")?;
        if let Some(error) = message.error {
            return Err(error.into_attempt_error());
        }
        let blocks = message
            .content
            .into_iter()
            .map(|block| match block {
                WireBlock::Text { text } => Block::Text(text),
                WireBlock::ToolUse { id, name, input } => Block::ToolUse {
                    id,
                    name,
                    arguments: input.to_string(),
                },
                WireBlock::Other => Block::Other,
            })
            .collect();
        let usage = message
            .usage
            .map(|usage| usage.into_usage())
            .unwrap_or_default();
        into_reply(blocks, message.stop_reason, usage, self.max_tokens)
            .map(|reply| ModelReply {
                model: message.model,
                id: message.id.filter(|id| !id.is_empty()),
                ..reply
            })
            .map_err(AttemptError::Done)
    }
}

#[derive(Debug)]
enum Block {
    Text(String),
    ToolUse {
        id: String,
        name: String,
        arguments: String,
    },
    /// A block agentloop does not read (thinking, server tools).
    Other,
}

/// The blocks, in order, as the reply: the text blocks joined, the tool calls in the order the
/// model wrote them, the stop reason as a `finish_reason`.
fn into_reply(
    blocks: Vec<Block>,
    stop_reason: Option<String>,
    usage: Usage,
    max_tokens: u32,
) -> Result<ModelReply, LlmError> {
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for block in blocks {
        match block {
            Block::Text(piece) => text.push_str(&piece),
            Block::ToolUse {
                id,
                name,
                arguments,
            } => tool_calls.push(ToolCall {
                id,
                name,
                arguments,
            }),
            Block::Other => {}
        }
    }
    let finish_reason = match stop_reason.as_deref() {
        Some("tool_use") => "tool_calls",
        Some("end_turn" | "stop_sequence") => "stop",
        Some("max_tokens") => return Err(LlmError::MaxTokens { limit: max_tokens }),
        Some("refusal") => {
            // The model declined; what it wrote (if anything) is its answer, and no call of a
            // refused turn runs.
            tool_calls.clear();
            if text.trim().is_empty() {
                text = "The model declined to answer this request (stop reason: refusal).".into();
            }
            "refusal"
        }
        Some(PAUSE_TURN) => PAUSE_TURN,
        Some(other) => {
            return Err(LlmError::Protocol(format!(
                "the message stopped for a reason agentloop does not know: {other:?}"
            )));
        }
        None => return Err(LlmError::TruncatedStream),
    };
    Ok(ModelReply {
        content: (!text.is_empty()).then_some(text),
        tool_calls,
        finish_reason: Some(finish_reason.to_owned()),
        usage: Some(usage),
        model: None,
        id: None,
    })
}

/// Folds the events of one streamed message. Blocks are kept by their `index`, so tool blocks
/// whose `input_json_delta` pieces interleave are assembled each on its own.
#[derive(Debug, Default)]
pub(crate) struct StreamFolder {
    max_tokens: u32,
    blocks: BTreeMap<u64, Block>,
    stop_reason: Option<String>,
    usage: WireUsage,
    /// The model that answered (`message_start`).
    model: Option<String>,
    /// The provider's id of the message (`message_start`).
    id: Option<String>,
    started: bool,
    stopped: bool,
}

impl EventFolder for StreamFolder {
    fn push(&mut self, event: &str, data: &str) -> Result<Folded, AttemptError> {
        let event: StreamEvent = serde_json::from_str(data).map_err(|error| {
            AttemptError::protocol(format!(
                "a stream event ({event}) is not valid JSON ({error}): {}",
                error_message(data)
            ))
        })?;
        match event {
            StreamEvent::MessageStart { message } => {
                self.started = true;
                self.model = message.model.filter(|model| !model.is_empty());
                self.id = message.id.filter(|id| !id.is_empty());
                if let Some(usage) = message.usage {
                    self.usage.update(usage);
                }
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    WireBlock::Text { text } => Block::Text(text),
                    WireBlock::ToolUse { id, name, input } => Block::ToolUse {
                        id,
                        name,
                        // Streams start tools with `{}` and send the input as deltas.
                        arguments: match input {
                            Value::Object(object) if object.is_empty() => String::new(),
                            other => other.to_string(),
                        },
                    },
                    WireBlock::Other => Block::Other,
                };
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                return self.delta(index, delta);
            }
            StreamEvent::ContentBlockStop { .. } | StreamEvent::Ping => {}
            StreamEvent::MessageDelta { delta, usage } => {
                if let Some(reason) = delta.stop_reason {
                    self.stop_reason = Some(reason);
                }
                if let Some(usage) = usage {
                    self.usage.update(usage);
                }
            }
            StreamEvent::MessageStop => {
                self.stopped = true;
                return Ok(Folded::End);
            }
            StreamEvent::Error { error } => return Err(error.into_attempt_error()),
            StreamEvent::Other => {}
        }
        Ok(Folded::Nothing)
    }

    fn finish(mut self) -> Result<ModelReply, LlmError> {
        if !self.started || !self.stopped {
            return Err(LlmError::TruncatedStream);
        }
        for block in self.blocks.values_mut() {
            if let Block::ToolUse { arguments, .. } = block
                && arguments.is_empty()
            {
                arguments.push_str("{}");
            }
        }
        let blocks = std::mem::take(&mut self.blocks).into_values().collect();
        into_reply(
            blocks,
            self.stop_reason,
            self.usage.into_usage(),
            self.max_tokens,
        )
        .map(|reply| ModelReply {
            model: self.model,
            id: self.id,
            ..reply
        })
    }
}

impl StreamFolder {
    fn delta(&mut self, index: u64, delta: DeltaBody) -> Result<Folded, AttemptError> {
        let block = self.blocks.get_mut(&index);
        match (delta, block) {
            (DeltaBody::TextDelta { text }, Some(Block::Text(whole))) => {
                whole.push_str(&text);
                Ok(if text.is_empty() {
                    Folded::Nothing
                } else {
                    Folded::Text(text)
                })
            }
            (
                DeltaBody::InputJsonDelta { partial_json },
                Some(Block::ToolUse { arguments, .. }),
            ) => {
                arguments.push_str(&partial_json);
                Ok(Folded::Nothing)
            }
            (DeltaBody::Other, _) | (_, Some(Block::Other)) => Ok(Folded::Nothing),
            (_, _) => Err(AttemptError::protocol(format!(
                "a content_block_delta for block {index} does not match the block started there"
            ))),
        }
    }
}

#[derive(Debug, Deserialize)]
struct WireMessage {
    /// The provider's id of the message (`msg_...`).
    #[serde(default)]
    id: Option<String>,
    /// The model that answered.
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<WireBlock>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
    /// `{"type": "error", "error": {...}}` in place of a message.
    #[serde(default)]
    error: Option<WireError>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum WireBlock {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: u64,
        content_block: WireBlock,
    },
    ContentBlockDelta {
        index: u64,
        delta: DeltaBody,
    },
    ContentBlockStop {
        #[allow(dead_code)]
        index: u64,
    },
    MessageDelta {
        delta: MessageDeltaBody,
        #[serde(default)]
        usage: Option<WireUsage>,
    },
    MessageStop,
    Ping,
    Error {
        error: WireError,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
struct StartedMessage {
    /// The provider's id of the message (`msg_...`).
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<WireUsage>,
}

#[derive(Debug, Deserialize)]
struct MessageDeltaBody {
    #[serde(default)]
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum DeltaBody {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

/// Anthropic's counts: `input_tokens` excludes the cached prefix, read or written.
#[derive(Debug, Default, Clone, Copy, Deserialize)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
    #[serde(default)]
    cache_creation_input_tokens: Option<u64>,
    #[serde(default)]
    cache_read_input_tokens: Option<u64>,
}

impl WireUsage {
    /// `message_delta` repeats counts cumulatively; the latest of each wins.
    fn update(&mut self, later: WireUsage) {
        self.input_tokens = later.input_tokens.or(self.input_tokens);
        self.output_tokens = later.output_tokens.or(self.output_tokens);
        self.cache_creation_input_tokens = later
            .cache_creation_input_tokens
            .or(self.cache_creation_input_tokens);
        self.cache_read_input_tokens = later
            .cache_read_input_tokens
            .or(self.cache_read_input_tokens);
    }

    /// `prompt_tokens` counts every input token, cached or not, as OpenAI's do.
    fn into_usage(self) -> Usage {
        let read = self.cache_read_input_tokens.unwrap_or(0);
        let created = self.cache_creation_input_tokens.unwrap_or(0);
        Usage {
            prompt_tokens: self.input_tokens.unwrap_or(0) + read + created,
            completion_tokens: self.output_tokens.unwrap_or(0),
            cache_read_tokens: read,
            cache_creation_tokens: created,
            reasoning_tokens: 0,
            cost_usd: None,
            cost_complete: false,
        }
    }
}

/// `{"type": "overloaded_error", "message": "Overloaded"}`.
#[derive(Debug, Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

impl WireError {
    /// An error inside a stream stands for the HTTP status Anthropic gives the same error, so
    /// an overloaded or rate-limited stream is retried like a 529 or a 429.
    fn into_attempt_error(self) -> AttemptError {
        let status = match self.kind.as_str() {
            "overloaded_error" => Some(529),
            "api_error" => Some(500),
            "rate_limit_error" => Some(429),
            "invalid_request_error" => Some(400),
            "authentication_error" => Some(401),
            "permission_error" => Some(403),
            "not_found_error" => Some(404),
            "request_too_large" => Some(413),
            _ => None,
        };
        let message = if self.message.is_empty() {
            self.kind
        } else {
            format!("{} ({})", self.message, self.kind)
        };
        AttemptError::provider_error(status, message)
    }
}
