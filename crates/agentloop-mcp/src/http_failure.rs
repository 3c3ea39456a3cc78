//! What went wrong talking to a server over streamable HTTP, read out of rmcp's errors: they
//! arrive type-erased (`DynamicTransportError`), so the reqwest transport's error is found by
//! downcasting along the chain of sources.

use std::error::Error;

use agentloop_core::short_of_resources;
use rmcp::{
    ServiceError, service::ClientInitializeError,
    transport::streamable_http_client::StreamableHttpError,
};

use crate::http_client::names_unknown_session;

type HttpError = StreamableHttpError<reqwest::Error>;

/// The kinds of HTTP failure that call for different advice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum HttpFailure {
    /// The server does not know the session any more (HTTP 404 to a request carrying it): it
    /// restarted, or expired the session.
    SessionExpired,
    /// Nothing answered: connection refused, unknown host, connect timeout, a connection closed
    /// before the answer.
    Unreachable(String),
    /// No connection could be opened for lack of this process's own resources (open files,
    /// local ports): nothing is known of the server; what to do about it.
    ShortOfResources(&'static str),
    /// HTTP 401 or 403: the credentials in `headers` are missing or wrong.
    Refused(String),
    /// Something answered, but not as an MCP endpoint (HTTP 404 without a session, HTML).
    NotMcp(String),
    Other(String),
}

impl HttpFailure {
    /// The failure behind an error of a request made through an rmcp session.
    pub(crate) fn of_request(error: &ServiceError) -> Option<HttpFailure> {
        match error {
            ServiceError::TransportSend(error) => Some(Self::of_transport(&*error.error)),
            // Servers copying the TypeScript SDK's examples answer an unknown session with HTTP
            // 400 and this error; see `http_client` for when it names no request.
            ServiceError::McpError(error) if names_unknown_session(&error.message) => {
                Some(Self::SessionExpired)
            }
            _ => None,
        }
    }

    /// The failure behind an error of the MCP handshake, when it is an HTTP one.
    pub(crate) fn of_handshake(error: &ClientInitializeError) -> Option<HttpFailure> {
        match error {
            ClientInitializeError::TransportError { error, .. } => {
                Some(Self::of_transport(&*error.error))
            }
            _ => None,
        }
    }

    fn of_transport(error: &(dyn Error + 'static)) -> HttpFailure {
        if let Some(advice) = short_of_resources(error) {
            return Self::ShortOfResources(advice);
        }
        let Some(http) = find::<HttpError>(error) else {
            return Self::Other(chain(error));
        };
        // rmcp's `Client` variant names no source: reqwest's own chain is read from there.
        if let StreamableHttpError::Client(client) = http
            && let Some(advice) = short_of_resources(client)
        {
            return Self::ShortOfResources(advice);
        }
        match http {
            StreamableHttpError::SessionExpired => Self::SessionExpired,
            // Also a request on a kept-alive connection the server closed as it was sent: the
            // server stopped, restarted, or dropped the connection.
            StreamableHttpError::Client(client) if client.is_connect() || client.is_request() => {
                Self::Unreachable(root_cause(client))
            }
            StreamableHttpError::Client(client) if client.is_timeout() => {
                Self::Unreachable("the request timed out".to_owned())
            }
            StreamableHttpError::Client(client) => Self::Other(chain(client)),
            StreamableHttpError::AuthRequired(_) => {
                Self::Refused("HTTP 401 Unauthorized".to_owned())
            }
            StreamableHttpError::InsufficientScope(_) => {
                Self::Refused("HTTP 403 Forbidden".to_owned())
            }
            // rmcp's reqwest client reports other statuses as `HTTP <status>: <body>`.
            StreamableHttpError::UnexpectedServerResponse(message) => {
                let status = message.split(':').next().unwrap_or_default().trim();
                if status.starts_with("HTTP 401") || status.starts_with("HTTP 403") {
                    Self::Refused(status.to_owned())
                } else if status.starts_with("HTTP 404") || status.starts_with("HTTP 405") {
                    Self::NotMcp(format!("the server answered {status}"))
                } else {
                    Self::Other(message.to_string())
                }
            }
            StreamableHttpError::UnexpectedContentType(content_type) => Self::NotMcp(format!(
                "the server answered with content type {}, not JSON or an event stream",
                content_type.as_deref().unwrap_or("(none)")
            )),
            StreamableHttpError::HttpStatus(status) => {
                Self::Other(format!("the server answered HTTP {}", status.status))
            }
            other => Self::Other(chain(other)),
        }
    }

    /// Why a connection could not be made, ending with what to check in the configuration.
    pub(crate) fn advice(&self, server: &str) -> String {
        match self {
            Self::SessionExpired => "the server forgot the session it had just opened".to_owned(),
            Self::Unreachable(why) => format!(
                "{why}; check that the server is running and that mcp_servers.{server}.url is \
                 right"
            ),
            Self::ShortOfResources(advice) => {
                format!("no connection to the server could be opened: {advice}")
            }
            Self::Refused(status) => format!(
                "the server refused the request ({status}); check mcp_servers.{server}.headers \
                 (does the server need an Authorization header, and is its token right?)"
            ),
            Self::NotMcp(why) => format!(
                "{why}; check that mcp_servers.{server}.url is the server's MCP endpoint (it \
                 often ends in /mcp)"
            ),
            Self::Other(why) => why.clone(),
        }
    }
}

pub(crate) fn find<'a, T: Error + 'static>(error: &'a (dyn Error + 'static)) -> Option<&'a T> {
    let mut current = Some(error);
    while let Some(error) = current {
        if let Some(found) = error.downcast_ref::<T>() {
            return Some(found);
        }
        current = error.source();
    }
    None
}

