//! `/v1/chat`: the AI SDK's chat transport (`useChat` with `DefaultChatTransport`), an adapter
//! over the same runs, events and store as `/v1/runs`. The chat `id` is the session (a text id
//! the user's own: `conversation::find`, shared with AG-UI's threads); the request's last
//! message is what is new (a question, the answer to a clarification, or the
//! user's approvals); the client's copy of the earlier messages is not read: the session has
//! them. A user's message starts one run, named after the message's id: the same message sent
//! again (copies at once included) follows that run from its start (`client_runs`). A
//! `regenerate-message` request asks the last question again in a new run that replaces the
//! session's last exchange (`RunRequest::supersede`). The answer is the run's events as the UI
//! message stream (`protocols::ai_sdk`).

use std::{convert::Infallible, sync::Arc};

use agentloop_core::{
    RunContext, RunRequest, Supersede,
    protocol::{Event, InputAnswer, RunStatus},
};
use axum::{
    extract::{RawQuery, State},
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    auth::User,
    client_runs, conversation,
    error::{ApiError, ErrorBody},
    extract::{PathId, resume_point},
    json_body::{FromJsonBody, JsonBody, read_as},
    live::{LiveRun, Reader},
    protocols::ai_sdk::UiMessageStream,
    state::AppState,
    trace_context::TraceParent,
};

/// What `DefaultChatTransport` sends (other fields, such as the transport's `body`, are let
/// be).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatBody {
    /// The chat: a UUID is the session's id; any other id names the user's own session
    /// derived from it.
    pub id: String,
    /// The chat's messages (`UIMessage`); only the last one is read.
    pub messages: Vec<ChatMessage>,
    /// `submit-message` or `regenerate-message`.
    #[serde(default)]
    pub trigger: Option<String>,
    /// With `regenerate-message`, the message to regenerate (`regenerate({messageId})`): an
    /// answer's id is its run's, whose exchange is replaced with every later one; otherwise,
    /// or when it names no run of the chat, the last exchange is.
    #[serde(default, rename = "messageId")]
    pub message_id: Option<String>,
    /// A typed answer for the run this request starts (the transport's `body`): the JSON
    /// Schema of its answer, as `output` of `POST /v1/runs`; the value streams as `data-output`
    /// parts.
    #[serde(default)]
    pub output: Option<agentloop_core::OutputSpec>,
}

impl FromJsonBody for ChatBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        read_as(bytes, "the AI SDK's chat request {id, messages, trigger}")
    }

    fn carries_attachments() -> bool {
        true
    }

    fn attachment_bytes(&self) -> usize {
        self.messages
            .iter()
            .flat_map(files_of)
            .map(|(url, _, _)| url.len())
            .sum()
    }
}

/// A `UIMessage`: `parts` of type `text` make a user's message, those of type `file` its
/// attachments (`[agent.attachments]`); tool parts in state `approval-responded` carry the
/// user's approvals (`approval.id` is the call id).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatMessage {
    /// A user's message starts one run: the same message again follows it.
    #[serde(default)]
    pub id: Option<String>,
    pub role: String,
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub parts: Vec<Value>,
}

