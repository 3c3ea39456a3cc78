//! Request bodies read as JSON, with a bad one answered in the JSON error format like every
//! other bad request: 413 `body_too_large` naming the limit, 400 `invalid_body` (or
//! `invalid_json`) saying what the body should have been. One extractor for every route that
//! takes a body ([`JsonBody`]); each body type says how it is read ([`FromJsonBody`]).

use axum::{
    body::Bytes,
    extract::{FromRequest, Request},
    http::StatusCode,
};
use serde::de::DeserializeOwned;

use crate::{error::ApiError, state::AppState};

/// A request body read as `T`; a body that cannot be read is answered with the JSON error.
pub struct JsonBody<T>(pub T);

/// A body type: how its bytes are read.
pub trait FromJsonBody: Sized {
    /// Reads a body, or says what is wrong with it.
    fn read(bytes: &[u8]) -> Result<Self, ApiError>;
}

/// Reads a body with serde; one that does not fit is a 400 saying it must be `expected`.
pub fn read_as<T: DeserializeOwned>(bytes: &[u8], expected: &str) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|error| {
        ApiError::bad_request(
            "invalid_body",
            format!("the body must be {expected}: {error}"),
        )
    })
}

impl<T: FromJsonBody + Send> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(|rejection| {
                if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
                    ApiError::new(
                        StatusCode::PAYLOAD_TOO_LARGE,
                        "body_too_large",
                        format!(
                            "the body is larger than {} bytes (server.max_body_bytes)",
                            state.config.max_body_bytes
                        ),
                    )
                } else {
                    ApiError::bad_request("invalid_body", rejection.body_text())
                }
            })?;
        T::read(&bytes).map(JsonBody)
    }
}