/// The innermost error: for a refused connection the OS's own words, which say the most.
fn root_cause(error: &(dyn Error + 'static)) -> String {
    let mut current = error;
    while let Some(source) = current.source() {
        current = source;
    }
    current.to_string()
}

/// The error and its sources, skipping sources already quoted by the message before them.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut current = error.source();
    while let Some(source) = current {
        let part = source.to_string();
        if !text.contains(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
        current = source.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use rmcp::{model::ErrorData, transport::DynamicTransportError};

    use super::*;

    fn send_error(error: HttpError) -> ServiceError {
        ServiceError::TransportSend(DynamicTransportError::from_parts(
            "test",
            std::any::TypeId::of::<()>(),
            Box::new(error),
        ))
    }

    #[test]
    fn a_connection_this_process_could_not_open_is_not_the_server_being_down() {
        // What a socket that could not be made reports (EMFILE), as rmcp's transport passes it.
        let shortage = send_error(StreamableHttpError::Io(std::io::Error::from_raw_os_error(
            24,
        )));
        let failure = HttpFailure::of_request(&shortage).unwrap();
        assert!(
            matches!(failure, HttpFailure::ShortOfResources(_)),
            "{failure:?}"
        );
        let advice = failure.advice("remote");
        assert!(advice.contains("ulimit -n"), "{advice}");
        assert!(!advice.contains("is running"), "{advice}");
        let refused = send_error(StreamableHttpError::UnexpectedServerResponse(
            "HTTP 500 Internal Server Error: oops".into(),
        ));
        assert!(!matches!(
            HttpFailure::of_request(&refused),
            Some(HttpFailure::ShortOfResources(_))
        ));
    }

    #[test]
    fn an_expired_session_is_recognised() {
        assert_eq!(
            HttpFailure::of_request(&send_error(StreamableHttpError::SessionExpired)),
            Some(HttpFailure::SessionExpired)
        );
        let typescript = ServiceError::McpError(ErrorData::new(
            rmcp::model::ErrorCode(-32000),
            "Bad Request: No valid session ID provided",
            None,
        ));
        assert_eq!(
            HttpFailure::of_request(&typescript),
            Some(HttpFailure::SessionExpired)
        );
        let tool_error = ServiceError::McpError(ErrorData::internal_error("disk full", None));
        assert_eq!(HttpFailure::of_request(&tool_error), None);
    }

    #[test]
    fn refusals_without_a_challenge_still_point_at_the_headers() {
        let bare_401 =
            StreamableHttpError::UnexpectedServerResponse("HTTP 401 Unauthorized: go away".into());
        let failure = HttpFailure::of_request(&send_error(bare_401)).unwrap();
        assert_eq!(
            failure,
            HttpFailure::Refused("HTTP 401 Unauthorized".to_owned())
        );
        assert!(
            failure
                .advice("remote")
                .contains("check mcp_servers.remote.headers")
        );

        let not_found =
            StreamableHttpError::UnexpectedServerResponse("HTTP 404 Not Found: nothing".into());
        let failure = HttpFailure::of_request(&send_error(not_found)).unwrap();
        assert!(matches!(failure, HttpFailure::NotMcp(_)), "{failure:?}");
        assert!(failure.advice("remote").contains("mcp_servers.remote.url"));
    }
}
