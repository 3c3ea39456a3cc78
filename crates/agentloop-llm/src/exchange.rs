//! One HTTP attempt: send the request, read the status, then the body as a stream or as a whole
//! completion. Deciding whether to try again is the caller's job.

use std::error::Error as StdError;
use std::time::{Duration, Instant, SystemTime};

use agentloop_core::{LlmError, ModelReply, TextSink};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::completion::{CompletionError, into_reply};
use crate::not_openai::{Endpoint, not_openai_message};
use crate::retry::retry_after;
use crate::stream::ReplyAssembler;
use crate::wire::{Chunk, Completion, WireError, error_message};

/// How an attempt failed. [`AttemptError::into_llm_error`] names it as the call would end
/// with it; whether to try again is [`LlmError::is_retryable`]'s to say.
#[derive(Debug)]
pub(crate) enum AttemptError {
    /// An HTTP error status, or an error object with an HTTP code inside a 200 answer.
    Status {
        status: u16,
        message: String,
        retry_after: Option<Duration>,
    },
    /// The connection broke before an answer came (reset, closed before the status line).
    Connection { detail: String },
    /// The answer began, then its body broke off (a stream cut mid-delta, a body shorter than
    /// its `Content-Length`) before any text was shown: the server was reached.
    Cut { detail: String },
    /// Already the error the call ends with.
    Done(LlmError),
}

impl AttemptError {
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            AttemptError::Status { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The error the run ends with, after `retries` retries.
    pub fn into_llm_error(self, url: &str, retries: u32) -> LlmError {
        match self {
            AttemptError::Status {
                status, message, ..
            } => match status {
                429 => LlmError::RateLimited { retries, message },
                401 | 403 => LlmError::Unauthorized {
                    url: url.to_owned(),
                    status,
                    message,
                },
                500.. => LlmError::Server {
                    status,
                    retries,
                    message,
                },
                _ => LlmError::Rejected { status, message },
            },
            AttemptError::Connection { detail } => LlmError::ConnectionLost {
                url: url.to_owned(),
                detail: if retries == 0 {
                    detail
                } else {
                    format!("{detail}; still failing after {retries} retries")
                },
            },
            AttemptError::Cut { detail } => LlmError::CutReply {
                url: url.to_owned(),
                detail: if retries == 0 {
                    detail
                } else {
                    format!("{detail}; still cut after {retries} retries")
                },
            },
            AttemptError::Done(error) => error,
        }
    }

    fn from_wire_error(error: WireError) -> Self {
        let message = error
            .message
            .clone()
            .unwrap_or_else(|| "the server sent an error without a message".into());
        match error.status() {
            Some(status) => AttemptError::Status {
                status,
                message,
                retry_after: None,
            },
            None => AttemptError::Done(LlmError::Protocol(format!(
                "the server reported an error: {message}"
            ))),
        }
    }
}

/// Sends `request` and reads the reply, passing text to `on_text` as it arrives. `shown` tells
/// the caller whether any text reached `on_text`, even when the attempt then fails.
pub(crate) async fn exchange(
    request: RequestBuilder,
    endpoint: &Endpoint,
    attempt: u32,
    on_text: TextSink<'_>,
    shown: &mut bool,
) -> Result<ModelReply, AttemptError> {
    let url = endpoint.url.as_str();
    let started = Instant::now();
    let response = request.send().await.map_err(|error| {
        tracing::debug!(attempt, url, error = %error_chain(&error), "LLM request failed");
        send_error(url, &error)
    })?;
    let status = response.status();
    tracing::debug!(
        attempt,
        url,
        status = status.as_u16(),
        latency_ms = started.elapsed().as_millis() as u64,
        "LLM responded"
    );
    if !status.is_success() {
        return Err(status_error(status, response, endpoint).await);
    }
    if is_event_stream(response.headers()) {
        read_stream(response, url, on_text, shown).await
    } else {
        read_completion(response, endpoint, on_text, shown).await
    }
}

/// Connection refused and DNS failures mean a wrong `base_url` or a server that is not
/// running: retrying only delays telling the user.
fn send_error(url: &str, error: &reqwest::Error) -> AttemptError {
    if error.is_connect() || error.is_builder() {
        AttemptError::Done(LlmError::Unreachable {
            url: url.to_owned(),
            detail: root_cause(error),
        })
    } else {
        AttemptError::Connection {
            detail: error_chain(error),
        }
    }
}

/// An OpenAI error object gives the provider's words; anything else (a web page, a proxy's
/// error page) is told as a server that is not OpenAI-compatible, with the URL and its setting.
async fn status_error(status: StatusCode, response: Response, endpoint: &Endpoint) -> AttemptError {
    let retry_after = retry_after(response.headers(), SystemTime::now());
    let body = response.text().await.unwrap_or_default();
    let mut message = not_openai_message(endpoint, status.as_u16(), &body)
        .unwrap_or_else(|| error_message(&body));
    if message.is_empty() {
        message = status.canonical_reason().unwrap_or("no message").to_owned();
    }
    AttemptError::Status {
        status: status.as_u16(),
        message,
        retry_after,
    }
}

/// Decided by the answer, not by what was asked: some servers ignore `stream: true`.
fn is_event_stream(headers: &HeaderMap) -> bool {
    headers
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("text/event-stream"))
}

