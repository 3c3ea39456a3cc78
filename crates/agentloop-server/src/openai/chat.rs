//! `POST /v1/chat/completions`: OpenAI's Chat Completions over agentloop's runs. The last user
//! message is the question; the answer is the run's answer; its steps stream as
//! `reasoning_content` (`[server.openai] reasoning`, or the request's `X-Reasoning` header).
//! The session: the `X-Session-Id` header or `metadata.session_id` (a conversation id, the
//! user's own as the AI SDK's chat ids are: `conversation::find`), else the one whose stored
//! messages the sent history continues (`history`), else a new one. Tools the client sends are
//! client tools: a call to one ends the completion with `finish_reason: "tool_calls"`, and the
//! next request's `tool` messages answer the paused run.

use std::{collections::HashSet, convert::Infallible};

use agentloop_core::{
    ClientTool, RunRequest,
    protocol::{ErrorCode, InputAnswer, InputKind, RunInfo, RunStatus},
};
use axum::{
    Json,
    extract::State,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    chunks::ChatChunks,
    history::{self, MAX_COPIES, Message},
    models::{self, MAIN_AGENT},
    output,
};
use crate::{
    auth::User,
    client_runs::{self, Events},
    conversation,
    error::{ApiError, ErrorBody},
    json_body::{FromJsonBody, JsonBody, read_as},
    live::Reader,
    state::AppState,
    trace_context::TraceParent,
};

/// What the OpenAI SDKs send (sampling settings such as `temperature` are let be: the agent's
/// configuration decides them).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatCompletionBody {
    /// `agentloop` (the default) or a public sub-agent's name (`GET /v1/models`).
    #[serde(default)]
    pub model: Option<String>,
    pub messages: Vec<Message>,
    #[serde(default)]
    pub stream: bool,
    /// `{include_usage: true}`: a last chunk with the run's usage.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub stream_options: Option<Value>,
    /// Client tools (`{type: "function", function: {name, description, parameters}}`).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    /// `text` (the default); `json_schema` or `json_object`: a typed answer, the content a JSON
    /// value valid against the schema (docs/typed-answers.md).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub response_format: Option<Value>,
    /// `session_id`: the conversation this request continues (as the `X-Session-Id` header).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
}

impl FromJsonBody for ChatCompletionBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        read_as(bytes, "a Chat Completions request {model, messages, ...}")
    }
}

