//! Request bodies read as JSON, with a bad one answered in the JSON error format like every
//! other bad request: 413 `body_too_large` naming the limit, 400 `invalid_body` (or
//! `invalid_json`) saying what the body should have been. One extractor for every route that
//! takes a body ([`JsonBody`]); each body type says how it is read ([`FromJsonBody`]).

use axum::{
    extract::{FromRequest, Request},
    http::StatusCode,
};
use http_body_util::LengthLimitError;
use serde::de::DeserializeOwned;

use crate::{error::ApiError, state::AppState};

/// A request body read as `T`; a body that cannot be read is answered with the JSON error.
pub struct JsonBody<T>(pub T);

/// A body type: how its bytes are read.
pub trait FromJsonBody: Sized {
    /// Reads a body, or says what is wrong with it.
    fn read(bytes: &[u8]) -> Result<Self, ApiError>;

    /// Whether the body may carry attachments inline (base64): it may then be as large as
    /// they may be (`[agent.attachments] max_total_bytes`, encoded), when that is more than
    /// `server.max_body_bytes`.
    fn carries_attachments() -> bool {
        false
    }

    /// The bytes of the body's attachments as sent (their URLs): what of a body over
    /// `server.max_body_bytes` may be attachments; the rest of it may not be over.
    fn attachment_bytes(&self) -> usize {
        0
    }
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
        let mut limit = state.config.max_body_bytes;
        let mut key = "server.max_body_bytes";
        let attachments = &state.agent.settings().attachments;
        let encoded = usize::try_from(attachments.max_encoded_total()).unwrap_or(usize::MAX);
        if T::carries_attachments() && attachments.max_count > 0 && encoded > limit {
            limit = encoded;
            key = "agent.attachments.max_total_bytes, in base64";
        }
        let bytes = axum::body::to_bytes(request.into_body(), limit)
            .await
            .map_err(|error| match error.into_inner().is::<LengthLimitError>() {
                true => ApiError::new(
                    StatusCode::PAYLOAD_TOO_LARGE,
                    "body_too_large",
                    format!("the body is larger than {limit} bytes ({key})"),
                ),
                false => ApiError::bad_request("invalid_body", "the body could not be read"),
            })?;
        let body = T::read(&bytes)?;
        let max_body = state.config.max_body_bytes;
        if bytes.len() > max_body
            && bytes.len() - body.attachment_bytes().min(bytes.len()) > max_body
        {
            return Err(ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "body_too_large",
                format!(
                    "the body without its attachments is larger than {max_body} bytes \
                     (server.max_body_bytes)"
                ),
            ));
        }
        Ok(JsonBody(body))
    }
}
