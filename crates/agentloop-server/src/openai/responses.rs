//! `/v1/responses`: OpenAI's Responses API over agentloop's runs. A response is a run (its id
//! `resp_` and the run's id); `previous_response_id` continues that run's session (or, with
//! `function_call_output` items, answers its calls of client tools); `background: true`
//! answers at once while the run goes on, durable like every run (adopted after a `kill -9`):
//! the client polls `GET /v1/responses/{id}` or streams it (`?stream=true&starting_after=N`).

use std::{collections::HashSet, convert::Infallible};

use agentloop_core::{
    ClientTool,
    protocol::{Event, EventKind, InputAnswer, InputKind, RunStatus},
};
use axum::{
    Json,
    extract::{RawQuery, State},
    http::{HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    models::{self, MAIN_AGENT},
    output,
    response_events::{Echo, ResponseEvents, run_of},
};
use crate::{
    auth::User,
    client_runs::Events,
    error::{ApiError, ErrorBody},
    extract::{PathId, query_value},
    json_body::{FromJsonBody, JsonBody, read_as},
    live::Reader,
    owned::owned_run,
    state::AppState,
    trace_context::TraceParent,
};

/// What the OpenAI SDKs send to create a response (sampling settings are let be).
#[derive(Debug, Deserialize, ToSchema)]
pub struct ResponseBody {
    /// `agentloop` (the default) or a public sub-agent's name.
    #[serde(default)]
    pub model: Option<String>,
    /// The question as text, or items: messages (`{role, content}`, the last user message is
    /// the question) and `function_call_output` (`{call_id, output}`) for a paused response.
    #[schema(value_type = Object)]
    pub input: Value,
    /// Added to the agent's system prompt.
    #[serde(default)]
    pub instructions: Option<String>,
    /// Continue that response's conversation (or answer its function calls).
    #[serde(default)]
    pub previous_response_id: Option<String>,
    /// Answer at once (`queued`); the run goes on, durably.
    #[serde(default)]
    pub background: bool,
    #[serde(default)]
    pub stream: bool,
    /// Echoed: every response is stored (a run always is).
    #[serde(default)]
    pub store: Option<bool>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// Client tools (`{type: "function", name, description, parameters}`).
    #[serde(default)]
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
    /// `{format: {type: "text"}}` (the default); `json_schema` or `json_object`: a typed answer
    /// (docs/typed-answers.md).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub text: Option<Value>,
}

impl FromJsonBody for ResponseBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        read_as(bytes, "a Responses request {model, input, ...}")
    }
}

