//! What a user may name: their own runs and sessions. Another user's answer 404, like ones
//! that do not exist, so that the answer does not tell them apart.

use agentloop_core::protocol::{RunInfo, SessionInfo};
use uuid::Uuid;

use crate::{error::ApiError, state::AppState};

/// The run `id` when it belongs to `user`; 404 otherwise, as for a run that does not exist.
pub async fn owned_run(state: &AppState, id: Uuid, user: &str) -> Result<RunInfo, ApiError> {
    match state.store.run(id).await? {
        Some(run) if run.user_id == user => Ok(run),
        _ => Err(ApiError::not_found("run", id)),
    }
}

/// The session `id` when it belongs to `user`; 404 otherwise, as for a session that does not
/// exist.
pub async fn owned_session(
    state: &AppState,
    id: Uuid,
    user: &str,
) -> Result<SessionInfo, ApiError> {
    match state.store.session(id).await? {
        Some(session) if session.user_id == user => Ok(session),
        _ => Err(ApiError::not_found("session", id)),
    }
}
