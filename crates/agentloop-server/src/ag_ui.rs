//! `POST /v1/ag-ui`: the AG-UI protocol (`@ag-ui/client`'s `HttpAgent`, CopilotKit), an
//! adapter over the same runs, events and store as `/v1/runs`. The `threadId` is the session
//! (`conversation::find`, as the AI SDK's chat id); the client's copy of the earlier
//! messages is not read as history: the session has them. What is new in a request:
//!
//! - the thread's run waits for input: the request answers it. Approvals come as the
//!   protocol's `resume` entries (one per interrupt: `resolved` approves, `cancelled` or
//!   `payload.approved: false` denies), the results of frontend tools as `tool` messages
//!   (`toolCallId`), the answer to a question as a `resume` entry's payload or the last user
//!   message; `forwardedProps.agentloop` may carry agentloop's own answer
//!   (`{approve, deny, answer, results}`) instead;
//! - else the last message, the user's, is a new question. The request's `tools` are frontend
//!   tools (`RunRequest.client_tools`), its `context` is added to the system prompt, and
//!   `forwardedProps.agentloop.output` asks for a typed answer (`output` of `POST /v1/runs`).
//!
//! A request whose `runId` names a run of the thread already (the same request sent again,
//! copies sent at once included) follows that run from its start instead: live when it runs
//! here, else from the store (`client_runs`); a `runId` of another thread's run is a 409. A
//! `runId` that is not a UUID names a run of the user's own, as a text `threadId` names the
//! user's own thread.
//! The answer is the run's events as AG-UI events (`protocols::ag_ui`).

use std::convert::Infallible;

use agentloop_core::{
    ClientTool, RunContext, RunRequest,
    protocol::{Event, EventKind, InputAnswer, InputKind, InputRequest, PendingCall, RunStatus},
};
use axum::{
    extract::State,
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

use crate::{
    auth::User,
    client_runs, conversation,
    error::{ApiError, ErrorBody},
    json_body::{FromJsonBody, JsonBody, read_as},
    live::Reader,
    protocols::ag_ui::{AgUiStream, tool_call_id},
    state::AppState,
    trace_context::TraceParent,
};

/// AG-UI's `RunAgentInput` (`protocolVersion` and `parentRunId` are let be).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RunAgentInput {
    /// The conversation: a UUID is the session's id; any other id names the user's own
    /// session derived from it.
    pub thread_id: String,
    /// The client's id of this run; a UUID is the agentloop run's id, any other id names the
    /// user's own run derived from it. The same id again follows that run.
    pub run_id: String,
    /// The client's messages; only what is new is read (the last user message, tool results).
    #[serde(default)]
    pub messages: Vec<AgUiMessage>,
    /// Frontend tools: offered to the model, run by the client.
    #[serde(default)]
    pub tools: Vec<AgUiTool>,
    /// The client's state: sent back with the plan in `STATE_SNAPSHOT`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub state: Option<Value>,
    /// What the application tells the model, added to the system prompt.
    #[serde(default)]
    pub context: Vec<AgUiContext>,
    /// `{"agentloop": {"approve", "deny", "answer", "results"}}` answers a waiting run.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub forwarded_props: Option<Value>,
    /// Answers to the interrupts of the run before (approvals, a question).
    #[serde(default)]
    pub resume: Vec<ResumeEntry>,
}

impl FromJsonBody for RunAgentInput {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        read_as(bytes, "AG-UI's RunAgentInput")
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

/// A message of the client's copy of the conversation.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgUiMessage {
    pub role: String,
    /// Text, or content parts: `{type: "text", text}`, and in the last user message its files
    /// (`binary`, `image`, `document` parts).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// Of a `tool` message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

/// A frontend tool.
#[derive(Debug, Deserialize, ToSchema)]
pub struct AgUiTool {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// JSON Schema of its arguments.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
}

#[derive(Debug, Deserialize, ToSchema)]
pub struct AgUiContext {
    pub description: String,
    pub value: String,
}

/// The answer to one interrupt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResumeEntry {
    pub interrupt_id: String,
    /// `resolved` or `cancelled`.
    pub status: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
}

