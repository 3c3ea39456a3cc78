//! Events as Server-Sent Events: `event:` is the type, `id:` the seq, `data:` the JSON object.
//! A run followed here is either live on this server (from memory, no gap) or known only to the
//! store (another instance runs it, or it ended a while ago): its saved events, then new ones as
//! they are saved.

use std::{convert::Infallible, sync::Arc, time::Duration};

use agentloop_core::{
    Store,
    protocol::{Event, RunStatus},
};
use axum::{
    http::{HeaderValue, header},
    response::{
        IntoResponse, Response,
        sse::{self, KeepAlive, Sse},
    },
};
use futures::{Stream, StreamExt};
use uuid::Uuid;

/// How often the store is asked for new events of a run that lives elsewhere.
const STORE_POLL: Duration = Duration::from_millis(500);
/// A run elsewhere that emitted nothing for this long is presumed lost (its process died).
const STORE_PATIENCE: Duration = Duration::from_secs(600);

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
                agentloop_core::protocol::EventKind::Done { status, .. } if status.is_final()
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

fn frame(event: &Event) -> sse::Event {
    let data = serde_json::to_string(event).unwrap_or_else(|_| "{}".to_string());
    sse::Event::default()
        .event(event.kind.type_name())
        .id(event.seq.to_string())
        .data(data)
}

/// The events of a run known only to the store, with `seq > after`: what is saved, then what
/// gets saved while the run goes on.
pub fn from_store(
    store: Arc<dyn Store>,
    run_id: Uuid,
    after: u64,
) -> impl Stream<Item = Event> + Send {
    let state = Polling {
        store,
        after,
        last_news: tokio::time::Instant::now(),
        first: true,
    };
    let batches = futures::stream::unfold(state, move |mut state| async move {
        if !state.first {
            tokio::time::sleep(STORE_POLL).await;
        }
        state.first = false;
        let events = match state.store.events(run_id, state.after).await {
            Ok(events) => events,
            Err(error) => {
                tracing::warn!(%run_id, %error, "cannot read the events of a run");
                return None;
            }
        };
        if let Some(last) = events.last() {
            state.after = last.seq;
            state.last_news = tokio::time::Instant::now();
            return Some((futures::stream::iter(events), state));
        }
        let running = matches!(
            state.store.run(run_id).await,
            Ok(Some(run)) if run.status == RunStatus::Running
        );
        if !running || state.last_news.elapsed() > STORE_PATIENCE {
            return None;
        }
        Some((futures::stream::iter(Vec::new()), state))
    });
    batches.flatten()
}

/// Where a client following a run through the store stands.
struct Polling {
    store: Arc<dyn Store>,
    after: u64,
    last_news: tokio::time::Instant,
    first: bool,
}
