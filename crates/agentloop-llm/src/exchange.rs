//! One HTTP attempt: send the request, read the status, then the body as a stream or as a whole
//! reply, in the wire format of a [`Dialect`]. Deciding whether to try again is the caller's job
//! (`transport.rs`).

use std::error::Error as StdError;
use std::time::{Duration, Instant, SystemTime};

use agentloop_core::{LlmError, ModelReply, TextSink, short_of_resources};
use eventsource_stream::{EventStreamError, Eventsource};
use futures::StreamExt;
use reqwest::header::{CONTENT_TYPE, HeaderMap};
use reqwest::{RequestBuilder, Response, StatusCode};

use crate::not_openai::{Endpoint, not_openai_message};
use crate::offline::no_network;
use crate::retry::retry_after;
use crate::wire::{WireError, error_message};

/// One provider's wire format for replies: how a whole body and a stream of server-sent events
/// become a [`ModelReply`]. Sending, statuses, retries and cut connections are shared.
pub(crate) trait Dialect: Sync {
    type Folder: EventFolder + Send;

    /// A fresh folder for one streamed answer.
    fn folder(&self) -> Self::Folder;

    /// A whole (non-streamed) answer.
    fn read_body(&self, body: &[u8]) -> Result<ModelReply, AttemptError>;
}

/// Folds the events of one streamed answer into a reply.
pub(crate) trait EventFolder {
    /// Folds one event in (`event` is the SSE event name, empty when the server sends none).
    fn push(&mut self, event: &str, data: &str) -> Result<Folded, AttemptError>;

    /// The reply, once the stream is over (or [`Folded::End`] came). A stream that ended
    /// without its final event is an error: the reply may miss text or half a tool call.
    fn finish(self) -> Result<ModelReply, LlmError>;
}

/// What one event gave.
pub(crate) enum Folded {
    /// Text to show now.
    Text(String),
    Nothing,
    /// The stream's last event: stop reading.
    End,
}

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
    /// No connection could be opened for lack of this process's resources (see
    /// `short_of_resources`).
    NoConnection { detail: String },
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
    pub fn into_llm_error(self, url: &str, key_env: &str, retries: u32) -> LlmError {
        match self {
            AttemptError::Status {
                status, message, ..
            } => match status {
                429 => LlmError::RateLimited { retries, message },
                401 | 403 => LlmError::Unauthorized {
                    url: url.to_owned(),
                    status,
                    message,
                    key_env: key_env.to_owned(),
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
                detail: after_retries(detail, "failing", retries),
            },
            AttemptError::NoConnection { detail } => LlmError::NoConnection {
                url: url.to_owned(),
                detail: after_retries(detail, "failing", retries),
            },
            AttemptError::Cut { detail } => LlmError::CutReply {
                url: url.to_owned(),
                detail: after_retries(detail, "cut", retries),
            },
            AttemptError::Done(error) => error,
        }
    }

    /// An error the provider reported inside an answer: statuses of 429 and 5xx are worth
    /// another attempt, like the same status on the HTTP response.
    pub fn provider_error(status: Option<u16>, message: String) -> Self {
        match status {
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

    pub fn protocol(message: String) -> Self {
        AttemptError::Done(LlmError::Protocol(message))
    }

    pub(crate) fn from_wire_error(error: WireError) -> Self {
        let status = error.status();
        let message = error
            .message
            .unwrap_or_else(|| "the server sent an error without a message".into());
        Self::provider_error(status, message)
    }
}

/// Sends `request` and reads the reply, passing text to `on_text` as it arrives. `shown` tells
/// the caller whether any text reached `on_text`, even when the attempt then fails.
pub(crate) async fn exchange<D: Dialect>(
    dialect: &D,
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
        read_stream(dialect.folder(), response, url, on_text, shown).await
    } else {
        read_body(dialect, response, endpoint, on_text, shown).await
    }
}

/// `detail`, and how many retries it survived (`still`: what it still was) when there were any.
fn after_retries(detail: String, still: &str, retries: u32) -> String {
    if retries == 0 {
        detail
    } else {
        format!("{detail}; still {still} after {retries} retries")
    }
}

/// A refused connection means a wrong `base_url` or a server that is not running, a failed DNS
/// lookup or an unreachable network a machine without network (or a misspelt host): retrying
/// only delays telling the user. A connection this process could not open for
/// lack of its own resources (file descriptors, local ports, buffers) says nothing about the
/// server, and may open once other calls let theirs go: it is tried again, and told as such.
fn send_error(url: &str, error: &reqwest::Error) -> AttemptError {
    if let Some(advice) = short_of_resources(error) {
        return AttemptError::NoConnection {
            detail: format!("{} ({advice})", root_cause(error)),
        };
    }
    if error.is_connect() && no_network(error) {
        let host = error
            .url()
            .and_then(|url| url.host_str())
            .unwrap_or_default();
        return AttemptError::Done(LlmError::NoNetwork {
            url: url.to_owned(),
            host: host.to_owned(),
            detail: root_cause(error),
        });
    }
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

/// The provider's error object gives the provider's words; anything else (a web page, a
/// proxy's error page) is told as a server that does not speak the provider's API, with the
/// URL and its setting.
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

async fn read_stream<F: EventFolder>(
    mut folder: F,
    response: Response,
    url: &str,
    on_text: TextSink<'_>,
    shown: &mut bool,
) -> Result<ModelReply, AttemptError> {
    let mut events = response.bytes_stream().eventsource();
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
        match folder.push(event.event.as_str(), data)? {
            Folded::Text(text) => {
                on_text(&text);
                *shown = true;
            }
            Folded::Nothing => {}
            Folded::End => break,
        }
    }
    folder.finish().map_err(AttemptError::Done)
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

async fn read_body<D: Dialect>(
    dialect: &D,
    response: Response,
    endpoint: &Endpoint,
    on_text: TextSink<'_>,
    shown: &mut bool,
) -> Result<ModelReply, AttemptError> {
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|error| AttemptError::Cut {
        detail: error_chain(&error),
    })?;
    let reply = dialect.read_body(&body).map_err(|error| {
        // A 200 that is not JSON at all: a web page served at that address.
        match not_openai_message(endpoint, status, &String::from_utf8_lossy(&body)) {
            Some(message) => AttemptError::protocol(message),
            None => error,
        }
    })?;
    if let Some(text) = reply.content.as_deref() {
        on_text(text);
        *shown = true;
    }
    Ok(reply)
}

/// A body that should be JSON, read as `T`; what a server sent instead is quoted (bounded).
pub(crate) fn parse_json<T: serde::de::DeserializeOwned>(
    body: &[u8],
    what: &str,
) -> Result<T, AttemptError> {
    serde_json::from_slice(body).map_err(|error| {
        AttemptError::protocol(format!(
            "{what} is not valid JSON ({error}): {}",
            error_message(&String::from_utf8_lossy(body))
        ))
    })
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