async fn read_stream(
    response: Response,
    url: &str,
    on_text: TextSink<'_>,
    shown: &mut bool,
) -> Result<ModelReply, AttemptError> {
    let mut events = response.bytes_stream().eventsource();
    let mut assembler = ReplyAssembler::default();
    while let Some(event) = events.next().await {
        let event = match event {
            Ok(event) => event,
            Err(EventStreamError::Transport(error)) => {
                return Err(cut_stream(&error, url, *shown));
            }
            Err(error) => {
                return Err(AttemptError::Done(LlmError::Protocol(format!(
                    "the event stream is malformed: {error}"
                ))));
            }
        };
        let data = event.data.trim();
        if data.is_empty() {
            continue;
        }
        if data == "[DONE]" {
            break;
        }
        let chunk: Chunk = serde_json::from_str(data).map_err(|error| {
            AttemptError::Done(LlmError::Protocol(format!(
                "a stream chunk is not valid JSON ({error}): {}",
                error_message(data)
            )))
        })?;
        match assembler.push(chunk) {
            Ok(Some(text)) => {
                on_text(&text);
                *shown = true;
            }
            Ok(None) => {}
            Err(error) => return Err(AttemptError::from_wire_error(error)),
        }
    }
    assembler.finish().map_err(AttemptError::Done)
}

/// Before any text was shown, a cut stream is tried again: nothing of it reached the user, and
/// a tool call half received never runs. Once text was shown, a retry would show it twice; the
/// reply ends cut short instead.
fn cut_stream(error: &reqwest::Error, url: &str, shown: bool) -> AttemptError {
    let detail = error_chain(error);
    if shown {
        tracing::warn!(detail, "the LLM stream broke after text was shown");
        AttemptError::Done(LlmError::CutReply {
            url: url.to_owned(),
            detail,
        })
    } else {
        AttemptError::Cut { detail }
    }
}

async fn read_completion(
    response: Response,
    endpoint: &Endpoint,
    on_text: TextSink<'_>,
    shown: &mut bool,
) -> Result<ModelReply, AttemptError> {
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|error| AttemptError::Cut {
        detail: error_chain(&error),
    })?;
    let completion: Completion = serde_json::from_slice(&body).map_err(|error| {
        let text = String::from_utf8_lossy(&body);
        // A 200 that is not JSON at all: a web page served at that address.
        let message = not_openai_message(endpoint, status, &text).unwrap_or_else(|| {
            format!(
                "the completion is not valid JSON ({error}): {}",
                error_message(&text)
            )
        });
        AttemptError::Done(LlmError::Protocol(message))
    })?;
    let reply = into_reply(completion).map_err(|error| match error {
        CompletionError::Provider(error) => AttemptError::from_wire_error(error),
        CompletionError::NoChoices => {
            AttemptError::Done(LlmError::Protocol("the completion has no choices".into()))
        }
    })?;
    if let Some(text) = reply.content.as_deref() {
        on_text(text);
        *shown = true;
    }
    Ok(reply)
}

/// reqwest's own message is generic ("error sending request"); the cause is in its sources.
/// The innermost cause alone ("Connection refused (os error 111)"): the layers above it are
/// reqwest and hyper internals that tell a user nothing more.
fn root_cause(error: &dyn StdError) -> String {
    let mut cause = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

pub(crate) fn error_chain(error: &dyn StdError) -> String {
    let mut parts = Vec::new();
    let mut source = error.source();
    while let Some(cause) = source {
        parts.push(cause.to_string());
        source = cause.source();
    }
    if parts.is_empty() {
        error.to_string()
    } else {
        parts.join(": ")
    }
}
