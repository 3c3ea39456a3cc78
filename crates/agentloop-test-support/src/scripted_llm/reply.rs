//! [`Reply`]: what the scripted server answers to one request.

use std::time::Duration;

use serde_json::Value;

/// One scripted answer: text and/or tool calls, or an HTTP error. Tool call ids are assigned by
/// the server when the reply is served, so scripts stay short.
#[derive(Clone, Debug)]
pub struct Reply {
    pub(super) text: Option<String>,
    pub(super) calls: Vec<ScriptedCall>,
    pub(super) error: Option<ScriptedError>,
    pub(super) headers: Vec<(String, String)>,
    pub(super) usage: Usage,
    pub(super) delay: Option<Duration>,
    pub(super) truncated: bool,
    pub(super) cut: Option<Cut>,
    /// Anthropic's `stop_reason` in place of the one the content implies.
    pub(super) stop_reason: Option<String>,
    /// A reasoning item before the output (Responses API), with this encrypted content.
    pub(super) reasoning: Option<String>,
}

/// Where the server breaks the connection off inside the body of an answer it began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Cut {
    /// Streamed: inside the first tool call delta's event (not streamed: halfway through the
    /// body), without the end of a chunked body.
    MidToolCall,
    /// `Content-Length` announces the whole body; half of it is sent.
    ShortOfContentLength,
}

#[derive(Clone, Debug)]
pub(super) struct ScriptedCall {
    pub name: String,
    /// Sent verbatim, so tests can send arguments that are not JSON.
    pub arguments: String,
}

#[derive(Clone, Debug)]
pub(super) struct ScriptedError {
    pub status: u16,
    pub message: String,
}

#[derive(Clone, Copy, Debug)]
pub(super) struct Usage {
    /// Every input token, cached or not.
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_creation_tokens: u64,
    pub reasoning_tokens: u64,
}

/// Non-zero, so a test that forgets to count usage notices.
const DEFAULT_USAGE: Usage = Usage {
    prompt_tokens: 10,
    completion_tokens: 5,
    cache_read_tokens: 0,
    cache_creation_tokens: 0,
    reasoning_tokens: 0,
};

impl Reply {
    fn new(text: Option<String>, calls: Vec<ScriptedCall>) -> Reply {
        Reply {
            text,
            calls,
            error: None,
            headers: Vec::new(),
            usage: DEFAULT_USAGE,
            delay: None,
            truncated: false,
            cut: None,
            stop_reason: None,
            reasoning: None,
        }
    }

    /// A plain text answer (finish_reason "stop").
    pub fn text(text: impl Into<String>) -> Reply {
        Reply::new(Some(text.into()), Vec::new())
    }

    /// One tool call (finish_reason "tool_calls").
    pub fn tool_call(name: &str, arguments: Value) -> Reply {
        Reply::tool_calls(vec![(name, arguments)])
    }

    /// Several tool calls in one reply, in this order.
    pub fn tool_calls(calls: Vec<(&str, Value)>) -> Reply {
        let calls = calls
            .into_iter()
            .map(|(name, arguments)| ScriptedCall {
                name: name.to_owned(),
                arguments: arguments.to_string(),
            })
            .collect();
        Reply::new(None, calls)
    }

    /// A tool call whose arguments text is sent as given, e.g. broken JSON.
    pub fn raw_tool_call(name: &str, raw_arguments: &str) -> Reply {
        let call = ScriptedCall {
            name: name.to_owned(),
            arguments: raw_arguments.to_owned(),
        };
        Reply::new(None, vec![call])
    }

    /// Neither text nor tool calls (finish_reason "stop"): a degenerate reply.
    pub fn empty() -> Reply {
        Reply::new(None, Vec::new())
    }

    /// An HTTP error with an OpenAI-style body `{"error": {"message", "type", ...}}`.
    pub fn error(status: u16, message: &str) -> Reply {
        Reply {
            error: Some(ScriptedError {
                status,
                message: message.to_owned(),
            }),
            ..Reply::empty()
        }
    }

    /// Text beside the tool calls (sent before them, as OpenAI does).
    pub fn with_text(mut self, text: impl Into<String>) -> Reply {
        self.text = Some(text.into());
        self
    }

    /// A response header, e.g. `Retry-After` on an error.
    pub fn with_header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    pub fn with_usage(mut self, prompt_tokens: u64, completion_tokens: u64) -> Reply {
        self.usage = Usage {
            prompt_tokens,
            completion_tokens,
            ..self.usage
        };
        self
    }

    /// Of the prompt tokens, `read` came from the prompt cache and `created` were written to it
    /// (Anthropic's `cache_read_input_tokens` / `cache_creation_input_tokens`; OpenAI reports
    /// only reads, as `cached_tokens`).
    pub fn with_cache(mut self, read: u64, created: u64) -> Reply {
        self.usage.cache_read_tokens = read;
        self.usage.cache_creation_tokens = created;
        self
    }

    /// A reasoning item before the output (Responses API), carrying `encrypted_content`, and
    /// `reasoning_tokens` in the usage.
    pub fn with_reasoning(mut self, encrypted_content: &str, reasoning_tokens: u64) -> Reply {
        self.reasoning = Some(encrypted_content.to_owned());
        self.usage.reasoning_tokens = reasoning_tokens;
        self
    }

    /// Ends the reply with this Anthropic `stop_reason` (`max_tokens`, `refusal`,
    /// `pause_turn`); for the Responses API, `max_tokens` makes the response `incomplete`.
    pub fn with_stop_reason(mut self, reason: &str) -> Reply {
        self.stop_reason = Some(reason.to_owned());
        self
    }

    /// Waits this long before sending the response headers.
    pub fn with_delay(mut self, delay: Duration) -> Reply {
        self.delay = Some(delay);
        self
    }

    /// When streaming, ends the stream before its final event: before the finish_reason chunk,
    /// with no usage and no `[DONE]` (Chat Completions); without `message_stop` (Anthropic);
    /// without `response.completed` (Responses). Has no effect on a non-streamed reply.
    pub fn truncated(mut self) -> Reply {
        self.truncated = true;
        self
    }

    /// Breaks the connection inside the first tool call delta's event: the client has any text
    /// and half of that event when the body breaks off (no end of the chunked body, no
    /// finish_reason). Not streamed, or without tool calls, the body breaks off halfway.
    pub fn cut_mid_tool_call(mut self) -> Reply {
        self.cut = Some(Cut::MidToolCall);
        self
    }

    /// Announces the whole body in `Content-Length`, sends half of it, then closes the
    /// connection, streamed or not.
    pub fn shorter_than_content_length(mut self) -> Reply {
        self.cut = Some(Cut::ShortOfContentLength);
        self
    }

    pub(super) fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }
}
