//! rmcp's reqwest client for streamable HTTP, with two fixes: a JSON-RPC error that names no
//! request becomes the failure of the request it answers, and an answer over the limit of one
//! message becomes an error for its request ([`crate::http_limit`]).
//!
//! Without it, rmcp waits forever: it can only hand an error to the request whose id it
//! carries. The streamable HTTP examples of the TypeScript SDK, which many servers copy, answer
//! a request for a session they do not know with such an error (HTTP 400, "No valid session ID
//! provided") instead of the 404 of the specification; that one becomes an expired session.

use std::{collections::HashMap, sync::Arc};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::{
    model::{ClientJsonRpcMessage, ClientRequest, ServerJsonRpcMessage},
    transport::{
        AuthClient,
        streamable_http_client::{
            SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
        },
    },
};
use sse_stream::Sse;

use crate::http_limit::{limit_answer, request_id};

type Error = StreamableHttpError<reqwest::Error>;

#[derive(Clone)]
pub(crate) struct HttpClient {
    pub(crate) client: Sender,
    /// The server's name, for the errors of answers over the limit.
    pub(crate) server: Arc<str>,
}

/// What sends the requests: reqwest itself, or rmcp's OAuth client over it (it adds the
/// server's token, refreshed as it expires).
#[derive(Clone)]
pub(crate) enum Sender {
    Plain(reqwest::Client),
    OAuth(AuthClient<reqwest::Client>),
}

/// Calls the same method of whichever client sends.
macro_rules! send {
    ($sender:expr, $method:ident($($arg:expr),* $(,)?)) => {
        match $sender {
            Sender::Plain(client) => client.$method($($arg),*).await,
            Sender::OAuth(client) => client.$method($($arg),*).await,
        }
    };
}

/// Whether an error message says the server does not know the session.
pub(crate) fn names_unknown_session(message: &str) -> bool {
    message.to_ascii_lowercase().contains("no valid session id")
}

fn screen(
    request: bool,
    had_session: bool,
    response: StreamableHttpPostResponse,
) -> Result<StreamableHttpPostResponse, Error> {
    match response {
        StreamableHttpPostResponse::Json(ServerJsonRpcMessage::Error(error), _)
            if request && error.id.is_none() =>
        {
            if had_session && names_unknown_session(&error.error.message) {
                Err(StreamableHttpError::SessionExpired)
            } else {
                Err(StreamableHttpError::UnexpectedServerResponse(
                    format!(
                        "the server answered with an error that names no request: {}",
                        error.error.message
                    )
                    .into(),
                ))
            }
        }
        other => Ok(other),
    }
}

/// The headers of a request, with the `traceparent` a `tools/call` carries in its `_meta` (the
/// call's span) as an HTTP header too, for servers and proxies that trace HTTP.
fn traced(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let ClientJsonRpcMessage::Request(request) = message
        && let ClientRequest::CallToolRequest(call) = &request.request
        && let Some(traceparent) = call
            .params
            .meta
            .as_ref()
            .and_then(|meta| meta.0.get_traceparent())
        && let Ok(value) = HeaderValue::from_str(traceparent)
    {
        headers.insert(HeaderName::from_static("traceparent"), value);
    }
    headers
}

impl StreamableHttpClient for HttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let request = matches!(message, ClientJsonRpcMessage::Request(_));
        let had_session = session_id.is_some();
        let custom_headers = traced(&message, custom_headers);
        let id = request_id(&message);
        let response = send!(
            &self.client,
            post_message(uri, message, session_id, auth_header, custom_headers)
        );
        screen(
            request,
            had_session,
            limit_answer(&self.server, id, response)?,
        )
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let request = matches!(message, ClientJsonRpcMessage::Request(_));
        let had_session = session_id.is_some();
        let custom_headers = traced(&message, custom_headers);
        let id = request_id(&message);
        let response = send!(
            &self.client,
            post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
        );
        screen(
            request,
            had_session,
            limit_answer(&self.server, id, response)?,
        )
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        send!(
            &self.client,
            delete_session(uri, session_id, auth_header, custom_headers)
        )
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        send!(
            &self.client,
            get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
        )
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<Sse, SseError>>, Error> {
        send!(
            &self.client,
            get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
        )
    }
}

#[cfg(test)]
mod tests {
    use rmcp::model::{ErrorCode, ErrorData, JsonRpcError, JsonRpcVersion2_0, RequestId};

    use super::*;

    fn error(id: Option<RequestId>, message: &'static str) -> StreamableHttpPostResponse {
        StreamableHttpPostResponse::Json(
            ServerJsonRpcMessage::Error(JsonRpcError {
                jsonrpc: JsonRpcVersion2_0,
                id,
                error: ErrorData::new(ErrorCode(-32000), message, None),
            }),
            None,
        )
    }

    const UNKNOWN: &str = "Bad Request: No valid session ID provided";

    #[test]
    fn an_error_naming_no_request_fails_the_request() {
        let screened = screen(true, true, error(None, UNKNOWN));
        assert!(
            matches!(screened, Err(StreamableHttpError::SessionExpired)),
            "{screened:?}"
        );

        let screened = screen(true, true, error(None, "Parse error"));
        let Err(StreamableHttpError::UnexpectedServerResponse(message)) = screened else {
            panic!("{screened:?}");
        };
        assert!(message.contains("Parse error"), "{message}");

        // Without a session there is nothing to expire.
        let screened = screen(true, false, error(None, UNKNOWN));
        assert!(
            matches!(
                screened,
                Err(StreamableHttpError::UnexpectedServerResponse(_))
            ),
            "{screened:?}"
        );
    }

    #[test]
    fn errors_naming_their_request_and_answers_to_notifications_pass() {
        let correlated = screen(true, true, error(Some(RequestId::Number(3)), UNKNOWN));
        assert!(matches!(
            correlated,
            Ok(StreamableHttpPostResponse::Json(..))
        ));
        let notification = screen(false, true, error(None, UNKNOWN));
        assert!(matches!(
            notification,
            Ok(StreamableHttpPostResponse::Json(..))
        ));
    }
}