/// Send a chat message (the AI SDK's UI message stream).
///
/// Starts a run of the chat's session with the last user message as the question, or, when
/// the chat's run waits for input, answers it: with the approvals in the last message's tool
/// parts (`addToolApprovalResponse`), or with the last user message as the answer to its
/// question. With `trigger: "regenerate-message"` (`regenerate()`), the run asks the last user
/// message again and replaces the chat's last exchange: the earlier question and answer stay
/// stored, marked superseded, and neither the model nor the session's messages show them again.
/// The answer is the UI message stream (`x-vercel-ai-ui-message-stream: v1`), ending with
/// `data: [DONE]`.
#[utoipa::path(
    post,
    path = "/v1/chat",
    tag = "chat",
    request_body = ChatBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace")),
    responses(
        (status = 200, description = "The UI message stream of the run", content_type = "text/event-stream"),
        (status = 400, description = "Malformed body, no message to act on, or an answer that does not fit", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "The chat is another user's", body = ErrorBody),
        (status = 409, description = "The chat has a run in progress (or, to regenerate, one that waits for input)", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn post_chat(
    State(state): State<AppState>,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    JsonBody(body): JsonBody<ChatBody>,
) -> Result<Response, ApiError> {
    if body.id.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "id: must not be empty",
        ));
    }
    if let Some(trigger) = body
        .trigger
        .as_deref()
        .filter(|t| !matches!(*t, "submit-message" | "regenerate-message"))
    {
        return Err(ApiError::bad_request(
            "invalid_body",
            format!("trigger: {trigger:?} is neither submit-message nor regenerate-message"),
        ));
    }
    let Some(last) = body.messages.last() else {
        return Err(ApiError::bad_request(
            "invalid_body",
            "messages: must not be empty",
        ));
    };
    let (session_id, session) = conversation::find(state.store.as_ref(), &user, &body.id).await?;
    if session
        .as_ref()
        .is_some_and(|session| session.user_id != user)
    {
        return Err(ApiError::not_found("chat", &body.id));
    }
    // A user's message starts one run, named by its id: the same message again (a retry,
    // copies sent at once) follows that run from its start. A regenerated answer is a new run.
    let run_id = match (last.role.as_str(), &last.id, body.trigger.as_deref()) {
        ("user", Some(message), trigger) if trigger != Some("regenerate-message") => {
            let run = conversation::derived(
                "agentloop-chat-run",
                &user,
                &format!("{}:{message}", body.id),
            );
            Some((run, message.as_str()))
        }
        _ => None,
    };
    if let Some((run_id, message)) = run_id
        && let Some(events) =
            client_runs::follow(&state, run_id, &user, session_id, message).await?
    {
        return Ok(ui_stream(
            events,
            UiMessageStream::new(),
            0,
            state.config.keep_alive(),
        ));
    }
    let waiting = match session {
        Some(_) => state
            .store
            .session_runs(session_id)
            .await?
            .pop()
            .filter(|run| run.status == RunStatus::AwaitingInput),
        None => None,
    };
    let regenerate = body.trigger.as_deref() == Some("regenerate-message");
    if let Some(run) = waiting {
        if regenerate {
            return Err(ApiError::conflict(
                "run_awaiting_input",
                format!(
                    "the chat's run {} waits for input: answer it, or cancel it with \
                     POST /v1/runs/{}/cancel, before regenerating",
                    run.id, run.id
                ),
            ));
        }
        let input = answer_of(last)?;
        let denied = input.deny.clone();
        let resumed = state.agent.resume(run.id, &input).await?;
        let live = state
            .runs
            .resume(&state.agent, resumed, &user, Reader::Events)?;
        return Ok(ui_stream(
            live.events(),
            UiMessageStream::with_denied(denied),
            0,
            state.config.keep_alive(),
        ));
    }
    // Its `file` parts, admitted before the run begins: a refusal stores nothing.
    let attachments = crate::attachments::admit_all(
        files_of(last).into_iter(),
        &state.agent.settings().attachments,
    )?;
    let query = match (last.role.as_str(), text_of(last)) {
        ("user", Some(text)) => text,
        ("user", None) if !attachments.is_empty() => String::new(),
        _ => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "messages: the last message must be the user's, with text or files",
            ));
        }
    };
    if let Some(output) = &body.output {
        crate::body::check_output(output, "output")?;
    }
    let request = RunRequest {
        query,
        attachments,
        output: body.output.clone(),
        session_id: Some(session_id),
        run_id: run_id.map(|(run, _)| run),
        context: RunContext {
            user_id: Some(user.clone()),
            ..RunContext::default()
        },
        traceparent,
        supersede: regenerate.then(|| Supersede {
            from_run: body
                .message_id
                .as_deref()
                .and_then(|id| Uuid::parse_str(id).ok()),
        }),
        ..RunRequest::default()
    };
    let events = match run_id {
        Some((_, message)) => client_runs::start_or_follow(&state, request, &user, message).await?,
        None => state
            .runs
            .start(&state.agent, request, &user, Reader::Events)
            .await?
            .events()
            .boxed(),
    };
    Ok(ui_stream(
        events,
        UiMessageStream::new(),
        0,
        state.config.keep_alive(),
    ))
}

