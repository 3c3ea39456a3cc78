//! The web panel: `GET /` and its assets under `/panel/`, built into the binary
//! (`crates/agentloop-server/panel/`). Plain HTML, CSS and ES modules with no build step; the
//! panel talks to the public API only, with the user's key, like any other client.
//!
//! The sign-in's hint about getting a key is the general one (`agentloop keys create`) unless
//! the program that serves has its own (`AppState::key_hint`: the demo's key is in its banner),
//! put in `index.html` as text when the page is served.
//!
//! Every answer carries a Content-Security-Policy that allows scripts, styles and connections of
//! this origin only (and images the page made itself, `blob:`: the attachments it fetched with
//! the key): even if text from a model or a tool ever reached the page as HTML, it could not run
//! a script or load anything from elsewhere.

use std::borrow::Cow;

use axum::{
    Router,
    extract::{Path, State},
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
    asset!("question.js", JS),
    asset!("run-view.js", JS),
    asset!("steps.js", JS),
    asset!("follow.js", JS),
    asset!("attach.js", JS),
    asset!("favicon.svg", "image/svg+xml"),
];

const POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
                      img-src 'self' blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
                      frame-ancestors 'none'";

/// The router with the panel's routes added.
pub(crate) fn routes(router: Router<AppState>) -> Router<AppState> {
    router
        .route(
            "/",
            get(|State(state): State<AppState>| async move { index(state.key_hint.as_deref()) }),
        )
        .route(
            "/panel/{name}",
            get(|Path(name): Path<String>| async move { serve(&name) }),
        )
}

/// Where the hint about keys is in `index.html`, between these two comments.
const HINT_START: &str = "<!-- key-hint -->";
const HINT_END: &str = "<!-- /key-hint -->";

/// `index.html`, with `key_hint` (plain text) as the sign-in's hint about keys when given.
fn index(key_hint: Option<&str>) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == "index.html") else {
        return ApiError::not_found("panel file", "index.html").into_response_owned();
    };
    let body = match (key_hint, asset.body.split_once(HINT_START)) {
        (Some(hint), Some((before, rest))) => match rest.split_once(HINT_END) {
            Some((_, after)) => Cow::Owned(format!("{before}{}{after}", html_text(hint))),
            None => Cow::Borrowed(asset.body),
        },
        _ => Cow::Borrowed(asset.body),
    };
    respond(asset, body)
}

/// `text` as HTML text: markup characters escaped.
fn html_text(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => escaped.push_str("&amp;"),
            '<' => escaped.push_str("&lt;"),
            '>' => escaped.push_str("&gt;"),
            '"' => escaped.push_str("&quot;"),
            '\'' => escaped.push_str("&#39;"),
            c => escaped.push(c),
        }
    }
    escaped
}

fn serve(name: &str) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.name == name) else {
        return ApiError::not_found("panel file", name).into_response_owned();
    };
    respond(asset, Cow::Borrowed(asset.body))
}

fn respond(asset: &Asset, body: Cow<'static, str>) -> Response {
    let mut response = body.into_response();
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

/// Bytes of every file, for the "first load" figure of docs/web-panel.md.
#[cfg(test)]
pub(crate) fn total_bytes() -> usize {
    ASSETS.iter().map(|asset| asset.body.len()).sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn page(key_hint: Option<&str>) -> String {
        let body = index(key_hint).into_body();
        let bytes = axum::body::to_bytes(body, usize::MAX)
            .await
            .unwrap_or_default();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    #[tokio::test]
    async fn the_sign_in_gives_the_program_s_own_hint_about_keys_as_text() {
        let general = page(None).await;
        assert!(
            general.contains("agentloop keys create --user YOU"),
            "{general}"
        );
        let demo = page(Some("The key is the \"API key:\" line <b>printed</b>.")).await;
        assert!(
            demo.contains("The key is the &quot;API key:&quot; line &lt;b&gt;printed&lt;/b&gt;."),
            "{demo}"
        );
        assert!(!demo.contains("agentloop keys create"), "{demo}");
    }

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
