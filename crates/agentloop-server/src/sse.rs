//! Events as Server-Sent Events: `event:` is the type, `id:` the seq, `data:` the JSON object.

use std::{convert::Infallible, time::Duration};

use agentloop_core::protocol::{Event, EventKind};
use axum::{
    http::{HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};

/// The events of a run known only to the store (kept here for the routes that name it).
pub(crate) use crate::live::from_store;

/// The response streaming `events`, ending after a `done` that ends the run (a run that paused
/// and resumed has an earlier `done` with status `awaiting_input` in its history; a sub-agent's
/// `done`, nested in the stream, ends only the sub-agent).
pub fn response(
    events: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    let until_done = events.scan(false, |done, event| {
        if *done {
            return futures::future::ready(None);
        }
        *done = event.parent_run_id.is_none()
            && matches!(
                event.kind,
                EventKind::Done { status, .. } if status.is_final()
            );
        futures::future::ready(Some(event))
    });
    let frames = until_done.map(|event| Ok::<_, Infallible>(frame(&event)));
    let mut response = Sse::new(frames)
        .keep_alive(KeepAlive::new().interval(keep_alive).text("keep-alive"))
        .into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, no-transform"),
    );
    // Tells nginx and similar proxies to pass each event on at once instead of buffering.
    headers.insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

/// The JSON is written straight into the frame: a large event (a whole answer) is not copied
/// once more.
fn frame(event: &Event) -> sse::Event {
    let head = || {
        sse::Event::default()
            .event(event.kind.type_name())
            .id(event.seq.to_string())
    };
    head()
        .json_data(event)
        .unwrap_or_else(|_| head().data("{}"))
}