/// Run the agent (AG-UI's `HttpAgent`).
///
/// Starts a run of the thread's session with the last user message as the question, or
/// answers the thread's run that waits for input (approvals as `resume` entries, frontend tool
/// results as `tool` messages, a question's answer), or, for a `runId` the thread ran already,
/// follows that run again. The answer is an SSE stream of AG-UI events from `RUN_STARTED` to
/// `RUN_FINISHED` (or `RUN_ERROR`).
#[utoipa::path(
    post,
    path = "/v1/ag-ui",
    tag = "ag-ui",
    request_body = RunAgentInput,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace")),
    responses(
        (status = 200, description = "The AG-UI events of the run", content_type = "text/event-stream"),
        (status = 400, description = "Malformed body, no message to act on, or an answer that does not fit", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "The thread is another user's", body = ErrorBody),
        (status = 409, description = "The thread has a run in progress (`session_busy`), or the runId is another thread's run (`run_id_taken`)", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn run_agent(
    State(state): State<AppState>,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    JsonBody(body): JsonBody<RunAgentInput>,
) -> Result<Response, ApiError> {
    for (field, value) in [("threadId", &body.thread_id), ("runId", &body.run_id)] {
        if value.trim().is_empty() {
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("{field}: must not be empty"),
            ));
        }
    }
    let (session_id, session) =
        conversation::find(state.store.as_ref(), &user, &body.thread_id).await?;
    let run_id = match Uuid::parse_str(&body.run_id) {
        Ok(id) => id,
        Err(_) => conversation::derived("agentloop-ag-ui-run", &user, &body.run_id),
    };
    let mapper = || {
        AgUiStream::new(
            body.thread_id.clone(),
            body.run_id.clone(),
            body.state.clone().unwrap_or(Value::Null),
        )
    };
    if session
        .as_ref()
        .is_some_and(|session| session.user_id != user)
    {
        return Err(ApiError::not_found("thread", &body.thread_id));
    }
    // The same request again: follow its run from its start.
    if let Some(events) =
        client_runs::follow(&state, run_id, &user, session_id, &body.run_id).await?
    {
        return Ok(ag_ui_stream(events, mapper(), state.config.keep_alive()));
    }
    // A new thread has no run waiting for its answer.
    let waiting = match session {
        None => None,
        Some(_) => state
            .store
            .session_runs(session_id)
            .await?
            .pop()
            .filter(|run| run.status == RunStatus::AwaitingInput),
    };
    let Some(waiting) = waiting else {
        return start(
            &state,
            &body,
            session_id,
            run_id,
            &user,
            traceparent,
            mapper(),
        )
        .await;
    };
    let request = pending_request(&state, waiting.id).await?;
    let input = answer_of(&body, waiting.id, request.as_ref())?;
    let resumed = state.agent.resume(waiting.id, &input).await?;
    let live = state
        .runs
        .resume(&state.agent, resumed, &user, Reader::Events)?;
    let events = live.events();
    let mapper = mapper().with_client_results(input.results.into_keys());
    Ok(ag_ui_stream(events, mapper, state.config.keep_alive()))
}