/// Answer a conversation (OpenAI's Chat Completions).
///
/// Runs the agent on the last user message of the session the request names (`X-Session-Id`,
/// `metadata.session_id`) or continues (the sent history), and answers with the run's answer as
/// a `chat.completion`, or with `stream: true` as `chat.completion.chunk` events ending with
/// `data: [DONE]`. Tool messages at the end answer the calls of client tools of a paused run.
#[utoipa::path(
    post,
    path = "/v1/chat/completions",
    tag = "openai",
    request_body = ChatCompletionBody,
    params(
        ("X-Session-Id" = Option<String>, Header, description = "The conversation: a session id, or any id of the user's own"),
        ("X-Reasoning" = Option<bool>, Header, description = "Whether the agent's steps stream as reasoning_content (default: [server.openai] reasoning)"),
        ("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace"),
    ),
    responses(
        (status = 200, description = "The completion (`chat.completion`), or its chunks (`stream: true`)",
            content((Object = "application/json"), (Object = "text/event-stream"))),
        (status = 400, description = "Malformed body, no question, tool results that answer no run, or a `response_format` whose schema does not compile", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "No such model, or the conversation is another user's", body = ErrorBody),
        (status = 409, description = "The conversation has a run in progress", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
        (status = 500, description = "The run failed (`code` says why; 502, 503 or 504 for the LLM's and the store's failures)", body = ErrorBody),
        (status = 502, description = "The run failed: the LLM failed or refused (`code` says how)", body = ErrorBody),
        (status = 503, body = ErrorBody),
        (status = 504, description = "The run failed: the LLM's deadline passed", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn chat_completions(
    State(state): State<AppState>,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    headers: HeaderMap,
    JsonBody(body): JsonBody<ChatCompletionBody>,
) -> Result<Response, ApiError> {
    if body.messages.is_empty() {
        return Err(invalid("messages", "messages: must not be empty"));
    }
    let typed = output::output_of(body.response_format.as_ref(), "response_format")?;
    let agent = models::agent_of(&state, body.model.as_deref())?;
    let model = body.model.clone().unwrap_or_else(|| MAIN_AGENT.to_string());
    let reasoning = match headers.get("x-reasoning").and_then(|v| v.to_str().ok()) {
        Some(value) => !matches!(value.trim(), "false" | "0" | "off"),
        None => state.config.openai.reasoning,
    };
    let client_tools = client_tools(&body.tools)?;
    let names: HashSet<String> = client_tools.iter().map(|tool| tool.name.clone()).collect();
    let named = headers
        .get("x-session-id")
        .and_then(|value| value.to_str().ok())
        .map(str::to_string)
        .or_else(|| {
            body.metadata.as_ref()?["session_id"]
                .as_str()
                .map(str::to_string)
        })
        .filter(|id| !id.trim().is_empty());
    let split = history::split(&body.messages);
    // The session, and its run that the request may answer.
    let (session_id, previous) = match &named {
        Some(id) => {
            let (session_id, session) = conversation::find(state.store.as_ref(), &user, id).await?;
            match session {
                Some(session) if session.user_id != user => {
                    return Err(ApiError::not_found("conversation", id));
                }
                Some(_) => {
                    let last = state.store.session_runs(session_id).await?.pop();
                    (Some(session_id), last)
                }
                None => (Some(session_id), None),
            }
        }
        None => match split.started {
            Some(started) => {
                match continued(&state, &user, started, split.answer.as_deref()).await? {
                    Some(run) => (Some(run.session_id), Some(run)),
                    None => (None, None),
                }
            }
            None => (None, None),
        },
    };
    let waiting = previous.filter(|run| run.status == RunStatus::AwaitingInput);
    let created = chrono::Utc::now().timestamp();
    if !split.results.is_empty() {
        let Some(run) = waiting else {
            return Err(invalid(
                "messages",
                "the tool messages answer no run of yours that waits for them: send the \
                 conversation as it was when the completion asked for the calls",
            ));
        };
        let answer = results_of(&state, run.id, split.results).await?;
        let events = resume(&state, &user, run.id, &answer).await?;
        let mapper = ChatChunks::new(run.id, created, &model, reasoning, names);
        return Ok(respond(&state, events, mapper, &body).await);
    }
    let question = match body.messages.last() {
        Some(last) if last.role == "user" && !last.text().trim().is_empty() => last.text(),
        _ => {
            return Err(invalid(
                "messages",
                "messages: the last message must be the user's, with text (or tool messages \
                 answering the calls of a completion)",
            ));
        }
    };
    if let Some(run) = waiting {
        let asks = crate::ag_ui::pending_request(&state, run.id)
            .await?
            .is_some_and(|request| request.kind == InputKind::Clarification);
        if !asks {
            return Err(ApiError::conflict(
                "run_awaiting_input",
                format!(
                    "the conversation's run {} waits for the results of its tool calls: send \
                     them as tool messages",
                    run.id
                ),
            ));
        }
        let answer = InputAnswer {
            answer: Some(question),
            ..InputAnswer::default()
        };
        let events = resume(&state, &user, run.id, &answer).await?;
        let mapper = ChatChunks::new(run.id, created, &model, reasoning, names);
        return Ok(respond(&state, events, mapper, &body).await);
    }
    let mut request = models::request_for(agent, &user);
    request.output = typed;
    let instructions = history::instructions(&body.messages);
    if !instructions.is_empty() {
        let base = request
            .system_prompt
            .clone()
            .unwrap_or_else(|| state.agent.settings().system_prompt.clone());
        request.system_prompt = Some(models::with_instructions(&base, &instructions));
    }
    request.query = question;
    request.session_id = session_id;
    request.client_tools = client_tools;
    request.traceparent = traceparent;
    if session_id.is_none() {
        // A new session: the model reads the sent history for this first run.
        request.history = history::dialogue(split.prior);
        request.include_history = false;
    }
    let events = if named.is_some() {
        state
            .runs
            .start(&state.agent, request, &user, Reader::Events)
            .await?
            .events()
            .boxed()
    } else {
        start_keyed(&state, request, &user, &body.messages).await?
    };
    Ok(respond_started(&state, events, &model, created, reasoning, names, &body).await)
}

/// The run the sent history continues: the copy of the run of `started` that the session ends
/// with and whose answer the client has.
async fn continued(
    state: &AppState,
    user: &str,
    started: &[Message],
    answer: Option<&str>,
) -> Result<Option<RunInfo>, ApiError> {
    let key = history::run_key(started);
    for copy in 0..MAX_COPIES {
        let Some(run) = state.store.run(history::run_id(user, &key, copy)).await? else {
            return Ok(None);
        };
        if run.user_id != user {
            continue;
        }
        let last = state.store.session_runs(run.session_id).await?.pop();
        if last.as_ref().map(|last| last.id) != Some(run.id) {
            continue;
        }
        let stored = match run.answer_message_id {
            Some(id) => state
                .store
                .message(run.session_id, id)
                .await?
                .and_then(|message| message.message.content),
            None => None,
        };
        let same = match (answer, stored.as_deref()) {
            (Some(sent), Some(stored)) => sent.trim() == stored.trim(),
            (None, _) => run.status == RunStatus::AwaitingInput,
            (Some(_), None) => run.status == RunStatus::AwaitingInput,
        };
        if same {
            return Ok(Some(run));
        }
    }
    Ok(None)
}

/// Starts `request` with the id of its messages' key (the first copy free), or follows the
/// copy in progress: the same request sent again follows its run instead of starting another.
async fn start_keyed(
    state: &AppState,
    mut request: RunRequest,
    user: &str,
    messages: &[Message],
) -> Result<Events, ApiError> {
    let key = history::run_key(messages);
    for copy in 0..MAX_COPIES {
        let run_id = history::run_id(user, &key, copy);
        match state.store.run(run_id).await? {
            Some(run) if run.user_id == user && run.status == RunStatus::Running => {
                if let Some(events) =
                    client_runs::follow(state, run_id, user, run.session_id, &run_id.to_string())
                        .await?
                {
                    return Ok(events);
                }
            }
            Some(_) => continue,
            None => {
                request.run_id = Some(run_id);
                let session_id = request.new_session_id();
                request.session_id = Some(session_id);
                return client_runs::start_or_follow(state, request, user, &run_id.to_string())
                    .await;
            }
        }
    }
    Ok(state
        .runs
        .start(&state.agent, request, user, Reader::Events)
        .await?
        .events()
        .boxed())
}

async fn resume(
    state: &AppState,
    user: &str,
    run_id: Uuid,
    answer: &InputAnswer,
) -> Result<Events, ApiError> {
    let resumed = state.agent.resume(run_id, answer).await?;
    Ok(state
        .runs
        .resume(&state.agent, resumed, user, Reader::Events)?
        .events()
        .boxed())
}

/// The results the tool messages give the paused run's calls of client tools.
async fn results_of(
    state: &AppState,
    run_id: Uuid,
    results: &[Message],
) -> Result<InputAnswer, ApiError> {
    let pending = crate::ag_ui::pending_request(state, run_id).await?;
    let mut answer = InputAnswer::default();
    for call in pending.iter().flat_map(|request| &request.calls) {
        let result = results
            .iter()
            .find(|message| message.tool_call_id.as_deref() == Some(call.call_id.as_str()));
        match result {
            Some(message) if call.client => {
                answer.results.insert(call.call_id.clone(), message.text());
            }
            _ => answer.deny.push(call.call_id.clone()),
        }
    }
    if answer.results.is_empty() {
        return Err(invalid(
            "messages",
            "the tool messages answer none of the calls the run waits for (tool_call_id)",
        ));
    }
    Ok(answer)
}

/// The client's tools, read from OpenAI's function tools.
fn client_tools(tools: &[Value]) -> Result<Vec<ClientTool>, ApiError> {
    tools
        .iter()
        .enumerate()
        .map(|(index, tool)| {
            let function = &tool["function"];
            match (tool["type"].as_str(), function["name"].as_str()) {
                (Some("function"), Some(name)) if !name.is_empty() => Ok(ClientTool::new(
                    name,
                    function["description"].as_str().unwrap_or_default(),
                    match &function["parameters"] {
                        Value::Null => json!({"type": "object", "properties": {}}),
                        parameters => parameters.clone(),
                    },
                )),
                _ => Err(invalid(
                    "tools",
                    format!("tools[{index}]: only function tools with a name are supported"),
                )),
            }
        })
        .collect()
}

/// The status of a completion whose run failed with `code`: the LLM's failures are a gateway's
/// (502, 504 for its deadline; 429 still rate limited), the store's 503, the session's as when
/// a run cannot begin, anything else 500.
fn failure_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::LlmRateLimited => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::LlmTimeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::LlmUnreachable
        | ErrorCode::LlmMissingApiKey
        | ErrorCode::LlmUnauthorized
        | ErrorCode::LlmRejected
        | ErrorCode::LlmServerError
        | ErrorCode::LlmTruncatedStream
        | ErrorCode::LlmProtocolError => StatusCode::BAD_GATEWAY,
        ErrorCode::StoreUnavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::SessionNotFound => StatusCode::NOT_FOUND,
        ErrorCode::SessionBusy => StatusCode::CONFLICT,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

fn invalid(field: &str, message: impl Into<String>) -> ApiError {
    ApiError::bad_request("invalid_request", message).with_details(json!({"field": field}))
}

async fn respond_started(
    state: &AppState,
    events: Events,
    model: &str,
    created: i64,
    reasoning: bool,
    names: HashSet<String>,
    body: &ChatCompletionBody,
) -> Response {
    // The run's id is the first event's.
    let mut events = events.peekable();
    let run_id = match std::pin::Pin::new(&mut events).peek().await {
        Some(event) => event.run_id,
        None => Uuid::nil(),
    };
    let mapper = ChatChunks::new(run_id, created, model, reasoning, names);
    respond(state, events.boxed(), mapper, body).await
}

/// The completion, or its chunks.
async fn respond(
    state: &AppState,
    events: Events,
    mut mapper: ChatChunks,
    body: &ChatCompletionBody,
) -> Response {
    let scope = crate::request_id::current();
    let error_message = move |event: &agentloop_core::protocol::Event| match &event.kind {
        agentloop_core::protocol::EventKind::Error { code, message } => {
            crate::disclosure::run_error(&scope, event.run_id, *code, message).message
        }
        _ => String::new(),
    };
    if !body.stream {
        let mut events = events;
        while let Some(event) = events.next().await {
            mapper.push(&event, &error_message);
            if mapper.is_finished() {
                break;
            }
        }
        return match (mapper.is_finished(), mapper.error()) {
            (true, None) => Json(mapper.completion()).into_response(),
            (true, Some((code, message))) => {
                ApiError::new(failure_status(*code), code.as_str(), message.clone()).into_response()
            }
            (false, _) => ApiError::unavailable(
                "the run did not end before the server stopped; send the request again",
            )
            .into_response(),
        };
    }
    let include_usage = body
        .stream_options
        .as_ref()
        .is_some_and(|options| options["include_usage"] == true);
    let frames = events
        .map(Some)
        .chain(futures::stream::once(async { None }))
        .scan(mapper, move |mapper, event| {
            if mapper.is_finished() {
                return futures::future::ready(None);
            }
            let mut out = match &event {
                Some(event) => mapper.push(event, &error_message),
                None => vec![json!({"error": {
                    "message": "the stream ended before the run did; send the request again",
                    "type": "server_error", "param": null, "code": "stream_ended"}})],
            };
            if mapper.is_finished() {
                if let Some((code, message)) = mapper.error() {
                    out.push(json!({"error": {"message": message, "type": "server_error",
                        "param": null, "code": code.as_str()}}));
                } else if include_usage {
                    out.push(mapper.usage_chunk());
                }
            }
            let mut frames: Vec<sse::Event> = out
                .iter()
                .map(|value| {
                    sse::Event::default()
                        .json_data(value)
                        .unwrap_or_else(|_| sse::Event::default().data("{}"))
                })
                .collect();
            if mapper.is_finished() || event.is_none() {
                frames.push(sse::Event::default().data("[DONE]"));
            }
            futures::future::ready(Some(futures::stream::iter(frames)))
        })
        .flatten()
        .map(Ok::<_, Infallible>);
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(state.config.keep_alive()))
        .into_response();
    response.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_runs_status_says_whose_failure_it_was() {
        assert_eq!(
            failure_status(ErrorCode::LlmTimeout),
            StatusCode::GATEWAY_TIMEOUT
        );
        assert_eq!(
            failure_status(ErrorCode::LlmRejected),
            StatusCode::BAD_GATEWAY
        );
        assert_eq!(
            failure_status(ErrorCode::LlmRateLimited),
            StatusCode::TOO_MANY_REQUESTS
        );
        assert_eq!(
            failure_status(ErrorCode::StoreUnavailable),
            StatusCode::SERVICE_UNAVAILABLE
        );
        assert_eq!(
            failure_status(ErrorCode::InternalError),
            StatusCode::INTERNAL_SERVER_ERROR
        );
    }
}