/// Create a response (OpenAI's Responses API).
///
/// Runs the agent on the input's question: the response object once the run ends, its
/// semantic events (`stream: true`), or at once with `background: true`.
#[utoipa::path(
    post,
    path = "/v1/responses",
    tag = "openai",
    request_body = ResponseBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace")),
    responses(
        (status = 200, description = "The response, or its events (`stream: true`)",
            content((Object = "application/json"), (Object = "text/event-stream"))),
        (status = 400, description = "Malformed body, no question, or a `text.format` whose schema does not compile", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "No such model, or previous response of yours", body = ErrorBody),
        (status = 409, description = "The conversation has a run in progress", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn create_response(
    State(state): State<AppState>,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    JsonBody(body): JsonBody<ResponseBody>,
) -> Result<Response, ApiError> {
    let typed = output::output_of(
        body.text.as_ref().and_then(|text| text.get("format")),
        "text.format",
    )?;
    let agent = models::agent_of(&state, body.model.as_deref())?;
    let echo = Echo {
        model: body.model.clone().unwrap_or_else(|| MAIN_AGENT.to_string()),
        instructions: body.instructions.clone(),
        previous_response_id: body.previous_response_id.clone(),
        background: body.background,
        store: body.store.unwrap_or(true),
        metadata: body.metadata.clone().unwrap_or_else(|| json!({})),
    };
    let input = Input::read(&body.input)?;
    let client_tools = client_tools(&body.tools)?;
    let previous = match &body.previous_response_id {
        Some(id) => {
            let run_id = run_of(id).ok_or_else(|| ApiError::not_found("response", id))?;
            let run = owned_run(&state, run_id, &user)
                .await
                .map_err(|_| ApiError::not_found("response", id))?;
            Some(run)
        }
        None => None,
    };
    let reader = match (body.background, body.stream) {
        (true, false) => Reader::Outcome,
        _ => Reader::Events,
    };
    let started = match previous.filter(|run| run.status == RunStatus::AwaitingInput) {
        Some(run) => {
            let pending = crate::ag_ui::pending_request(&state, run.id).await?;
            let mut answer = InputAnswer::default();
            for call in pending.iter().flat_map(|request| &request.calls) {
                match input.outputs.iter().find(|(id, _)| id == &call.call_id) {
                    Some((_, output)) if call.client => {
                        answer.results.insert(call.call_id.clone(), output.clone());
                    }
                    _ => answer.deny.push(call.call_id.clone()),
                }
            }
            let asks = pending.is_some_and(|r| r.kind == InputKind::Clarification);
            if asks {
                answer.answer = input.question.clone();
            }
            if answer.results.is_empty() && answer.answer.is_none() {
                return Err(ApiError::conflict(
                    "run_awaiting_input",
                    "the previous response waits for the output of its function calls: send \
                     them as function_call_output items",
                ));
            }
            let resumed = state.agent.resume(run.id, &answer).await?;
            state.runs.resume(&state.agent, resumed, &user, reader)?
        }
        None => {
            let Some(question) = input.question.clone() else {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    "input: give the question as text, or end the items with a user message",
                )
                .with_details(json!({"field": "input"})));
            };
            let mut request = models::request_for(agent, &user);
            request.output = typed.clone();
            if let Some(instructions) = body.instructions.as_ref().filter(|t| !t.trim().is_empty())
            {
                let base = request
                    .system_prompt
                    .clone()
                    .unwrap_or_else(|| state.agent.settings().system_prompt.clone());
                request.system_prompt = Some(models::with_instructions(
                    &base,
                    std::slice::from_ref(instructions),
                ));
            }
            request.query = question;
            request.client_tools = client_tools.clone();
            request.traceparent = traceparent;
            match &body.previous_response_id.as_ref().and_then(|id| run_of(id)) {
                Some(run_id) => {
                    let run = owned_run(&state, *run_id, &user).await?;
                    request.session_id = Some(run.session_id);
                }
                None if !input.history.is_empty() => {
                    request.history = input.history.clone();
                    request.include_history = false;
                }
                None => {}
            }
            Box::pin(state.runs.start(&state.agent, request, &user, reader)).await?
        }
    };
    let run_id = started.run.id;
    let created = chrono::Utc::now().timestamp();
    let mapper = ResponseEvents::new(run_id, created, echo);
    if body.background && !body.stream {
        return Ok(Json(mapper.response()).into_response());
    }
    let events = started.events().boxed();
    if body.stream {
        return Ok(stream(&state, events, mapper, None));
    }
    Ok(Json(collect(events, mapper).await).into_response())
}

