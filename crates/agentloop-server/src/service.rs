//! Health, metrics and the OpenAPI document.

use std::time::{Duration, Instant};

use agentloop_core::{Store, protocol::SourceStatus};
use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::state::AppState;

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable` (with status 503) when the store does not answer.
    pub status: String,
    /// Runs in progress on this instance.
    pub active_runs: usize,
    pub store: StoreHealth,
    /// Each tool source (MCP server) and its state. A source that is down does not make the
    /// instance unready: runs go on without its tools, and it is restarted meanwhile.
    pub tool_sources: Vec<SourceStatus>,
}

/// Whether the store answered its last check.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct StoreHealth {
    /// `ok` or `unavailable`.
    pub status: String,
    /// Why it is unavailable, and what to check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// How long one check of the store is trusted: health checks of a load balancer (or several)
/// cost the database one cheap query per period at most.
const STORE_CHECK_TTL: Duration = Duration::from_secs(1);
/// A store that takes longer than this to answer a trivial query is unavailable.
const STORE_CHECK_TIMEOUT: Duration = Duration::from_secs(2);

/// The latest check of the store, shared by every health request.
#[derive(Default)]
pub struct HealthCheck {
    last: tokio::sync::Mutex<Option<(Instant, StoreHealth)>>,
}

impl HealthCheck {
    /// The store's health, checked at most once per [`STORE_CHECK_TTL`]; concurrent requests
    /// wait for the same check.
    async fn store(&self, store: &dyn Store) -> StoreHealth {
        let mut last = self.last.lock().await;
        if let Some((at, health)) = last.as_ref()
            && at.elapsed() < STORE_CHECK_TTL
        {
            return health.clone();
        }
        let health = match tokio::time::timeout(STORE_CHECK_TIMEOUT, store.ping()).await {
            Ok(Ok(())) => StoreHealth {
                status: "ok".to_string(),
                error: None,
            },
            Ok(Err(error)) => StoreHealth {
                status: "unavailable".to_string(),
                error: Some(error.to_string()),
            },
            Err(_) => StoreHealth {
                status: "unavailable".to_string(),
                error: Some(format!(
                    "the store did not answer within {} s; check that the database is running \
                     and reachable",
                    STORE_CHECK_TIMEOUT.as_secs()
                )),
            },
        };
        *last = Some((Instant::now(), health.clone()));
        health
    }
}

/// Readiness: whether this instance can take runs now (its store answers a cheap query).
/// 503 with the reason otherwise. `/healthz` and `/readyz` are the same check.
#[utoipa::path(
    get,
    path = "/readyz",
    tag = "service",
    responses(
        (status = 200, body = Health),
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
        (status = 200, body = Health),
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
        tool_sources: state.agent.services().tools.source_statuses(),
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
