//! `Authorization: Bearer KEY`: the key names the user every session, run and event belongs to.

use axum::{
    extract::FromRequestParts,
    http::{header, request::Parts},
};

use crate::{error::ApiError, state::AppState};

/// The user a request is made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User(pub String);

impl FromRequestParts<AppState> for User {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let key = parts
            .headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, key) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| key.trim())
            })
            .filter(|key| !key.is_empty())
            .ok_or_else(ApiError::unauthorized)?;
        match state.keys.authenticate(key).await? {
            Some(user) => Ok(User(user)),
            None => Err(ApiError::unknown_key()),
        }
    }
}
