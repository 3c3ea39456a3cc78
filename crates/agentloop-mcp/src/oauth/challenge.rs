//! A server's 401 or 403 with its `WWW-Authenticate` challenge, read out of rmcp's errors.

use rmcp::{
    ServiceError, service::ClientInitializeError,
    transport::streamable_http_client::StreamableHttpError,
};

use crate::http_failure::find;

type HttpError = StreamableHttpError<reqwest::Error>;

/// What the server asked for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Challenge {
    /// HTTP 401: no token, or one it does not take. The `WWW-Authenticate` header (possibly
    /// empty).
    Unauthorized(String),
    /// HTTP 403 `insufficient_scope`: a token with more scopes. The header.
    InsufficientScope(String),
}

impl Challenge {
    pub(crate) fn of_request(error: &ServiceError) -> Option<Challenge> {
        match error {
            ServiceError::TransportSend(error) => Self::of_error(&*error.error),
            _ => None,
        }
    }

    pub(crate) fn of_handshake(error: &ClientInitializeError) -> Option<Challenge> {
        match error {
            ClientInitializeError::TransportError { error, .. } => Self::of_error(&*error.error),
            _ => None,
        }
    }

    fn of_error(error: &(dyn std::error::Error + 'static)) -> Option<Challenge> {
        match find::<HttpError>(error)? {
            StreamableHttpError::AuthRequired(error) => Some(Challenge::Unauthorized(
                error.www_authenticate_header.clone(),
            )),
            StreamableHttpError::InsufficientScope(error) => Some(Challenge::InsufficientScope(
                error.www_authenticate_header.clone(),
            )),
            _ => None,
        }
    }

    pub(crate) fn header(&self) -> &str {
        match self {
            Challenge::Unauthorized(header) | Challenge::InsufficientScope(header) => header,
        }
    }
}
