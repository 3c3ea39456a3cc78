//! Events as Server-Sent Events: `event:` is the type, `id:` the seq, `data:` the JSON object.
//! An `error` event tells what `disclosure` lets a client see, with the request's id.

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

use crate::disclosure;
use crate::request_id::{self, RequestScope};

/// The events of a run known only to the store (kept here for the routes that name it).
pub(crate) use crate::live::from_store;

/// The response streaming `events`, ending after a `done` that ends the run (a run that paused
/// and resumed has an earlier `done` with status `awaiting_input` in its history; a sub-agent's
/// `done`, nested in the stream, ends only the sub-agent).
pub fn response(
    events: impl Stream<Item = Event> + Send + 'static,
    keep_alive: Duration,
) -> Response {
    let scope = request_id::current();
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
    let frames = until_done.map(move |event| Ok::<_, Infallible>(frame(&event, &scope)));
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
/// once more. An error's message is the one the client may see, with the request's id.
fn frame(event: &Event, scope: &RequestScope) -> sse::Event {
    let head = || {
        sse::Event::default()
            .event(event.kind.type_name())
            .id(event.seq.to_string())
    };
    let framed = match &event.kind {
        EventKind::Error { .. } => head().json_data(disclosure::shown_event(scope, event)),
        _ => head().json_data(event),
    };
    framed.unwrap_or_else(|_| head().data("{}"))
}
