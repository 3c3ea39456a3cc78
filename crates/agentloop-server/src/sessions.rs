//! `/v1/sessions`: a user's conversations.

use agentloop_core::protocol::{RunInfo, SessionInfo, SessionMessage, ToolExecutionRecord};
use axum::{Json, extract::State, http::StatusCode};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    auth::User,
    error::{ApiError, ErrorBody},
    extract::PathId,
    state::AppState,
};

/// At most this many sessions in a listing.
const LIST_LIMIT: u32 = 200;

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
}

/// A session with its messages (traces included, as system messages) and its runs.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDetails {
    pub session: SessionInfo,
    pub messages: Vec<SessionMessage>,
    pub runs: Vec<SessionRun>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionRun {
    #[serde(flatten)]
    pub run: RunInfo,
    pub execution_trace: Vec<ToolExecutionRecord>,
}

/// Your sessions, most recently updated first.
#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = "sessions",
    responses((status = 200, body = SessionList), (status = 401, body = ErrorBody)),
    security(("api_key" = []))
)]
pub async fn list_sessions(
    State(state): State<AppState>,
    User(user): User,
) -> Result<Json<SessionList>, ApiError> {
    let sessions = state.store.list_sessions(Some(&user), LIST_LIMIT).await?;
    Ok(Json(SessionList { sessions }))
}

/// One of your sessions: its messages and runs with their tool calls.
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = uuid::Uuid, Path, description = "Session id")),
    responses(
        (status = 200, body = SessionDetails),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_session(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<Json<SessionDetails>, ApiError> {
    let id = id.parse("session")?;
    let session = owned_session(&state, id, &user).await?;
    let messages = state.store.messages(id).await?;
    let mut runs = Vec::new();
    for run in state.store.session_runs(id).await? {
        let execution_trace = state.store.tool_executions(run.id).await?;
        runs.push(SessionRun {
            run,
            execution_trace,
        });
    }
    Ok(Json(SessionDetails {
        session,
        messages,
        runs,
    }))
}

/// Delete one of your sessions with its messages, runs and events.
#[utoipa::path(
    delete,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = uuid::Uuid, Path, description = "Session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "A run of the session is in progress", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn delete_session(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<StatusCode, ApiError> {
    let id = id.parse("session")?;
    let session = owned_session(&state, id, &user).await?;
    if let Some(run) = session.active_run_id {
        return Err(ApiError::conflict(
            "session_busy",
            format!("session {id} has a run in progress ({run}); cancel it or wait, then delete"),
        ));
    }
    state.store.delete_session(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn owned_session(
    state: &AppState,
    id: uuid::Uuid,
    user: &str,
) -> Result<SessionInfo, ApiError> {
    match state.store.session(id).await? {
        Some(session) if session.user_id == user => Ok(session),
        _ => Err(ApiError::not_found("session", id)),
    }
}
