//! Health and metrics.

use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};

use crate::health::{Health, ToolSourceHealth};
use crate::state::AppState;

/// Readiness: whether this instance can take runs now (its store answers a cheap query);
/// 503 otherwise. `/healthz` and `/readyz` are the same check.
///
/// States only, with or without a key: why the store or a tool source failed is in the
/// server's log (and, for tool sources, in `agentloop tools`).
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    responses(
        (status = 200, description = "Ready: the store answers; the tool sources' states", body = Health),
        (status = 503, description = "The store does not answer", body = Health),
    )
)]
pub async fn readyz(State(state): State<AppState>) -> Response {
    health(&state).await
}

/// Readiness, under its historical name: the same check as `/readyz`.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses(
        (status = 200, description = "Ready: the store answers; the tool sources' states", body = Health),
        (status = 503, description = "The store does not answer", body = Health),
    )
)]
pub async fn healthz(State(state): State<AppState>) -> Response {
    health(&state).await
}

/// Liveness: the process serves requests. No dependency is checked, so a database outage does
/// not get every instance restarted.
#[utoipa::path(
    get,
    path = "/livez",
    tag = "service",
    responses((status = 200, description = "The process is alive", body = String))
)]
pub async fn livez() -> &'static str {
    "ok"
}

async fn health(state: &AppState) -> Response {
    let store = state.health.store(state.store.as_ref()).await;
    let ok = store.error.is_none();
    let body = Health {
        status: if ok { "ok" } else { "unavailable" }.to_string(),
        active_runs: state.runs.active(),
        store,
        tool_sources: state
            .agent
            .services()
            .tools
            .source_statuses()
            .iter()
            .map(ToolSourceHealth::of)
            .collect(),
    };
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body)).into_response()
}

/// Metrics in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    state.metrics.set_live_event_bytes(state.runs.held().bytes);
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(state.runs.active()),
    )
}