/// Starts a run of the last user message, with the request's frontend tools and context.
async fn start(
    state: &AppState,
    body: &RunAgentInput,
    session_id: Uuid,
    run_id: Uuid,
    user: &str,
    traceparent: Option<String>,
    mapper: AgUiStream,
) -> Result<Response, ApiError> {
    let last = body.messages.last().filter(|last| last.role == "user");
    // Its binary, image and document content, admitted before the run begins: a refusal
    // stores nothing.
    let attachments = crate::attachments::admit_all(
        last.map(files_of).unwrap_or_default().into_iter(),
        &state.agent.settings().attachments,
    )?;
    let query = match last.map(text_of) {
        Some(Some(text)) => Some(text),
        Some(None) if !attachments.is_empty() => Some(String::new()),
        _ => None,
    };
    let Some(query) = query else {
        return Err(ApiError::bad_request(
            "invalid_body",
            "messages: the last message must be the user's, with text or files",
        ));
    };
    let system_prompt = (!body.context.is_empty()).then(|| {
        let mut prompt = state.agent.settings().system_prompt.clone();
        prompt.push_str("\n\nWhat the application says about the user's situation:");
        for entry in &body.context {
            prompt.push_str(&format!("\n- {}: {}", entry.description, entry.value));
        }
        prompt
    });
    let output = output_of(body)?;
    let request = RunRequest {
        query,
        attachments,
        output,
        session_id: Some(session_id),
        run_id: Some(run_id),
        system_prompt,
        client_tools: body
            .tools
            .iter()
            .map(|tool| {
                ClientTool::new(
                    tool.name.clone(),
                    tool.description.clone(),
                    tool.parameters.clone().unwrap_or(Value::Null),
                )
            })
            .collect(),
        context: RunContext {
            user_id: Some(user.to_string()),
            ..RunContext::default()
        },
        traceparent,
        ..RunRequest::default()
    };
    let events = client_runs::start_or_follow(state, request, user, &body.run_id).await?;
    Ok(ag_ui_stream(events, mapper, state.config.keep_alive()))
}

/// What the paused run `run_id` waits for: its last `input_required` event.
pub(crate) async fn pending_request(
    state: &AppState,
    run_id: Uuid,
) -> Result<Option<InputRequest>, ApiError> {
    let events = state.store.events(run_id, 0).await?;
    Ok(events.into_iter().rev().find_map(|event| match event.kind {
        // A running call's question (elicitation) is not a pause.
        EventKind::InputRequired {
            kind,
            question,
            calls,
            elicitation: None,
        } if event.parent_run_id.is_none() => Some(InputRequest {
            kind,
            question,
            calls,
            elicitation: None,
        }),
        _ => None,
    }))
}

/// Where in `forwardedProps` a typed answer is asked for.
const OUTPUT_FIELD: &str = "forwardedProps.agentloop.output";

/// The typed answer `forwardedProps.agentloop.output` asks for, checked.
fn output_of(body: &RunAgentInput) -> Result<Option<agentloop_core::OutputSpec>, ApiError> {
    let Some(output) = body
        .forwarded_props
        .as_ref()
        .and_then(|props| props.get("agentloop"))
        .and_then(|own| own.get("output"))
        .filter(|output| !output.is_null())
    else {
        return Ok(None);
    };
    let output: agentloop_core::OutputSpec =
        serde_json::from_value(output.clone()).map_err(|error| {
            ApiError::bad_request("invalid_body", format!("{OUTPUT_FIELD}: {error}"))
                .with_details(serde_json::json!({ "field": OUTPUT_FIELD }))
        })?;
    crate::body::check_output(&output, OUTPUT_FIELD)?;
    Ok(Some(output))
}

/// The keys of `forwardedProps.agentloop` that answer a waiting run (`InputAnswer`'s).
const ANSWER_KEYS: [&str; 5] = ["approve", "deny", "answer", "results", "elicitation"];

