//! A session with a server over streamable HTTP, opened again once when the server forgets it,
//! and by the supervisor when the server could not be reached.

use std::{
    collections::HashMap,
    future::Future,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use agentloop_core::ToolError;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::{
    Peer, RoleClient, ServiceError, ServiceExt,
    service::ClientInitializeError,
    transport::{
        StreamableHttpClientTransport, common::client_side_sse::SseRetryPolicy,
        streamable_http_client::StreamableHttpClientTransportConfig,
    },
};
use tokio::sync::watch;

use crate::{
    McpError, McpServerConfig,
    client::{Client, Service},
    config::parse_header,
    http_client::{HttpClient, Sender},
    http_failure::HttpFailure,
    notices::Notices,
    oauth::{Challenge, OAuthContext, OAuthError, OAuthLink},
};

/// How often a broken event stream is resumed before its requests fail: a server that died must
/// not leave a call waiting on reconnection attempts for minutes.
const SSE_RESUME_ATTEMPTS: usize = 3;
const SSE_RESUME_BASE_DELAY: Duration = Duration::from_millis(250);
/// How often one request (or the handshake) authorizes before it gives up (fewer when the
/// link's authorizations in a row run out first).
const AUTHORIZATIONS_PER_REQUEST: u32 = crate::oauth::MAX_AUTHORIZATIONS_IN_A_ROW;

pub(crate) struct HttpLink {
    server: String,
    url: String,
    client: reqwest::Client,
    /// The server's OAuth, unless `headers` authorize.
    oauth: Option<Arc<OAuthLink>>,
    headers: HashMap<HeaderName, HeaderValue>,
    /// Bounds a new handshake after the server forgot the session, like the first one.
    handshake_timeout: Duration,
    notices: Notices,
    offer: Arc<crate::offer::ClientOffer>,
    session: Mutex<Session>,
    /// Held while a new session is opened, so that calls failing together open one.
    reopening: tokio::sync::Mutex<()>,
    /// Why the server could not be reached, until a request gets an answer again; `None` while
    /// the last request got one.
    unreachable: watch::Sender<Option<String>>,
}

struct Session {
    /// `None` once shut down.
    service: Option<Service>,
    /// Moves whenever a new session replaces the current one.
    generation: u64,
    /// Moves whenever a new session is attempted, whether it opens or not.
    attempts: u64,
    /// Why the last attempt failed, for the calls that waited for it.
    last_failure: Option<String>,
}

/// What a request saw of the session when it started.
#[derive(Clone, Copy)]
struct Seen {
    generation: u64,
    attempts: u64,
}

impl HttpLink {
    /// Connects to the server and performs the MCP handshake; the caller bounds the time.
    pub(crate) async fn connect(
        server: &str,
        url: &str,
        config: &McpServerConfig,
        timeout: Duration,
        notices: Notices,
        oauth: &OAuthContext,
    ) -> Result<HttpLink, McpError> {
        let connect_error = |reason: String| McpError::Connect {
            server: server.to_owned(),
            url: url.to_owned(),
            reason,
        };
        let mut headers = HashMap::with_capacity(config.headers.len());
        for (name, value) in &config.headers {
            let (name, value) =
                parse_header(name, value).map_err(|why| why.setting(server, name))?;
            headers.insert(name, value);
        }
        let client = reqwest::Client::builder()
            .connect_timeout(timeout)
            .build()
            .map_err(|error| connect_error(format!("cannot build the HTTP client: {error}")))?;
        let oauth = match config.oauth_settings() {
            Some(settings) => Some(Arc::new(
                OAuthLink::new(server, url, settings, oauth.clone(), client.clone())
                    .await
                    .map_err(|error| connect_error(error.to_string()))?,
            )),
            None => None,
        };
        let link = HttpLink {
            server: server.to_owned(),
            url: url.to_owned(),
            client,
            oauth,
            headers,
            handshake_timeout: timeout,
            notices,
            offer: Arc::new(config.offer()),
            session: Mutex::new(Session {
                service: None,
                generation: 0,
                attempts: 0,
                last_failure: None,
            }),
            reopening: tokio::sync::Mutex::new(()),
            unreachable: watch::Sender::new(None),
        };
        let service = link.open_authorized().await.map_err(|opening| {
            let reason = match opening {
                Opening::OAuth(error) => error.to_string(),
                Opening::Handshake(error) => match HttpFailure::of_handshake(&error) {
                    Some(failure) => failure.advice(server),
                    None => describe_handshake_error(&error),
                },
            };
            connect_error(reason)
        })?;
        link.lock_session().service = Some(service);
        Ok(link)
    }

    /// Opens the first session, authorizing when the server asks for it.
    async fn open_authorized(&self) -> Result<Service, Opening> {
        let mut authorizations = 0;
        loop {
            let seen = self.oauth.as_ref().map(|oauth| oauth.authorizations());
            let error = match self.open_session().await {
                Ok(service) => {
                    if authorizations > 0
                        && let Some(oauth) = &self.oauth
                    {
                        oauth.accepted();
                    }
                    return Ok(service);
                }
                Err(error) => error,
            };
            let (Some(oauth), Some(seen), Some(challenge)) =
                (&self.oauth, seen, Challenge::of_handshake(&error))
            else {
                return Err(Opening::Handshake(Box::new(error)));
            };
            if authorizations == AUTHORIZATIONS_PER_REQUEST {
                return Err(Opening::Handshake(Box::new(error)));
            }
            authorizations += 1;
            oauth
                .answer(&challenge, seen)
                .await
                .map_err(Opening::OAuth)?;
        }
    }

    async fn open_session(&self) -> Result<Service, ClientInitializeError> {
        let mut config = StreamableHttpClientTransportConfig::with_uri(self.url.as_str())
            .custom_headers(self.headers.clone())
            // rmcp would re-initialise on its own, but silently: the session's tools may have
            // changed, so agentloop does it itself and tells the agent.
            .reinit_on_expired_session(false);
        config.retry_config = Arc::new(BoundedResume);
        let client = match &self.oauth {
            Some(oauth) => Sender::OAuth(oauth.client()),
            None => Sender::Plain(self.client.clone()),
        };
        let transport = StreamableHttpClientTransport::with_client(
            HttpClient {
                client,
                server: self.server.as_str().into(),
            },
            config,
        );
        Client::new(&self.server, self.notices.clone(), self.offer.clone())
            .serve(transport)
            .await
    }

    pub(crate) fn url(&self) -> &str {
        &self.url
    }

    /// Whether the link is open and the server answered the last request.
    pub(crate) fn is_running(&self) -> bool {
        self.lock_session().service.is_some() && self.unreachable.borrow().is_none()
    }

    /// How many sessions replaced the first one.
    pub(crate) fn generation(&self) -> u64 {
        self.lock_session().generation
    }

    /// Resolves with why, once a request finds the server unreachable (at once if the last one
    /// did).
    pub(crate) async fn unreachable(&self) -> String {
        let mut unreachable = self.unreachable.subscribe();
        let why = match unreachable.wait_for(Option::is_some).await {
            Ok(why) => why.clone(),
            // The sender lives as long as `self`.
            Err(_) => None,
        };
        why.unwrap_or_else(|| "it cannot be reached".to_owned())
    }

    /// Opens a new session in place of one the server can no longer be reached through (it went
    /// away, and may be back); the error says why not.
    pub(crate) async fn renew(&self) -> Result<(), ReopenFailure> {
        let _reopening = self.reopening.lock().await;
        self.open_new_session().await.map(drop)
    }

    /// Runs one request; when the server forgot the session, opens a new one and runs the
    /// request once more. The server answers a forgotten session before doing anything, so the
    /// request never runs twice.
    pub(crate) async fn run<T, F, Fut>(&self, request: F) -> Result<T, ToolError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let (seen, peer) = self.current()?;
        let authorized = self.oauth.as_ref().map(|oauth| oauth.authorizations());
        let error = match request(peer).await {
            Ok(value) => return Ok(self.answered(value)),
            Err(error) => error,
        };
        let error = match self
            .authorize_and_retry(&request, error, authorized)
            .await?
        {
            Ok(value) => return Ok(self.answered(value)),
            Err(error) => error,
        };
        if HttpFailure::of_request(&error) != Some(HttpFailure::SessionExpired) {
            return Err(self.tool_error(error));
        }
        tracing::info!(server = %self.server, url = %self.url, "MCP server forgot the session");
        let peer = self.reopen(seen).await?;
        match request(peer).await {
            Ok(value) => Ok(self.answered(value)),
            Err(error) if HttpFailure::of_request(&error) == Some(HttpFailure::SessionExpired) => {
                Err(ToolError::Unavailable(format!(
                    "MCP server '{}' at {} forgot its session, and then the new one at once",
                    self.server, self.url
                )))
            }
            Err(error) => Err(self.tool_error(error)),
        }
    }

    /// When the server refused a request for its token (401) or its scopes (403), authorizes
    /// and sends the request again, a few times at most: the server refused before doing
    /// anything, so the request never runs twice. The last error otherwise.
    async fn authorize_and_retry<T, F, Fut>(
        &self,
        request: &F,
        mut error: ServiceError,
        mut authorized: Option<u64>,
    ) -> Result<Result<T, ServiceError>, ToolError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let Some(oauth) = &self.oauth else {
            return Ok(Err(error));
        };
        for _ in 0..AUTHORIZATIONS_PER_REQUEST {
            let (Some(challenge), Some(seen)) = (Challenge::of_request(&error), authorized) else {
                return Ok(Err(error));
            };
            if let Err(why) = oauth.answer(&challenge, seen).await {
                return Err(ToolError::Unavailable(why.to_string()));
            }
            authorized = Some(oauth.authorizations());
            let (_, peer) = self.current()?;
            match request(peer).await {
                Ok(value) => {
                    oauth.accepted();
                    return Ok(Ok(value));
                }
                Err(again) => error = again,
            }
        }
        match Challenge::of_request(&error) {
            Some(_) => Err(ToolError::Unavailable(format!(
                "MCP server '{}' at {} still refuses the request after \
                 {AUTHORIZATIONS_PER_REQUEST} OAuth authorizations",
                self.server, self.url
            ))),
            None => Ok(Err(error)),
        }
    }

    fn current(&self) -> Result<(Seen, Peer<RoleClient>), ToolError> {
        let session = self.lock_session();
        let seen = Seen {
            generation: session.generation,
            attempts: session.attempts,
        };
        match &session.service {
            Some(service) => Ok((seen, service.peer().clone())),
            None => Err(self.shut_down()),
        }
    }

    /// Opens a new session unless another call did (or tried) since `seen`.
    async fn reopen(&self, seen: Seen) -> Result<Peer<RoleClient>, ToolError> {
        let _reopening = self.reopening.lock().await;
        {
            let session = self.lock_session();
            let Some(service) = &session.service else {
                return Err(self.shut_down());
            };
            if session.generation != seen.generation {
                return Ok(service.peer().clone());
            }
            if session.attempts != seen.attempts {
                let why = session.last_failure.clone().unwrap_or_default();
                return Err(ToolError::Unavailable(why));
            }
        }
        let failure = match self.open_new_session().await {
            Ok(peer) => return Ok(peer),
            Err(failure) => failure,
        };
        let why = format!(
            "MCP server '{}' at {} forgot its session and a new one could not be opened: \
             {failure}",
            self.server, self.url
        );
        self.lock_session().last_failure = Some(why.clone());
        Err(ToolError::Unavailable(why))
    }

    /// Opens a new session and puts it in place of the current one; the caller holds
    /// `reopening`. The error says why the server did not accept one.
    async fn open_new_session(&self) -> Result<Peer<RoleClient>, ReopenFailure> {
        let opened = tokio::time::timeout(self.handshake_timeout, self.open_session()).await;
        let mut session = self.lock_session();
        session.attempts += 1;
        let failure = match opened {
            Ok(Ok(service)) if session.service.is_some() => {
                let peer = service.peer().clone();
                // Dropping the old session cancels its client task, which tells the server to
                // forget it too, in the background.
                drop(session.service.replace(service));
                session.generation += 1;
                session.last_failure = None;
                drop(session);
                self.unreachable.send_replace(None);
                // The new session may offer other tools than the one it replaces.
                self.notices.new_session();
                tracing::info!(server = %self.server, "opened a new MCP session");
                return Ok(peer);
            }
            // Shut down while the new session opened: it goes with the rest.
            Ok(Ok(_)) => return Err(ReopenFailure::ShutDown),
            Ok(Err(error)) => {
                let reason = match HttpFailure::of_handshake(&error) {
                    Some(failure) => {
                        let advice = failure.advice(&self.server);
                        if matches!(failure, HttpFailure::Unreachable(_)) {
                            self.unreachable.send_replace(Some(advice.clone()));
                        }
                        advice
                    }
                    None => describe_handshake_error(&error),
                };
                ReopenFailure::Handshake {
                    reason,
                    source: Box::new(error),
                }
            }
            Err(_elapsed) => ReopenFailure::Timeout {
                seconds: self.handshake_timeout.as_secs_f64(),
            },
        };
        session.last_failure = Some(failure.to_string());
        Err(failure)
    }

    fn answered<T>(&self, value: T) -> T {
        self.unreachable
            .send_if_modified(|unreachable| unreachable.take().is_some());
        value
    }

    fn tool_error(&self, error: ServiceError) -> ToolError {
        let (server, url) = (&self.server, &self.url);
        match (HttpFailure::of_request(&error), error) {
            (Some(HttpFailure::Unreachable(why)), _) => {
                let message = format!(
                    "MCP server '{server}' at {url} cannot be reached: {why}; is it running?"
                );
                self.unreachable.send_replace(Some(message.clone()));
                ToolError::Unavailable(message)
            }
            (Some(HttpFailure::ShortOfResources(advice)), _) => ToolError::Unavailable(format!(
                "the request to MCP server '{server}' at {url} could not be sent: no connection \
                 could be opened: {advice}"
            )),
            (Some(HttpFailure::Refused(status)), _) => ToolError::Unavailable(format!(
                "MCP server '{server}' at {url} refused the request ({status}); check \
                 mcp_servers.{server}.headers"
            )),
            (Some(failure), _) if failure != HttpFailure::SessionExpired => {
                ToolError::Unavailable(format!(
                    "the request to MCP server '{server}' at {url} failed: {}",
                    failure.advice(server)
                ))
            }
            (_, ServiceError::McpError(error)) => ToolError::Failed(error.message.into_owned()),
            (_, ServiceError::TransportClosed) => {
                // The session's client task ended (its event stream could not be resumed): only
                // a new session reaches the server again.
                let message = format!(
                    "the connection to MCP server '{server}' at {url} closed before it answered"
                );
                self.unreachable.send_replace(Some(message.clone()));
                ToolError::Unavailable(message)
            }
            (_, error) => ToolError::Failed(format!(
                "the request to MCP server '{server}' at {url} failed: {error}"
            )),
        }
    }

    fn shut_down(&self) -> ToolError {
        ToolError::Unavailable(format!(
            "MCP server '{}' at {} is not connected: it was shut down",
            self.server, self.url
        ))
    }

    /// Ends the session; the server is told to forget it.
    pub(crate) async fn shutdown(&self) {
        let service = self.lock_session().service.take();
        if let Some(mut service) = service
            && let Err(error) = service.close().await
        {
            tracing::debug!(server = %self.server, %error, "MCP client task failed while closing");
        }
    }

    /// Ends the session without waiting; its client task tells the server in the background.
    pub(crate) fn close_now(&self) {
        drop(self.lock_session().service.take());
    }

    fn lock_session(&self) -> MutexGuard<'_, Session> {
        // Every update of the session leaves it whole, so a poisoned lock holds nothing broken.
        self.session
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn describe_handshake_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::JsonRpcError(error) => {
            format!("the server refused to initialize: {}", error.message)
        }
        ClientInitializeError::ConnectionClosed(awaited) => {
            format!("the connection closed before the server sent its {awaited}")
        }
        other => other.to_string(),
    }
}

/// Why the first session could not be opened.
enum Opening {
    Handshake(Box<ClientInitializeError>),
    OAuth(OAuthError),
}

/// Why a new session could not be opened in place of one that went away.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ReopenFailure {
    #[error("it was shut down")]
    ShutDown,
    /// `reason` says what to check.
    #[error("{reason}")]
    Handshake {
        reason: String,
        #[source]
        source: Box<ClientInitializeError>,
    },
    #[error("it did not answer a new handshake within {seconds} s")]
    Timeout { seconds: f64 },
}

/// Resumes a broken event stream a few times, backing off, then gives up.
#[derive(Debug)]
struct BoundedResume;

impl SseRetryPolicy for BoundedResume {
    fn retry(&self, attempt: usize) -> Option<Duration> {
        (attempt < SSE_RESUME_ATTEMPTS).then(|| SSE_RESUME_BASE_DELAY * (1u32 << attempt.min(8)))
    }
}
