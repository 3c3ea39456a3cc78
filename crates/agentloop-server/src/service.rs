//! Health, metrics and the OpenAPI document.

use axum::{
    Json,
    extract::State,
    http::{StatusCode, header},
    response::IntoResponse,
};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{error::ApiError, state::AppState};

#[derive(Debug, Serialize, ToSchema)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// Runs in progress on this instance.
    pub active_runs: usize,
}

/// Whether the server and its store answer.
#[utoipa::path(
    get,
    path = "/healthz",
    tag = "service",
    responses(
        (status = 200, body = Health),
        (status = 503, description = "The store does not answer", body = crate::error::ErrorBody),
    )
)]
pub async fn healthz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    state.store.ping().await?;
    Ok(Json(Health {
        status: "ok".to_string(),
        active_runs: state.runs.active(),
    }))
}

/// Metrics in the Prometheus text format.
#[utoipa::path(
    get,
    path = "/metrics",
    tag = "service",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain", body = String))
)]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(state.runs.active()),
    )
}