/// The answer the request gives the run `run_id` that waits for `request`.
fn answer_of(
    body: &RunAgentInput,
    run_id: Uuid,
    request: Option<&InputRequest>,
) -> Result<InputAnswer, ApiError> {
    if let Some(own) = body
        .forwarded_props
        .as_ref()
        .and_then(|props| props.get("agentloop"))
        .filter(|own| ANSWER_KEYS.iter().any(|key| own.get(key).is_some()))
    {
        return serde_json::from_value(own.clone()).map_err(|error| {
            ApiError::bad_request("invalid_body", format!("forwardedProps.agentloop: {error}"))
        });
    }
    let mut answer = InputAnswer::default();
    let id_of = |call: &PendingCall| tool_call_id(run_id, &call.call_id);
    let calls = request
        .map(|request| request.calls.as_slice())
        .unwrap_or_default();
    for entry in &body.resume {
        let resolved = entry.status == "resolved";
        if let Some(call) = calls
            .iter()
            .find(|call| !call.client && id_of(call) == entry.interrupt_id)
        {
            let approved = resolved && approval_of(entry.payload.as_ref());
            if approved {
                answer.approve.push(call.call_id.clone());
            } else {
                answer.deny.push(call.call_id.clone());
            }
        } else if resolved && entry.interrupt_id == run_id.to_string() {
            answer.answer = entry.payload.as_ref().and_then(answer_text);
        }
    }
    for call in calls.iter().filter(|call| call.client) {
        let result = body.messages.iter().rev().find(|message| {
            message.role == "tool" && message.tool_call_id.as_deref() == Some(id_of(call).as_str())
        });
        if let Some(message) = result {
            let text = text_of(message)
                .or_else(|| message.error.clone())
                .unwrap_or_default();
            answer.results.insert(call.call_id.clone(), text);
        } else if !body.resume.is_empty() {
            // Paused with interrupts too, the client was not asked to run it (the outcome
            // was the interrupts): the model reads it did not run, and may call it again.
            answer.deny.push(call.call_id.clone());
        }
    }
    let asks = request.is_some_and(|request| request.kind == InputKind::Clarification);
    if asks && answer.answer.is_none() {
        answer.answer = body
            .messages
            .last()
            .filter(|message| message.role == "user")
            .and_then(text_of);
    }
    if answer == InputAnswer::default() {
        return Err(ApiError::bad_request(
            "invalid_answer",
            "the thread's run waits for input: answer its interrupts with resume entries, the \
             results of its frontend tools with tool messages, or its question with a user \
             message",
        ));
    }
    Ok(answer)
}

/// Whether a resolved interrupt's payload approves: anything but `false` or
/// `{"approved": false}`.
fn approval_of(payload: Option<&Value>) -> bool {
    match payload {
        Some(Value::Bool(approved)) => *approved,
        Some(Value::Object(fields)) => fields
            .get("approved")
            .and_then(Value::as_bool)
            .unwrap_or(true),
        _ => true,
    }
}

/// The answer to a question in a resume payload: text, or `{"answer": text}`.
fn answer_text(payload: &Value) -> Option<String> {
    let text = match payload {
        Value::String(text) => text.as_str(),
        Value::Object(fields) => fields.get("answer").and_then(Value::as_str)?,
        _ => return None,
    };
    (!text.trim().is_empty()).then(|| text.to_string())
}

/// The files of a user message's content, as (url, media type, name): `binary` parts
/// (`{mimeType, data (base64) | url, filename}`) and the typed parts of the multimodal draft
/// (`image`, `document`, `audio`, `video` with a `source` of type `data` or `url`). A part that
/// names an uploaded file by `id` only is given an empty URL, which is refused: agentloop keeps
/// no uploads of its own.
fn files_of(message: &AgUiMessage) -> Vec<(String, Option<String>, Option<String>)> {
    let Some(Value::Array(parts)) = &message.content else {
        return Vec::new();
    };
    let text = |value: &Value| value.as_str().map(str::to_owned);
    parts
        .iter()
        .filter_map(|part| match part["type"].as_str() {
            Some("binary") => {
                let media_type = text(&part["mimeType"]);
                let url = match (text(&part["data"]), text(&part["url"])) {
                    (Some(data), _) => format!(
                        "data:{};base64,{data}",
                        media_type.as_deref().unwrap_or_default()
                    ),
                    (None, Some(url)) => url,
                    (None, None) => String::new(),
                };
                Some((url, media_type, text(&part["filename"])))
            }
            Some("image" | "document" | "audio" | "video") => {
                let source = &part["source"];
                let media_type = text(&source["mimeType"]);
                let value = text(&source["value"]).unwrap_or_default();
                let url = match source["type"].as_str() {
                    Some("data") => format!(
                        "data:{};base64,{value}",
                        media_type.as_deref().unwrap_or_default()
                    ),
                    _ => value,
                };
                Some((url, media_type, text(&part["filename"])))
            }
            _ => None,
        })
        .collect()
}

