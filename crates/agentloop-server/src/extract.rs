//! What handlers read from the path, the query and the headers (where a client resumes a
//! stream), with malformed input answered in the JSON error format like every other bad
//! request.

use axum::{
    extract::{FromRequestParts, Path},
    http::{HeaderMap, request::Parts},
};
use uuid::Uuid;

use crate::error::ApiError;

/// The `{id}` segment of a path, percent-decoded; one that is not UTF-8 is a 400 with the
/// JSON error body (axum's own rejection is plain text).
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(PathId(id)),
            Err(rejection) => Err(ApiError::bad_request(
                "invalid_id",
                format!(
                    "the id in the path cannot be read: {}",
                    rejection.body_text()
                ),
            )),
        }
    }
}

impl PathId {
    /// The id as a UUID, or 400 naming what it should have been.
    pub fn parse(&self, what: &str) -> Result<Uuid, ApiError> {
        Uuid::parse_str(&self.0).map_err(|_| {
            ApiError::bad_request(
                "invalid_id",
                format!("{:?} is not a {what} id (a UUID)", self.0),
            )
        })
    }
}

/// The value of `name` in a query string, percent-decoded (`?after=%35` is `5`).
pub fn query_value(query: Option<&str>, name: &str) -> Result<Option<String>, ApiError> {
    let Some(query) = query else {
        return Ok(None);
    };
    let pairs: Vec<(String, String)> = serde_urlencoded::from_str(query).map_err(|error| {
        ApiError::bad_request(
            "invalid_query",
            format!("the query string cannot be read: {error}"),
        )
    })?;
    Ok(pairs
        .into_iter()
        .find(|(key, _)| key == name)
        .map(|(_, value)| value))
}

/// Where a client resumes: `Last-Event-ID`, else `?after=`, else the start.
pub fn resume_point(headers: &HeaderMap, query: Option<&str>) -> Result<u64, ApiError> {
    let given = match headers.get("last-event-id") {
        Some(value) => Some(value.to_str().unwrap_or("?").to_string()),
        None => query_value(query, "after")?,
    };
    match given {
        None => Ok(0),
        Some(text) => text.trim().parse().map_err(|_| {
            ApiError::bad_request(
                "invalid_last_event_id",
                format!("Last-Event-ID (or after=) must be an event seq, got {text:?}"),
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn query_values_are_percent_decoded() {
        assert_eq!(
            query_value(Some("after=%35"), "after").unwrap().as_deref(),
            Some("5")
        );
        assert_eq!(
            query_value(Some("x=1&after=12"), "after")
                .unwrap()
                .as_deref(),
            Some("12")
        );
        assert_eq!(query_value(Some("x=1"), "after").unwrap(), None);
        assert_eq!(query_value(None, "after").unwrap(), None);
    }
}
