//! `/v1/runs`: start a run (SSE or JSON), look at it, follow its events, cancel it.

use agentloop_core::{
    RunOutcome, RunRequest,
    protocol::{
        FinalizeReason, InputRequest, MessageKind, Plan, Role, RunInfo, RunStatus, SessionMessage,
        ToolExecutionRecord, Usage,
    },
};
use axum::{
    Json,
    extract::{Path, State, rejection::PathRejection},
    http::{HeaderMap, StatusCode},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    auth::User,
    body::{InputBody, RunBody},
    error::{ApiError, ErrorBody, ErrorDetail},
    extract::{PathId, resume_point},
    json_body::JsonBody,
    live::{Reader, Started},
    owned::owned_run,
    sse,
    state::AppState,
    trace_context::TraceParent,
};

/// The finished run (`stream: false`).
#[derive(Debug, Serialize, ToSchema)]
pub struct RunResult {
    pub run_id: Uuid,
    pub session_id: Uuid,
    /// `completed`, `failed` or `cancelled`: a run that failed is still a run; its `error`
    /// says why.
    pub status: RunStatus,
    pub answer: Option<String>,
    /// The typed answer (a run with an `output` schema), valid against the schema.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<serde_json::Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    pub user_message: Option<SessionMessage>,
    pub assistant_message: Option<SessionMessage>,
    /// The execution trace of the run, as saved in the session.
    pub system_message: Option<SessionMessage>,
    /// What the run waits for, when it is `awaiting_input`: answer with
    /// `POST /v1/runs/{id}/input`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub input_required: Option<InputRequest>,
    pub agent_metadata: AgentMetadata,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AgentMetadata {
    pub iterations: u32,
    /// Tool calls that ran (successfully or not).
    pub tools_used: u32,
    pub execution_trace: Vec<ToolExecutionRecord>,
    pub usage: Usage,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finalize_reason: Option<FinalizeReason>,
    /// The run's plan as it stood at the end (with `[agent.planning]`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub plan: Option<Plan>,
}

/// A run as the store knows it, with its tool calls.
#[derive(Debug, Serialize, ToSchema)]
pub struct RunDetails {
    /// Its `error_message`, when it failed, is the plain sentence of `error`.
    #[serde(flatten)]
    pub run: RunInfo,
    /// Why it failed: the code, a plain message, the request's id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<ErrorDetail>,
    /// The answer, once the run ended with one (from its session's messages).
    pub answer: Option<String>,
    pub execution_trace: Vec<ToolExecutionRecord>,
}

/// What a cancellation did.
#[derive(Debug, Serialize, ToSchema)]
pub struct CancelAnswer {
    pub run_id: Uuid,
    /// `cancelling`: the run stops at its next safe point and ends `cancelled`.
    pub status: String,
}

/// Start a run.
///
/// With `stream: true` (the default) the answer is `text/event-stream`: the run's events as
/// they happen, ending with `done`. With `stream: false` the answer is the finished run. Runs
/// outlive the connection: a client that leaves can follow again with
/// `GET /v1/runs/{id}/events`.
#[utoipa::path(
    post,
    path = "/v1/runs",
    tag = "runs",
    request_body = RunBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace")),
    responses(
        (status = 200, description = "The run's events (`stream: true`) or the finished run (`stream: false`)",
            content((RunResult = "application/json"), (agentloop_core::protocol::Event = "text/event-stream"))),
        (status = 400, description = "Malformed or incomplete body; `details.field` names the field", body = ErrorBody),
        (status = 401, description = "Missing or invalid API key", body = ErrorBody),
        (status = 404, description = "No such session of yours", body = ErrorBody),
        (status = 409, description = "The session has a run in progress", body = ErrorBody),
        (status = 413, description = "Body too large (server.max_body_bytes), or attachments over their limits (`attachment_too_large`, `too_many_attachments`; `details.limit` names the key)", body = ErrorBody),
        (status = 429, description = "Too many runs in progress (`too_many_runs`), or the user's daily budget is spent (`budget_exceeded`, until midnight UTC); see Retry-After", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn create_run(
    State(state): State<AppState>,
    user: User,
    trace: TraceParent,
    body: JsonBody<RunBody>,
) -> Result<Response, ApiError> {
    start(state, user, trace, body).await
}

/// Start a run (the route of the seed application; same body and answers as `POST /v1/runs`).
#[utoipa::path(
    post,
    path = "/copilot-agent",
    tag = "runs",
    request_body = RunBody,
    params(("traceparent" = Option<String>, Header, description = "W3C trace context: the run's spans continue this trace")),
    responses(
        (status = 200, description = "Same as POST /v1/runs",
            content((RunResult = "application/json"), (agentloop_core::protocol::Event = "text/event-stream"))),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn copilot_agent(
    State(state): State<AppState>,
    user: User,
    trace: TraceParent,
    body: JsonBody<RunBody>,
) -> Result<Response, ApiError> {
    start(state, user, trace, body).await
}

async fn start(
    state: AppState,
    User(user): User,
    TraceParent(traceparent): TraceParent,
    JsonBody(mut body): JsonBody<RunBody>,
) -> Result<Response, ApiError> {
    let stream = body.stream;
    // Admitted before the run begins: a refused attachment leaves nothing in the store.
    let attachments = crate::attachments::admit(
        std::mem::take(&mut body.attachments),
        &state.agent.settings().attachments,
    )?;
    let query = crate::mcp_context::opening(state.mcp.as_deref(), &body).await?;
    let request = RunRequest {
        traceparent,
        query,
        attachments,
        ..body.into_request(&user)
    };
    // Boxed: the run's beginning (the store's transaction) is the largest part of this future,
    // and a request that waits for the run's end would keep its room for the whole run.
    let reader = Reader::events_if(stream);
    let run = Box::pin(state.runs.start(&state.agent, request, &user, reader)).await?;
    answer(&state, run).await
}

/// The answer to a request that started (or resumed) a run: its events from there on, or
/// the run once it ends (or pauses again).
async fn answer(state: &AppState, started: Started) -> Result<Response, ApiError> {
    if started.reads_events() {
        return Ok(sse::response(started.events(), state.config.keep_alive()));
    }
    let outcome = started
        .run
        .outcome()
        .await
        .ok_or_else(|| ApiError::internal("the run ended without an outcome"))?;
    Ok(Json(result(&outcome)).into_response())
}

/// Answer a run that waits for input: approve or deny the calls of its `input_required` event.
///
/// The run resumes, also after a server restart: approved calls run, denied ones become tool
/// errors the model reads. The answer is like the one of `POST /v1/runs`: the run's further
/// events (or, with `stream: false`, the run once it ends or pauses again).
///
/// A body with `elicitation` answers a question a running tool call asks (`input_required`
/// with kind `elicitation`; the run did not pause): the answer goes to the call at once and
/// the route answers `200` with `ElicitationAnswered` (follow the run with
/// `GET /v1/runs/{id}/events`). `accept` content must fit the question's `requested_schema`
/// (its defaults fill what it leaves out): else `400 invalid_elicitation`; a run with no such
/// question open in this instance answers `409 no_open_question`.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/input",
    tag = "runs",
    params(("id" = Uuid, Path, description = "Run id")),
    request_body = InputBody,
    responses(
        (status = 200, description = "The run's further events, or the run as JSON; an elicitation's answer taken",
            content((RunResult = "application/json"), (crate::elicitation::ElicitationAnswered = "application/json"), (agentloop_core::protocol::Event = "text/event-stream"))),
        (status = 400, description = "The decision does not fit the waiting calls, or the elicitation's content its schema (`invalid_elicitation`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The run does not wait for input", body = ErrorBody),
        (status = 413, body = ErrorBody), (status = 429, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn run_input(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    JsonBody(input): JsonBody<InputBody>,
) -> Result<Response, ApiError> {
    let id = id.parse("run")?;
    owned_run(&state, id, &user).await?;
    if let Some(answer) = input.input.elicitation.clone() {
        return crate::elicitation::answer(&state, id, &input.input, answer);
    }
    let resumed = state.agent.resume(id, &input.input).await?;
    let run = state.runs.resume(
        &state.agent,
        resumed,
        &user,
        Reader::events_if(input.stream),
    )?;
    answer(&state, run).await
}

fn result(outcome: &RunOutcome) -> RunResult {
    let dialogue = |message: &&SessionMessage, role: Role| {
        message.kind == MessageKind::Dialogue && message.message.role == role
    };
    // The question opens the run (a later user message answers a clarification); the answer,
    // or the question the run asks, closes it.
    let user_message = outcome
        .messages
        .iter()
        .find(|m| dialogue(m, Role::User))
        .cloned();
    let assistant_message = outcome
        .messages
        .iter()
        .rev()
        .find(|m| dialogue(m, Role::Assistant))
        .cloned();
    let system_message = outcome
        .messages
        .iter()
        .rev()
        .find(|m| m.kind == MessageKind::Trace)
        .cloned();
    RunResult {
        run_id: outcome.run_id,
        session_id: outcome.session_id,
        status: outcome.status,
        answer: outcome.answer.clone(),
        output: outcome.output.clone(),
        error: outcome.failure.as_ref().map(|failure| {
            let scope = crate::request_id::current();
            crate::disclosure::run_error(&scope, outcome.run_id, failure.code, &failure.message)
        }),
        user_message,
        assistant_message,
        system_message,
        input_required: outcome.input_required.clone(),
        agent_metadata: AgentMetadata {
            iterations: outcome.iterations,
            tools_used: outcome.tools_used,
            execution_trace: outcome.records.clone(),
            usage: outcome.usage,
            finalize_reason: outcome.finalize_reason,
            plan: outcome.plan.clone(),
        },
    }
}

/// A run: its status, counters, error, and tool calls.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}",
    tag = "runs",
    params(("id" = Uuid, Path, description = "Run id")),
    responses(
        (status = 200, description = "The run: its status, counters, error, answer and tool calls", body = RunDetails),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_run(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<Json<RunDetails>, ApiError> {
    let id = id.parse("run")?;
    let run = owned_run(&state, id, &user).await?;
    let execution_trace = state.store.tool_executions(id).await?;
    let answer = match run.answer_message_id {
        Some(message_id) => state
            .store
            .message(run.session_id, message_id)
            .await?
            .and_then(|message| message.message.content),
        None => None,
    };
    let scope = crate::request_id::current();
    let error = run.error_code.map(|code| {
        let detail = run.error_message.as_deref().unwrap_or_default();
        crate::disclosure::run_error(&scope, id, code, detail)
    });
    Ok(Json(RunDetails {
        run: crate::disclosure::shown_run(&scope, run),
        error,
        answer,
        execution_trace,
    }))
}

/// One tool call of a run with its whole output: the record the session's answer shows cut
/// (`truncated`) when the output is longer than 16 KiB.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/tools/{call_id}",
    tag = "runs",
    params(
        ("id" = Uuid, Path, description = "Run id"),
        ("call_id" = String, Path, description = "The call's id: `call_id` of its record, `tool_call_id` of its tool message"),
    ),
    responses(
        (status = 200, description = "The tool call with its whole output", body = ToolExecutionRecord),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No such run of yours, or no such call in it", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_tool_execution(
    State(state): State<AppState>,
    User(user): User,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Json<ToolExecutionRecord>, ApiError> {
    let Path((id, call_id)) = path.map_err(|rejection| {
        ApiError::bad_request(
            "invalid_id",
            format!("the path cannot be read: {}", rejection.body_text()),
        )
    })?;
    let id = PathId(id).parse("run")?;
    owned_run(&state, id, &user).await?;
    match state.store.tool_execution(id, &call_id).await? {
        Some(record) => Ok(Json(record)),
        None => Err(ApiError::not_found(
            "tool call",
            format!("{call_id:?} of run {id}"),
        )),
    }
}

/// Follow a run: its events so far, then live ones, ending with `done`.
///
/// `Last-Event-ID` (or `?after=SEQ`) resumes after that event.
#[utoipa::path(
    get,
    path = "/v1/runs/{id}/events",
    tag = "runs",
    params(
        ("id" = Uuid, Path, description = "Run id"),
        ("Last-Event-ID" = Option<u64>, Header, description = "Resume after this seq"),
        ("after" = Option<u64>, Query, description = "Resume after this seq"),
    ),
    responses(
        (status = 200, description = "The events", content_type = "text/event-stream", body = agentloop_core::protocol::Event),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 410, description = "The run's events were pruned (`[store.retention]`)", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn run_events(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    headers: HeaderMap,
    query: axum::extract::RawQuery,
) -> Result<Response, ApiError> {
    let id = id.parse("run")?;
    let after = resume_point(&headers, query.0.as_deref())?;
    if let Some(run) = state.runs.get(id) {
        if run.user_id != user {
            return Err(ApiError::not_found("run", id));
        }
        // A finished run lingers here a while; its events may have been pruned meanwhile.
        if run.is_finished() {
            refuse_pruned(&owned_run(&state, id, &user).await?)?;
        }
        // A run resumed here has its events before the pause in the store.
        let earlier = if after < run.base_seq {
            let mut earlier = state.store.events(id, after).await?;
            earlier.retain(|event| event.seq <= run.base_seq);
            earlier
        } else {
            Vec::new()
        };
        let events = futures::StreamExt::chain(
            futures::stream::iter(earlier),
            run.events(after.max(run.base_seq)),
        );
        return Ok(sse::response(events, state.config.keep_alive()));
    }
    refuse_pruned(&owned_run(&state, id, &user).await?)?;
    let events = sse::from_store(state.store.clone(), id, after);
    Ok(sse::response(events, state.config.keep_alive()))
}

/// 410 for a run whose events `[store.retention]` deleted: there is nothing to follow.
fn refuse_pruned(run: &RunInfo) -> Result<(), ApiError> {
    match run.pruned_at {
        None => Ok(()),
        Some(pruned_at) => Err(ApiError::gone(
            "events_pruned",
            format!(
                "the events of run {} were deleted on {pruned_at} ([store.retention]); \
                 GET /v1/runs/{} has how it ended and GET /v1/sessions/{} its messages and \
                 tool calls",
                run.id, run.id, run.session_id
            ),
        )),
    }
}

/// Stop a run at its next safe point: tool calls in flight finish and are recorded, and the run
/// ends `cancelled` with an answer saying so.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/cancel",
    tag = "runs",
    params(("id" = Uuid, Path, description = "Run id")),
    responses(
        (status = 202, description = "The run stops at its next safe point", body = CancelAnswer),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The run already ended", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn cancel_run(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<(StatusCode, Json<CancelAnswer>), ApiError> {
    let id = id.parse("run")?;
    match state.runs.get(id) {
        Some(run) if run.user_id == user && !run.is_finished() => {
            run.cancel();
            Ok((
                StatusCode::ACCEPTED,
                Json(CancelAnswer {
                    run_id: id,
                    status: "cancelling".to_string(),
                }),
            ))
        }
        Some(run) if run.user_id != user => Err(ApiError::not_found("run", id)),
        _ => {
            let run = owned_run(&state, id, &user).await?;
            if run.status == RunStatus::AwaitingInput {
                let resumed = state.agent.cancel_paused(id).await?;
                state
                    .runs
                    .resume(&state.agent, resumed, &user, Reader::Outcome)?;
                return Ok((
                    StatusCode::ACCEPTED,
                    Json(CancelAnswer {
                        run_id: id,
                        status: "cancelling".to_string(),
                    }),
                ));
            }
            // In progress on another instance: its owner learns of the request within a second
            // and stops the run at its next safe point.
            if !run.status.is_final() && state.store.request_cancel(id).await? {
                return Ok((
                    StatusCode::ACCEPTED,
                    Json(CancelAnswer {
                        run_id: id,
                        status: "cancelling".to_string(),
                    }),
                ));
            }
            let run = owned_run(&state, id, &user).await?;
            Err(ApiError::conflict(
                "run_finished",
                format!("run {id} already ended ({})", run.status.as_str()),
            ))
        }
    }
}
