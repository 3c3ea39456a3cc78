//! `POST /v1/runs/{id}/input` with `elicitation`: the answer to a question a running tool call
//! asks (MCP elicitation), handed to the call waiting in this instance.

use agentloop_core::{
    AnswerError,
    protocol::{ElicitationAction, ElicitationAnswer, InputAnswer},
};
use axum::{
    Json,
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{error::ApiError, state::AppState};

/// An elicitation's answer, handed to the call that asked.
#[derive(Debug, Serialize, ToSchema)]
pub struct ElicitationAnswered {
    pub run_id: Uuid,
    /// The question answered (`input_required.elicitation.id`).
    pub elicitation_id: String,
    pub action: ElicitationAction,
}

/// Hands `answer` to the question of run `id`; the rest of the body must be empty.
pub(crate) fn answer(
    state: &AppState,
    id: Uuid,
    input: &InputAnswer,
    answer: ElicitationAnswer,
) -> Result<Response, ApiError> {
    if input.answer.is_some()
        || !input.approve.is_empty()
        || !input.deny.is_empty()
        || !input.results.is_empty()
    {
        return Err(ApiError::bad_request(
            "invalid_body",
            "elicitation: an elicitation's answer comes alone, without answer, approve, deny or \
             results",
        ));
    }
    let action = answer.action;
    match state.agent.answer_question(id, answer) {
        Ok(elicitation_id) => Ok(Json(ElicitationAnswered {
            run_id: id,
            elicitation_id,
            action,
        })
        .into_response()),
        Err(AnswerError::Invalid(message)) => {
            Err(ApiError::bad_request("invalid_elicitation", message))
        }
        Err(error @ AnswerError::Ambiguous(_)) => Err(ApiError::bad_request(
            "invalid_elicitation",
            error.to_string(),
        )),
        Err(error) => Err(ApiError::conflict(
            "no_open_question",
            format!(
                "{error}: it was answered, its time ran out (elicitation_timeout_s), its call \
                 ended, or the run works on another instance"
            ),
        )),
    }
}
