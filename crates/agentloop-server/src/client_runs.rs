//! Runs a client names with an id of its own (AG-UI's `runId`, the AI SDK's message id): begun
//! once however many copies of the request come at once (a client's retry, a component mounted
//! twice). A copy follows that run from its start: live when it runs here (waiting for its
//! beginning, and refused as it was should it never begin), else from the store (another
//! instance runs it, or it ended and was let go here). An id that names a run of another
//! conversation or user is refused: 409 `run_id_taken`.

use agentloop_core::{RunRequest, protocol::Event};
use futures::{StreamExt, stream::BoxStream};
use uuid::Uuid;

use crate::{
    error::ApiError,
    live::{Reader, Start},
    state::AppState,
};

/// The events of a run, from its first.
pub type Events = BoxStream<'static, Event>;

/// How many times a copy tries to begin its run or follow the one begun: one that was
/// registered, then let go before it was found, is begun again.
const ATTEMPTS: usize = 3;

/// The events from its start of the run `run_id` of `user`'s session `session_id`, when it
/// exists; 409 when it is another conversation's or user's. `shown` is the id as the client
/// gave it.
pub async fn follow(
    state: &AppState,
    run_id: Uuid,
    user: &str,
    session_id: Uuid,
    shown: &str,
) -> Result<Option<Events>, ApiError> {
    // A run resumed or adopted here has its start in the store.
    if let Some(live) = state.runs.get(run_id).filter(|live| live.base_seq == 0) {
        if live.user_id != user || live.session_id != session_id {
            return Err(taken(shown));
        }
        live.begun().await?;
        return Ok(Some(live.events(0).boxed()));
    }
    match state.store.run(run_id).await? {
        Some(run) if run.user_id != user || run.session_id != session_id => Err(taken(shown)),
        Some(_) => Ok(Some(
            crate::sse::from_store(state.store.clone(), run_id, 0).boxed(),
        )),
        None => Ok(None),
    }
}

/// Begins `request` (whose `run_id` and `session_id` are set) for `user`, or follows the run
/// with its id that a copy of it began.
pub async fn start_or_follow(
    state: &AppState,
    request: RunRequest,
    user: &str,
    shown: &str,
) -> Result<Events, ApiError> {
    let (Some(run_id), Some(session_id)) = (request.run_id, request.session_id) else {
        return Err(ApiError::internal(
            "a client's run was started without its ids",
        ));
    };
    for _ in 0..ATTEMPTS {
        let start = state
            .runs
            .start_once(&state.agent, request.clone(), user, Reader::Events)
            .await?;
        match start {
            Start::Started(started) => return Ok(started.events().boxed()),
            Start::Taken => {
                if let Some(events) = follow(state, run_id, user, session_id, shown).await? {
                    return Ok(events);
                }
            }
        }
    }
    Err(ApiError::conflict(
        "run_busy",
        format!("run {shown} is beginning and ending at once; send the request again"),
    ))
}

fn taken(shown: &str) -> ApiError {
    ApiError::conflict(
        "run_id_taken",
        format!("{shown} is the id of another conversation's run; give each run an id of its own"),
    )
}
