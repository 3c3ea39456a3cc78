//! Every request's id: the client's `X-Request-Id` when it looks like one (a proxy in front made
//! it), else a new one. It comes back in the `X-Request-Id` header of the answer and in every
//! error a client is told (JSON error bodies, a run's error), and the server's log lines about
//! the request carry it: a person quotes it, the operator finds what happened.
//!
//! The id is the request's context, like its tracing span: a task-local value set around the
//! handler, read where an error is turned into what the client sees (`ApiError`'s body, the
//! event streams built in the handler), so that neither handlers nor error values carry it.

use std::sync::Arc;

use axum::{
    extract::Request,
    http::{HeaderName, HeaderValue},
    middleware::Next,
    response::Response,
};
use tracing::Instrument;
use uuid::Uuid;

/// The header both ways.
pub(crate) const HEADER: HeaderName = HeaderName::from_static("x-request-id");
/// The longest id taken from a client.
const MAX_LEN: usize = 128;

/// What a response to the current request may tell of errors.
#[derive(Debug, Clone)]
pub(crate) struct RequestScope {
    pub(crate) id: Arc<str>,
    /// `[server] expose_error_details`: errors keep their detailed message (development).
    pub(crate) expose_details: bool,
}

/// The scope of the request being answered ([`current`]).
impl Default for RequestScope {
    fn default() -> Self {
        current()
    }
}

tokio::task_local! {
    static CURRENT: RequestScope;
}

/// The request being answered; outside one (a test calling a handler's parts directly), a new
/// id and no details.
pub(crate) fn current() -> RequestScope {
    CURRENT
        .try_with(RequestScope::clone)
        .unwrap_or_else(|_| RequestScope {
            id: new_id(),
            expose_details: false,
        })
}

/// Runs `f` as if answering a request of `scope` (for tests of what is built in a handler).
#[cfg(test)]
pub(crate) fn within<T>(scope: RequestScope, f: impl FnOnce() -> T) -> T {
    CURRENT.sync_scope(scope, f)
}

/// The id of a request that came with `given`: it when it looks like an id (1 to 128 of
/// letters, digits and `-_.:/+=@`: what proxies and tracing systems make, nothing that could
/// break a log line or a header), else a new one.
pub(crate) fn accept_or_make(given: Option<&HeaderValue>) -> Arc<str> {
    let given = given.and_then(|value| value.to_str().ok()).filter(|id| {
        (1..=MAX_LEN).contains(&id.len())
            && id
                .bytes()
                .all(|byte| byte.is_ascii_alphanumeric() || b"-_.:/+=@".contains(&byte))
    });
    match given {
        Some(id) => Arc::from(id),
        None => new_id(),
    }
}

/// A new id: a UUID v7, so that ids sort by time.
pub(crate) fn new_id() -> Arc<str> {
    Arc::from(Uuid::now_v7().to_string())
}

/// Gives `request` its id (see the module's documentation), answers it within its scope and
/// span, and sets the id on the answer.
pub(crate) async fn scope(expose_details: bool, request: Request, next: Next) -> Response {
    let id = accept_or_make(request.headers().get(HEADER));
    let span = tracing::info_span!(
        "request",
        request_id = %id,
        method = %request.method(),
        path = request.uri().path(),
    );
    let scope = RequestScope {
        id: id.clone(),
        expose_details,
    };
    let mut response = CURRENT
        .scope(scope, next.run(request))
        .instrument(span.clone())
        .await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(HEADER, value);
    }
    tracing::debug!(parent: &span, status = response.status().as_u16(), "answered");
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sane_id_is_kept_and_anything_else_replaced() {
        for kept in [
            "abc-123",
            "0190a5b2-7c1e-7d4f-9a1b-2c3d4e5f6a7b",
            "Root=1-5759e988-bd86",
            "a",
        ] {
            let value = HeaderValue::from_static(kept);
            assert_eq!(&*accept_or_make(Some(&value)), kept);
        }
        let long = "x".repeat(MAX_LEN + 1);
        for replaced in [
            "",
            "two words",
            "quote\"d",
            "new\tline",
            "ünï",
            long.as_str(),
        ] {
            let value = HeaderValue::from_bytes(replaced.as_bytes()).ok();
            let id = accept_or_make(value.as_ref());
            assert_ne!(&*id, replaced);
            assert!(Uuid::parse_str(&id).is_ok(), "{id}");
        }
        assert!(Uuid::parse_str(&accept_or_make(None)).is_ok());
    }
}
