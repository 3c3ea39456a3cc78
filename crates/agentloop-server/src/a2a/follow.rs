//! Following a task's run: its events after a point (from memory when it runs here, else
//! from the store, where another instance saves them), up to its top-level `done`; and the
//! stream's results, folded into A2A updates.

use agentloop_core::protocol::{Event, EventKind};
use futures::{Stream, StreamExt, stream::BoxStream};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{call::RpcError, task::TaskFold};
use crate::{client_runs::Events, request_id::RequestScope, state::AppState};

/// The events of `run_id` with `seq > after`, to the end of the run (or of its pause).
pub fn after(state: &AppState, run_id: Uuid, after: u64) -> Events {
    let events = match state.runs.get(run_id) {
        Some(live) => live.events(after).boxed(),
        None => crate::sse::from_store(state.store.clone(), run_id, after).boxed(),
    };
    until_done(events)
}

/// `events` up to and with the first top-level `done` (the run ended, or paused for input).
pub fn until_done(events: Events) -> Events {
    events
        .scan(false, |done, event| {
            if *done {
                return futures::future::ready(None);
            }
            *done = event.parent_run_id.is_none() && matches!(event.kind, EventKind::Done { .. });
            futures::future::ready(Some(event))
        })
        .boxed()
}

/// The stream of a task: the task as it stands, then an update per event that changes it.
pub fn updates(
    mut fold: TaskFold,
    events: impl Stream<Item = Event> + Send + 'static,
    scope: RequestScope,
) -> BoxStream<'static, Result<Value, RpcError>> {
    let first = futures::stream::once(futures::future::ready(Ok(json!({"task": fold.task()}))));
    let rest = events
        .map(move |event| {
            let out = fold.push(&event, |event| super::call::shown_error(&scope, event));
            futures::stream::iter(out.into_iter().map(Ok))
        })
        .flatten();
    first.chain(rest).boxed()
}