/// Resume the stream of a chat's run in progress (what `useChat({resume: true})` asks).
///
/// The run's message from its first event (the AI SDK's transport replays a resumed stream
/// from the start and rebuilds the message from it), then its live events: nothing missing,
/// nothing twice. `Last-Event-ID` (or `?after=SEQ`) skips what a client already has (the
/// `id:` of the frames). 204 when the chat has no run in progress on this server.
#[utoipa::path(
    get,
    path = "/v1/chat/{id}/stream",
    tag = "chat",
    params(
        ("id" = String, Path, description = "Chat id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this seq"),
        ("after" = Option<u64>, Query, description = "Resume after this seq"),
    ),
    responses(
        (status = 200, description = "The UI message stream of the run in progress", content_type = "text/event-stream"),
        (status = 204, description = "No run in progress"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "The chat is another user's", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn chat_stream(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    headers: HeaderMap,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let after = resume_point(&headers, query.0.as_deref())?;
    let (session_id, session) = conversation::find(state.store.as_ref(), &user, &id.0).await?;
    match session {
        Some(session) if session.user_id != user => Err(ApiError::not_found("chat", &id.0)),
        None => Ok(StatusCode::NO_CONTENT.into_response()),
        Some(_) => {
            let live = state
                .store
                .session_runs(session_id)
                .await?
                .pop()
                .filter(|run| run.status == RunStatus::Running)
                .and_then(|run| state.runs.get(run.id))
                .filter(|live| !live.is_finished());
            Ok(match live {
                Some(live) => stream_run(&state, &live, UiMessageStream::new(), after),
                None => StatusCode::NO_CONTENT.into_response(),
            })
        }
    }
}

/// The text of a message's `text` parts, when it has any that is not blank.
/// The `file` parts of a message (`{type: "file", mediaType, filename?, url}`, the URL a data
/// URL or an `https` one), as (url, media type, name).
fn files_of(message: &ChatMessage) -> Vec<(String, Option<String>, Option<String>)> {
    message
        .parts
        .iter()
        .filter(|part| part["type"] == "file")
        .map(|part| {
            let text = |key: &str| part[key].as_str().map(str::to_owned);
            (
                text("url").unwrap_or_default(),
                text("mediaType"),
                text("filename"),
            )
        })
        .collect()
}

fn text_of(message: &ChatMessage) -> Option<String> {
    let text: Vec<&str> = message
        .parts
        .iter()
        .filter(|part| part["type"] == "text")
        .filter_map(|part| part["text"].as_str())
        .collect();
    let text = text.join("\n");
    (!text.trim().is_empty()).then_some(text)
}

/// What the last message answers to a run that waits: the approvals of its tool parts, or
/// its text (the answer to a question).
fn answer_of(message: &ChatMessage) -> Result<InputAnswer, ApiError> {
    let mut answer = InputAnswer::default();
    for part in &message.parts {
        if part["state"] != "approval-responded" {
            continue;
        }
        let approval = &part["approval"];
        let (Some(id), Some(approved)) = (approval["id"].as_str(), approval["approved"].as_bool())
        else {
            continue;
        };
        if approved {
            answer.approve.push(id.to_string());
        } else {
            answer.deny.push(id.to_string());
        }
    }
    if answer.approve.is_empty() && answer.deny.is_empty() {
        answer.answer = match (message.role.as_str(), text_of(message)) {
            ("user", Some(text)) => Some(text),
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_answer",
                    "the chat's run waits for input: answer its question with a user message, \
                     or its approvals with addToolApprovalResponse",
                ));
            }
        };
    }
    Ok(answer)
}

/// The UI message stream of `run` from its first event here (`base_seq`), leaving out the
/// parts of the events up to `after`.
fn stream_run(
    state: &AppState,
    run: &Arc<LiveRun>,
    mapper: UiMessageStream,
    after: u64,
) -> Response {
    ui_stream(
        run.events(run.base_seq),
        mapper,
        after,
        state.config.keep_alive(),
    )
}

fn ui_stream(
    events: impl Stream<Item = Event> + Send + 'static,
    mapper: UiMessageStream,
    after: u64,
    keep_alive: std::time::Duration,
) -> Response {
    let frames = events
        .scan(mapper, move |mapper, event| {
            if mapper.is_finished() {
                return futures::future::ready(None);
            }
            let parts = mapper.push(&event);
            let mut frames = Vec::new();
            if event.seq > after {
                let id = event.seq.to_string();
                frames.extend(parts.iter().map(|part| {
                    sse::Event::default()
                        .id(id.clone())
                        .json_data(part)
                        .unwrap_or_else(|_| sse::Event::default().data("{}"))
                }));
            }
            if mapper.is_finished() {
                frames.push(sse::Event::default().data("[DONE]"));
            }
            futures::future::ready(Some(futures::stream::iter(frames)))
        })
        .flatten()
        .map(Ok::<_, Infallible>);
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    headers.insert(
        "x-vercel-ai-ui-message-stream",
        HeaderValue::from_static("v1"),
    );
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn message(role: &str, parts: Value) -> ChatMessage {
        serde_json::from_value(json!({"id": "m", "role": role, "parts": parts})).unwrap()
    }

    #[test]
    fn approvals_come_from_the_tool_parts_and_answers_from_the_text() {
        let approvals = message(
            "assistant",
            json!([
                {"type": "dynamic-tool", "state": "approval-responded", "approval": {"id": "a", "approved": true}},
                {"type": "dynamic-tool", "state": "approval-responded", "approval": {"id": "b", "approved": false}},
                {"type": "dynamic-tool", "state": "output-available"},
            ]),
        );
        let answer = answer_of(&approvals).unwrap();
        assert_eq!(answer.approve, ["a"]);
        assert_eq!(answer.deny, ["b"]);
        assert_eq!(answer.answer, None);
        let text = message("user", json!([{"type": "text", "text": "Project X"}]));
        assert_eq!(
            answer_of(&text).unwrap().answer.as_deref(),
            Some("Project X")
        );
        assert!(answer_of(&message("assistant", json!([]))).is_err());
    }
}
