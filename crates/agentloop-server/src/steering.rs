//! `POST /v1/runs/{id}/messages`: steering a run while it works. The answer is the run's: a
//! message it takes joins the conversation before the run's next LLM call (never in the middle
//! of a tool batch), with a `user_message` event, and the run goes on; one it cannot read any
//! more is refused (`too_late`).

use agentloop_core::{SteerError, protocol::RunStatus};
use axum::{Json, extract::State, http::StatusCode};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    auth::User,
    error::{ApiError, ErrorBody},
    extract::PathId,
    json_body::{FromJsonBody, JsonBody, read_as},
    owned::owned_run,
    state::AppState,
};

/// A message for a run that works.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SteeringBody {
    /// What the user writes; not empty.
    pub text: String,
}

impl FromJsonBody for SteeringBody {
    fn read(bytes: &[u8]) -> Result<Self, ApiError> {
        read_as(bytes, r#"{"text": "..."}"#)
    }
}

/// A message queued for a run.
#[derive(Debug, Serialize, ToSchema)]
pub struct SteeringAnswer {
    pub run_id: Uuid,
    /// `queued`: the message joins the conversation before the run's next LLM call.
    pub status: String,
}

/// Send a message to a run while it works (steering).
///
/// The run answers: a message it takes is queued and added to the conversation before the
/// run's next LLM call (never in the middle of a tool batch); the run emits
/// `user_message {text}` then and goes on. A run whose model answers while messages wait
/// answers them in the same run. A run that will make no further LLM call refuses the message
/// with 409 `too_late`.
#[utoipa::path(
    post,
    path = "/v1/runs/{id}/messages",
    tag = "runs",
    params(("id" = Uuid, Path, description = "Run id")),
    request_body = SteeringBody,
    responses(
        (status = 202, description = "The message is queued for the run's next LLM call", body = SteeringAnswer),
        (status = 400, description = "No text, or an empty one", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "The run ended (`run_finished`), waits for input (`run_awaiting_input`: answer it with /input), works on another instance (`run_elsewhere`), or makes no further LLM call that would read the message (`too_late`: its last allowed step or its summary is under way; send it as a new message once the run ends)", body = ErrorBody),
        (status = 413, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn send_message(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    JsonBody(body): JsonBody<SteeringBody>,
) -> Result<(StatusCode, Json<SteeringAnswer>), ApiError> {
    let id = id.parse("run")?;
    if body.text.trim().is_empty() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "text: the message is empty",
        ));
    }
    let queued = match state.runs.get(id) {
        Some(run) if run.user_id != user => return Err(ApiError::not_found("run", id)),
        Some(run) if !run.is_finished() => state.agent.steer(id, &body.text).await,
        _ => Err(SteerError::NotRunning(id)),
    };
    match queued {
        Ok(()) => Ok((
            StatusCode::ACCEPTED,
            Json(SteeringAnswer {
                run_id: id,
                status: "queued".to_string(),
            }),
        )),
        Err(SteerError::Empty) => Err(ApiError::bad_request(
            "invalid_body",
            "text: the message is empty",
        )),
        Err(SteerError::TooLate(_)) => Err(ApiError::conflict(
            "too_late",
            format!(
                "run {id} is making its last LLM call and would not read this message; send it \
                 as a new message once the run ends"
            ),
        )),
        Err(_) => {
            let run = owned_run(&state, id, &user).await?;
            Err(match run.status {
                RunStatus::AwaitingInput => ApiError::conflict(
                    "run_awaiting_input",
                    format!("run {id} waits for input: answer it with POST /v1/runs/{id}/input"),
                ),
                RunStatus::Running => ApiError::conflict(
                    "run_elsewhere",
                    format!(
                        "run {id} works on another instance; send the message to the instance \
                         that started it, or wait for it to end"
                    ),
                ),
                status => ApiError::conflict(
                    "run_finished",
                    format!("run {id} already ended ({})", status.as_str()),
                ),
            })
        }
    }
}