/// A response (`?stream=true`: its events from the start, or after `starting_after`).
#[utoipa::path(
    get,
    path = "/v1/responses/{id}",
    tag = "openai",
    params(
        ("id" = String, Path, description = "Response id (`resp_...`)"),
        ("stream" = Option<bool>, Query, description = "Stream its events"),
        ("starting_after" = Option<u64>, Query, description = "With stream: the events after this sequence_number"),
    ),
    responses(
        (status = 200, description = "The response, or its events", content((Object = "application/json"), (Object = "text/event-stream"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_response(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    query: RawQuery,
) -> Result<Response, ApiError> {
    let run_id = owned(&state, &id.0, &user).await?;
    let streamed = query_value(query.0.as_deref(), "stream")?.is_some_and(|v| v == "true");
    let after = match query_value(query.0.as_deref(), "starting_after")? {
        Some(text) => Some(text.trim().parse::<u64>().map_err(|_| {
            ApiError::bad_request("invalid_query", "starting_after: must be a sequence_number")
                .with_details(json!({"field": "starting_after"}))
        })?),
        None => None,
    };
    let run = owned_run(&state, run_id, &user).await?;
    let mapper = ResponseEvents::new(run_id, run.started_at.timestamp(), stored_echo());
    if streamed {
        let events = from_start(&state, run_id, &user)?;
        return Ok(stream(&state, events, mapper, after));
    }
    let events = state.store.events(run_id, 0).await?;
    Ok(Json(collect(futures::stream::iter(events), mapper).await).into_response())
}

/// Cancel a response: its run stops at its next safe point.
#[utoipa::path(
    post,
    path = "/v1/responses/{id}/cancel",
    tag = "openai",
    params(("id" = String, Path, description = "Response id")),
    responses(
        (status = 200, description = "The response as it stands (its run stopping)", body = Object),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The response already ended", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn cancel_response(
    State(state): State<AppState>,
    user: User,
    id: PathId,
) -> Result<Response, ApiError> {
    let run_id = owned(&state, &id.0, &user.0).await?;
    let _cancelling = crate::runs::cancel_run(
        State(state.clone()),
        user.clone(),
        PathId(run_id.to_string()),
    )
    .await?;
    let run = owned_run(&state, run_id, &user.0).await?;
    let mapper = ResponseEvents::new(run_id, run.started_at.timestamp(), stored_echo());
    let events = state.store.events(run_id, 0).await?;
    Ok(Json(collect(futures::stream::iter(events), mapper).await).into_response())
}

/// Delete a response: the conversation it belongs to (its session, with every response of
/// it), once its run ended.
#[utoipa::path(
    delete,
    path = "/v1/responses/{id}",
    tag = "openai",
    params(("id" = String, Path, description = "Response id")),
    responses(
        (status = 200, description = "`{id, object: \"response\", deleted: true}`", body = Object),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "Its run is in progress", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn delete_response(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<Json<Value>, ApiError> {
    let run_id = owned(&state, &id.0, &user).await?;
    let run = owned_run(&state, run_id, &user).await?;
    if !run.status.is_final() {
        return Err(ApiError::conflict(
            "run_in_progress",
            format!("response {} is in progress: cancel it first", id.0),
        ));
    }
    state.store.delete_session(run.session_id).await?;
    Ok(Json(
        json!({"id": id.0, "object": "response", "deleted": true}),
    ))
}

/// The run of response `id` when it is `user`'s; 404 otherwise.
async fn owned(state: &AppState, id: &str, user: &str) -> Result<Uuid, ApiError> {
    let run_id = run_of(id).ok_or_else(|| ApiError::not_found("response", id))?;
    owned_run(state, run_id, user)
        .await
        .map_err(|_| ApiError::not_found("response", id))?;
    Ok(run_id)
}

/// What a stored response tells of its request: the model is `agentloop`.
fn stored_echo() -> Echo {
    Echo {
        model: MAIN_AGENT.to_string(),
        store: true,
        metadata: json!({}),
        ..Echo::default()
    }
}

/// The run's events from its first: the store's before a resume, then the live ones here, or
/// the store's (followed while it goes on elsewhere).
fn from_start(state: &AppState, run_id: Uuid, user: &str) -> Result<Events, ApiError> {
    if let Some(run) = state.runs.get(run_id) {
        if run.user_id != user {
            return Err(ApiError::not_found("response", run_id));
        }
        if run.base_seq == 0 {
            return Ok(run.events(0).boxed());
        }
        let store = state.store.clone();
        let base = run.base_seq;
        let earlier = futures::stream::once(async move {
            let mut events = store.events(run_id, 0).await.unwrap_or_default();
            events.retain(|event| event.seq <= base);
            futures::stream::iter(events)
        })
        .flatten();
        return Ok(earlier.chain(run.events(base)).boxed());
    }
    Ok(crate::sse::from_store(state.store.clone(), run_id, 0).boxed())
}

/// The response once its events end.
async fn collect(events: impl Stream<Item = Event> + Send, mut mapper: ResponseEvents) -> Value {
    let scope = crate::request_id::current();
    let mut events = std::pin::pin!(events);
    while let Some(event) = events.next().await {
        mapper.push(&event, |event| shown_error(&scope, event));
        if mapper.is_finished() {
            break;
        }
    }
    mapper.response()
}

fn shown_error(scope: &crate::request_id::RequestScope, event: &Event) -> String {
    match &event.kind {
        EventKind::Error { code, message } => {
            crate::disclosure::run_error(scope, event.run_id, *code, message).message
        }
        _ => String::new(),
    }
}

/// The semantic events, as SSE (`event: TYPE`), after `after` when given.
fn stream(
    state: &AppState,
    events: Events,
    mapper: ResponseEvents,
    after: Option<u64>,
) -> Response {
    let scope = crate::request_id::current();
    let frames = events
        .map(Some)
        .chain(futures::stream::once(async { None }))
        .scan(mapper, move |mapper, event| {
            if mapper.is_finished() {
                return futures::future::ready(None);
            }
            let out = match &event {
                Some(event) => mapper.push(event, |event| shown_error(&scope, event)),
                None => vec![json!({"type": "error", "code": "stream_ended",
                    "message": "the stream ended before the response did: GET /v1/responses/{id}?stream=true&starting_after=N goes on",
                    "param": null, "sequence_number": null})],
            };
            let frames: Vec<sse::Event> = out
                .iter()
                .filter(|value| match (after, value["sequence_number"].as_u64()) {
                    (Some(after), Some(seq)) => seq > after,
                    _ => true,
                })
                .map(|value| {
                    sse::Event::default()
                        .event(value["type"].as_str().unwrap_or("message"))
                        .json_data(value)
                        .unwrap_or_else(|_| sse::Event::default().data("{}"))
                })
                .collect();
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

/// What a request's `input` says.
#[derive(Debug, Default, PartialEq)]
struct Input {
    /// The last user message's text.
    question: Option<String>,
    /// The messages before it.
    history: Vec<agentloop_core::protocol::ChatMessage>,
    /// `function_call_output` items: call id and output.
    outputs: Vec<(String, String)>,
}

impl Input {
    fn read(input: &Value) -> Result<Input, ApiError> {
        let items = match input {
            Value::String(text) => {
                return Ok(Input {
                    question: (!text.trim().is_empty()).then(|| text.clone()),
                    ..Input::default()
                });
            }
            Value::Array(items) => items,
            _ => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    "input: must be text or a list of items",
                )
                .with_details(json!({"field": "input"})));
            }
        };
        let mut read = Input::default();
        let mut messages = Vec::new();
        for item in items {
            match item["type"].as_str().unwrap_or("message") {
                "function_call_output" => {
                    let output = match &item["output"] {
                        Value::String(text) => text.clone(),
                        other => other.to_string(),
                    };
                    if let Some(call) = item["call_id"].as_str() {
                        read.outputs.push((call.to_string(), output));
                    }
                }
                "message" => {
                    let text = match &item["content"] {
                        Value::String(text) => text.clone(),
                        Value::Array(parts) => parts
                            .iter()
                            .filter_map(|part| part["text"].as_str())
                            .collect::<Vec<_>>()
                            .join("\n"),
                        _ => String::new(),
                    };
                    messages.push((item["role"].as_str().unwrap_or("user").to_string(), text));
                }
                _ => {}
            }
        }
        if let Some((role, text)) = messages.last()
            && role == "user"
            && !text.trim().is_empty()
        {
            read.question = Some(text.clone());
            messages.pop();
        }
        read.history = messages
            .into_iter()
            .filter(|(_, text)| !text.is_empty())
            .filter_map(|(role, text)| match role.as_str() {
                "user" => Some(agentloop_core::protocol::ChatMessage::user(text)),
                "assistant" => Some(agentloop_core::protocol::ChatMessage::assistant(text)),
                _ => None,
            })
            .collect();
        Ok(read)
    }
}

/// The client's tools, read from the Responses API's function tools.
fn client_tools(tools: &[Value]) -> Result<Vec<ClientTool>, ApiError> {
    let mut names = HashSet::new();
    tools
        .iter()
        .enumerate()
        .map(
            |(index, tool)| match (tool["type"].as_str(), tool["name"].as_str()) {
                (Some("function"), Some(name)) if !name.is_empty() && names.insert(name) => {
                    Ok(ClientTool::new(
                        name,
                        tool["description"].as_str().unwrap_or_default(),
                        match &tool["parameters"] {
                            Value::Null => json!({"type": "object", "properties": {}}),
                            parameters => parameters.clone(),
                        },
                    ))
                }
                _ => Err(ApiError::bad_request(
                    "invalid_request",
                    format!("tools[{index}]: only function tools, each with a name of its own"),
                )
                .with_details(json!({"field": "tools"}))),
            },
        )
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn input_is_text_or_items_whose_last_user_message_is_the_question() {
        let text = Input::read(&json!("Hi")).unwrap();
        assert_eq!(text.question.as_deref(), Some("Hi"));
        let items = Input::read(&json!([
            {"role": "user", "content": "first"},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "one"}]},
            {"role": "user", "content": [{"type": "input_text", "text": "second"}]},
        ]))
        .unwrap();
        assert_eq!(items.question.as_deref(), Some("second"));
        assert_eq!(items.history.len(), 2);
        let outputs = Input::read(&json!([
            {"type": "function_call_output", "call_id": "c1", "output": "red"},
        ]))
        .unwrap();
        assert_eq!(outputs.question, None);
        assert_eq!(outputs.outputs, [("c1".to_string(), "red".to_string())]);
        assert!(Input::read(&json!(3)).is_err());
    }
}
