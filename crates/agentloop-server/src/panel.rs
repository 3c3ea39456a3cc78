//! The web panel: `GET /` and its assets under `/panel/`, built into the binary
//! (`crates/agentloop-server/panel/`). Plain HTML, CSS and ES modules with no build step; the
//! panel talks to the public API only, with the user's key, like any other client.
//!
//! Every answer carries a Content-Security-Policy that allows scripts, styles and connections of
//! this origin only: even if text from a model or a tool ever reached the page as HTML, it could
//! not run a script or load anything from elsewhere.

use axum::{
    Router,
    extract::Path,
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
    routing::get,
};

use crate::{error::ApiError, state::AppState};

/// One file of the panel.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

macro_rules! asset {
    ($name:literal, $type:expr) => {
        Asset {
            name: $name,
            content_type: $type,
            body: include_str!(concat!("../panel/", $name)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file; `index.html` is served at `/`, the others at `/panel/NAME`.
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("panel.css", "text/css; charset=utf-8"),
    asset!("main.js", JS),
    asset!("api.js", JS),
    asset!("sse.js", JS),
    asset!("dom.js", JS),
    asset!("markdown.js", JS),
    asset!("sessions.js", JS),
    asset!("run-view.js", JS),
    asset!("steps.js", JS),
    asset!("follow.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
];

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

/// The router with the panel's routes added.
pub(crate) fn routes(router: Router<AppState>) -> Router<AppState> {
    router
        .route("/", get(|| async { serve("index.html") }))
        .route(
            "/panel/{name}",
            get(|Path(name): Path<String>| async move { serve(&name) }),
        )
}

fn serve(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return ApiError::not_found("panel file", name).into_response_owned();
    };
    let mut response = asset.body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(POLICY),
    );
    // Revalidated on each load: the files change with the binary, and they are small.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// Bytes of every file, for the README's "first load" figure.
#[cfg(test)]
pub(crate) fn total_bytes() -> usize {
    ASSETS.iter().map(|asset| asset.body.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_module_the_panel_imports_is_served() {
        for asset in ASSETS {
            for line in asset.body.lines() {
                let Some(start) = line.find("from \"./") else {
                    continue;
                };
                let rest = &line[start + 8..];
                let name = &rest[..rest.find('"').unwrap_or(rest.len())];
                assert!(
                    ASSETS.iter().any(|other| other.name == name),
                    "{} imports {name}, which is not in ASSETS",
                    asset.name
                );
            }
        }
        assert!(
            total_bytes() < 100_000,
            "the panel grew to {}",
            total_bytes()
        );
    }
}