/// The text of a message: its content when text, else its `text` parts; none when blank.
fn text_of(message: &AgUiMessage) -> Option<String> {
    let text = match &message.content {
        Some(Value::String(text)) => text.clone(),
        Some(Value::Array(parts)) => parts
            .iter()
            .filter(|part| part["type"] == "text")
            .filter_map(|part| part["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => return None,
    };
    (!text.trim().is_empty()).then_some(text)
}

/// The AG-UI events of `events`. A stream that ends before the run does (the server stops, a
/// client too slow to follow) ends with `RUN_ERROR` saying so: the same request again
/// re-attaches.
fn ag_ui_stream(
    events: impl Stream<Item = Event> + Send + 'static,
    mapper: AgUiStream,
    keep_alive: std::time::Duration,
) -> Response {
    let frames = events
        .map(Some)
        .chain(futures::stream::once(async { None }))
        .scan(mapper, |mapper, event| {
            if mapper.is_finished() {
                return futures::future::ready(None);
            }
            let out = match event {
                Some(event) => mapper.push(&event),
                None => vec![json!({
                    "type": "RUN_ERROR",
                    "code": "stream_ended",
                    "message": "the stream ended before the run did; send the same request \
                                (the same runId) again to follow the run",
                })],
            };
            let frames: Vec<sse::Event> = out
                .iter()
                .map(|value| {
                    sse::Event::default()
                        .json_data(value)
                        .unwrap_or_else(|_| sse::Event::default().data("{}"))
                })
                .collect();
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
    response
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn body(value: Value) -> RunAgentInput {
        serde_json::from_value(value).unwrap()
    }

    fn waiting(kind: InputKind, calls: Vec<PendingCall>) -> InputRequest {
        InputRequest {
            kind,
            question: None,
            calls,
            elicitation: None,
        }
    }

    fn call(id: &str, client: bool) -> PendingCall {
        PendingCall {
            call_id: id.into(),
            tool: "t".into(),
            arguments: json!({}),
            client,
        }
    }

    #[test]
    fn resume_entries_approve_and_deny_and_tool_messages_carry_client_results() {
        let request = waiting(
            InputKind::Approval,
            vec![
                call("a", false),
                call("b", false),
                call("c", false),
                call("f", true),
            ],
        );
        let run = Uuid::from_u128(3);
        let id = |call: &str| tool_call_id(run, call);
        let body = body(json!({
            "threadId": "t", "runId": "r",
            "messages": [
                {"id": "1", "role": "tool", "toolCallId": id("old"), "content": "earlier"},
                {"id": "2", "role": "tool", "toolCallId": id("f"), "content": "{\"picked\":3}"},
                {"id": "3", "role": "tool", "toolCallId": "f", "content": "not this run's id"},
            ],
            "resume": [
                {"interruptId": id("a"), "status": "resolved"},
                {"interruptId": id("b"), "status": "cancelled"},
                {"interruptId": id("c"), "status": "resolved", "payload": {"approved": false}},
            ],
        }));
        let answer = answer_of(&body, run, Some(&request)).unwrap();
        assert_eq!(answer.approve, ["a"]);
        assert_eq!(answer.deny, ["b", "c"]);
        assert_eq!(answer.results.len(), 1, "only the waiting call's result");
        assert_eq!(answer.results["f"], "{\"picked\":3}");
        assert_eq!(answer.answer, None);
    }

    #[test]
    fn a_frontend_call_paused_beside_interrupts_is_denied_when_only_they_are_answered() {
        let run = Uuid::from_u128(4);
        let request = waiting(InputKind::Approval, vec![call("a", false), call("f", true)]);
        let body = body(json!({
            "threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": tool_call_id(run, "a"), "status": "resolved"}],
        }));
        let answer = answer_of(&body, run, Some(&request)).unwrap();
        assert_eq!(answer.approve, ["a"]);
        assert_eq!(answer.deny, ["f"]);
        assert!(answer.results.is_empty());
    }

    #[test]
    fn a_question_is_answered_by_a_resume_payload_or_the_last_user_message() {
        let run = Uuid::from_u128(5);
        let request = waiting(InputKind::Clarification, Vec::new());
        let by_resume = body(json!({
            "threadId": "t", "runId": "r", "messages": [],
            "resume": [{"interruptId": run.to_string(), "status": "resolved", "payload": {"answer": "Project X"}}],
        }));
        let answer = answer_of(&by_resume, run, Some(&request)).unwrap();
        assert_eq!(answer.answer.as_deref(), Some("Project X"));
        let by_message = body(json!({
            "threadId": "t", "runId": "r",
            "messages": [{"id": "1", "role": "user", "content": [{"type": "text", "text": "Project Y"}]}],
        }));
        let answer = answer_of(&by_message, run, Some(&request)).unwrap();
        assert_eq!(answer.answer.as_deref(), Some("Project Y"));
    }

    #[test]
    fn forwarded_props_carry_agentloops_own_answer_and_nothing_is_refused() {
        let request = waiting(InputKind::Approval, vec![call("a", false)]);
        // agentloop's own answer names calls by agentloop's ids.
        let own = body(json!({
            "threadId": "t", "runId": "r", "messages": [],
            "forwardedProps": {"agentloop": {"deny": ["a"]}},
        }));
        assert_eq!(
            answer_of(&own, Uuid::nil(), Some(&request)).unwrap().deny,
            ["a"]
        );
        let nothing = body(json!({"threadId": "t", "runId": "r", "messages": []}));
        let error = answer_of(&nothing, Uuid::nil(), Some(&request)).unwrap_err();
        assert_eq!(error.code, "invalid_answer");
        // A typed answer's schema sent with every request is no answer.
        let typed_only = body(json!({
            "threadId": "t", "runId": "r", "messages": [],
            "forwardedProps": {"agentloop": {"output": {"schema": {"type": "object"}}}},
        }));
        let error = answer_of(&typed_only, Uuid::nil(), Some(&request)).unwrap_err();
        assert_eq!(error.code, "invalid_answer");
    }

    #[test]
    fn forwarded_props_ask_for_a_typed_answer_and_a_bad_schema_says_where() {
        let asked = body(json!({
            "threadId": "t", "runId": "r", "messages": [],
            "forwardedProps": {"agentloop": {"output": {
                "name": "ticket", "schema": {"type": "object", "required": ["title"]},
            }}},
        }));
        let output = output_of(&asked).unwrap().unwrap();
        assert_eq!(output.name, "ticket");
        assert_eq!(output.schema["required"], json!(["title"]));
        let none = body(json!({"threadId": "t", "runId": "r", "messages": []}));
        assert_eq!(output_of(&none).unwrap(), None);
        for (output, field) in [
            (
                json!({"schema": {"type": "nope"}}),
                "forwardedProps.agentloop.output.schema",
            ),
            (
                json!({"name": "a b", "schema": {}}),
                "forwardedProps.agentloop.output.name",
            ),
            (json!({"name": 3}), "forwardedProps.agentloop.output"),
        ] {
            let bad = body(json!({
                "threadId": "t", "runId": "r", "messages": [],
                "forwardedProps": {"agentloop": {"output": output}},
            }));
            let error = output_of(&bad).unwrap_err();
            assert_eq!(error.code, "invalid_body");
            assert_eq!(error.details.as_ref().unwrap()["field"], field, "{output}");
        }
    }
}
