//! agentloop-server: the HTTP API of agentloop (DESIGN §5 and §6).
//!
//! Runs are started with `POST /v1/runs` (or the seed's `POST /copilot-agent`) and answer with
//! their events over SSE or with the finished run as JSON; they outlive their connection and can
//! be followed again, cancelled and looked at. Every request carries an API key that names its
//! user; another user's sessions and runs answer 404, like ones that do not exist.

mod a2a;
mod ag_ui;
mod attachments;
mod auth;
mod body;
mod chat;
mod client_runs;
mod config;
mod connections;
mod conversation;
mod daily;
mod disclosure;
mod durable;
mod elicitation;
mod error;
mod extract;
mod health;
mod json_body;
mod live;
mod mcp_context;
mod mcp_server;
mod metrics;
mod openai;
mod openapi;
mod owned;
mod panel;
mod protocols;
mod request_id;
mod runs;
mod service;
mod serving;
mod sessions;
mod sse;
mod state;
mod steering;
mod trace_context;

use std::{future::Future, net::SocketAddr, time::Duration};

use axum::{
    Router,
    body::Bytes,
    extract::DefaultBodyLimit,
    http::{Method, Uri, header},
    response::IntoResponse,
    routing::get,
};
use tokio::net::{TcpListener, TcpSocket};

pub use body::{InputBody, RunBody, RunBodyContext};
pub use config::{A2aSettings, A2aSkill, OpenAiSettings, ServerConfig};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use mcp_context::{McpContext, McpContextError, PromptRole};
pub use mcp_server::{AgentsServer, serve_stdio};
pub use metrics::Metrics;
pub use runs::{AgentMetadata, RunDetails, RunResult};
pub use state::{AppState, PublicAgent};

/// The application: every route, and the OpenAPI document generated from the handlers.
pub fn router(state: AppState) -> Router {
    let max_body = state.config.max_body_bytes;
    let expose_details = state.config.expose_error_details;
    let (router, api) = openapi::routes();
    // Rendered once: the router (with what its handlers hold) is cloned for every connection.
    let document = Bytes::from(serde_json::to_vec(&api).unwrap_or_default());
    let router = if state.config.panel {
        panel::routes(router)
    } else {
        router
    };
    let router = router.merge(mcp_server::routes(&state, state.stopping.clone()));
    router
        .route(
            "/openapi.json",
            get(move || {
                let document = document.clone();
                async move { ([(header::CONTENT_TYPE, "application/json")], document).into_response() }
            }),
        )
        .fallback(|| async {
            ApiError::not_found("route", "for this method and path").into_response_owned()
        })
        .method_not_allowed_fallback(|method: Method, uri: Uri| async move {
            ApiError::method_not_allowed(method.as_str(), uri.path()).into_response_owned()
        })
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn(
            move |request: axum::extract::Request, next: axum::middleware::Next| {
                request_id::scope(expose_details, request, next)
            },
        ))
        .with_state(state)
}

/// Connections a burst of clients may open before the server accepts them; the usual default of
/// 128 drops connections (and clients wait for SYN retries) when hundreds arrive at once.
const LISTEN_BACKLOG: u32 = 4096;

/// A listener on `address` with a backlog fit for bursts of clients.
pub fn bind(address: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(address)?;
    socket.listen(LISTEN_BACKLOG)
}

/// Serves `state` on `listener` until `shutdown` resolves; then stops accepting, and waits (at
/// most `server.shutdown_grace_s`) for every run to reach its next saved step. Returns false
/// when some run did not in time.
///
/// Connections are served on the caller's runtime, or with `server.threads` set on that many
/// threads of their own, where the runs they start work too (see `serving`); the store's
/// instance loops and what the caller's runtime already runs (MCP clients) stay on the
/// caller's runtime.
///
/// With a store, the server is an instance that owns its runs (`agentloop_core::durability`):
/// it adopts the runs of instances that stopped, and on shutdown hands its own over (each run
/// stops at its next saved step; another instance, or the next start, goes on from there).
/// Runs without a store are cancelled at their next safe point.
///
/// The grace period starts with the shutdown signal: before it, the server runs for as long as
/// the process does.
pub async fn serve(
    listener: TcpListener,
    mut state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<bool> {
    let durable = durable::Durable::start(&mut state).await;
    // Every instance sends what the outbox has due, its own runs' and those of any other.
    let pushing = state
        .push
        .clone()
        .filter(|_| state.config.a2a.enabled)
        .map(|outbox| a2a::push::start(state.store.clone(), outbox));
    let handover = durable.as_ref().map(|durable| durable.agent().clone());
    let runs = state.runs.clone();
    let stopping = state.stopping.clone();
    let grace = state.config.shutdown_grace();
    let config = state.config.clone();
    // Routes made once, then shared by the connections (a clone of the router is a reference).
    let app = router(state).with_state(());
    let mut http = serving::Serving::start(listener, app, &config)?;
    let stop_accepting = http.stop_accepting();
    // Connections (SSE streams included) end as their runs end; the runs get `grace`, and the
    // connections a few seconds more to send the runs' last events.
    let stopped = async {
        shutdown.await;
        tracing::info!("shutting down: finishing the runs in progress");
        runs.shutdown(handover.as_ref());
        stop_accepting.cancel();
        stopping.cancel();
        tokio::time::sleep(grace + CONNECTION_GRACE).await;
    };
    let served = tokio::select! {
        result = http.served() => result,
        () = stopped => {
            tracing::warn!("connections still open after the grace period; closing");
            Ok(())
        }
    };
    let idle = runs.wait_idle(grace).await;
    if let Some(durable) = durable {
        durable.retire().await;
    }
    http.exit().await;
    if let Some(pushing) = pushing {
        pushing.abort();
    }
    served.map(|()| idle)
}

/// How long connections may stay open after the runs' grace period, to send their last events.
const CONNECTION_GRACE: Duration = Duration::from_secs(5);

/// Resolves on SIGINT (Ctrl-C) or SIGTERM.
pub async fn shutdown_signal() {
    let interrupt = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let terminate = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut signal) => {
                signal.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let terminate = std::future::pending::<()>();
    tokio::select! {
        () = interrupt => {}
        () = terminate => {}
    }
}
