//! `GetTask`, `CancelTask` and `SubscribeToTask`: a task is read from its run's event log in
//! the store (the same log on every instance), so any instance answers for any task, and a
//! subscriber gets what the log has, then what comes after it: no gap, no repeat.

use std::time::Duration;

use agentloop_core::protocol::{Event, RunInfo, RunStatus};
use axum::extract::State;
use futures::StreamExt;
use uuid::Uuid;

use super::{
    call::{Answer, Call, RpcError, code, required_str},
    follow,
    task::TaskFold,
};
use crate::{auth::User, error::ApiError, extract::PathId, owned::owned_run, state::AppState};

/// How long `CancelTask` waits for the run to stop before it answers with the task as it is.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

pub async fn get_task(call: Call<'_>) -> Result<Answer, RpcError> {
    let run = task_run(&call).await?;
    let (fold, _) = stored(call.state, &run).await?;
    Ok(Answer::One(fold.task()))
}

pub async fn cancel_task(call: Call<'_>) -> Result<Answer, RpcError> {
    let run = task_run(&call).await?;
    let cancelled = crate::runs::cancel_run(
        State(call.state.clone()),
        User(call.user.to_string()),
        PathId(run.id.to_string()),
    )
    .await;
    match cancelled {
        Ok(_) => {}
        Err(error) if error.status == axum::http::StatusCode::CONFLICT => {
            return Err(RpcError::new(
                code::TASK_NOT_CANCELABLE,
                format!("task {} already ended", run.id),
            ));
        }
        Err(error) => return Err(error.into()),
    }
    let (_, last) = stored(call.state, &run).await?;
    let events = follow::after(call.state, run.id, last);
    let _ = tokio::time::timeout(CANCEL_WAIT, events.for_each(|_| async {})).await;
    let (fold, _) = stored(call.state, &run).await?;
    Ok(Answer::One(fold.task()))
}

pub async fn subscribe(call: Call<'_>) -> Result<Answer, RpcError> {
    let run = task_run(&call).await?;
    let (fold, last) = stored(call.state, &run).await?;
    if fold.state().is_final() || run.status.is_final() {
        return Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            format!(
                "task {} ended ({}): GetTask reads it",
                run.id,
                fold.state().wire()
            ),
        ));
    }
    let scope = crate::request_id::current();
    let events = match run.status {
        // Waiting for its answer: the task as it is, and the stream ends.
        RunStatus::AwaitingInput => futures::stream::empty().boxed(),
        _ => follow::after(call.state, run.id, last),
    };
    Ok(Answer::Stream(follow::updates(fold, events, scope)))
}

/// The run of the task `params.id`, when it is the caller's.
async fn task_run(call: &Call<'_>) -> Result<RunInfo, RpcError> {
    let id = required_str(&call.params, "id")?;
    let run_id = Uuid::parse_str(id).map_err(|_| RpcError::task_not_found(id))?;
    owned_run(call.state, run_id, call.user)
        .await
        .map_err(|_| RpcError::task_not_found(id))
}

/// The task as its stored events make it, and the seq of the last of them.
async fn stored(state: &AppState, run: &RunInfo) -> Result<(TaskFold, u64), RpcError> {
    let events: Vec<Event> = state
        .store
        .events(run.id, 0)
        .await
        .map_err(|error| RpcError::from(ApiError::from(error)))?;
    let scope = crate::request_id::current();
    let mut fold = TaskFold::new(run.id, run.session_id, Some(run.query.clone()));
    for event in &events {
        fold.push(event, |event| super::call::shown_error(&scope, event));
    }
    let last = events.last().map_or(0, |event| event.seq);
    Ok((fold, last))
}
