//! Who approves an authorization: a person in a browser, sent back to a redirect URI that
//! agentloop receives ([`super::LoopbackAuthorizer`]), or no one ([`NoAuthorizer`]: a run that
//! meets a server it is not authorized with fails, saying to log in). A server configured with
//! `interactive = false` is approved by following the authorization URL ([`Direct`]).

use async_trait::async_trait;

use super::OAuthError;

/// Asks a person to approve an authorization with a server.
#[async_trait]
pub trait Authorizer: Send + Sync {
    /// Gets ready to receive the redirect of an authorization with `server`, sent to
    /// `redirect_uri` (as configured: its port may be 0, any free one).
    async fn prepare(
        &self,
        server: &str,
        redirect_uri: &str,
    ) -> Result<Box<dyn Approval>, OAuthError>;
}

/// One authorization being approved.
#[async_trait]
pub trait Approval: Send {
    /// The redirect URI the authorization is made with (the port taken, if it was 0).
    fn redirect_uri(&self) -> &str;

    /// Shows `url` to the person and waits for the redirect: the whole URL it arrived at, with
    /// its `code` and `state`.
    async fn approve(self: Box<Self>, url: &str) -> Result<String, OAuthError>;
}

/// No one to approve: authorization ends with [`OAuthError::LoginNeeded`].
#[derive(Debug, Clone, Copy, Default)]
pub struct NoAuthorizer;

#[async_trait]
impl Authorizer for NoAuthorizer {
    async fn prepare(
        &self,
        server: &str,
        _redirect_uri: &str,
    ) -> Result<Box<dyn Approval>, OAuthError> {
        Err(OAuthError::LoginNeeded {
            server: server.to_owned(),
        })
    }
}

/// Follows the authorization URL without a person: for authorization servers that approve at
/// once and redirect (`interactive = false`). The redirect is read, not followed.
#[derive(Debug)]
pub(crate) struct Direct {
    server: String,
    redirect_uri: String,
}

impl Direct {
    pub(crate) fn new(server: &str, redirect_uri: &str) -> Direct {
        // Nothing listens: a port of 0 would only puzzle the authorization server.
        let redirect_uri = match url::Url::parse(redirect_uri) {
            Ok(mut url) if url.port() == Some(0) => {
                let _ = url.set_port(None);
                url.to_string()
            }
            _ => redirect_uri.to_owned(),
        };
        Direct {
            server: server.to_owned(),
            redirect_uri,
        }
    }
}

#[async_trait]
impl Approval for Direct {
    fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    async fn approve(self: Box<Self>, url: &str) -> Result<String, OAuthError> {
        let not_approved = |reason: String| OAuthError::NotApproved {
            server: self.server.clone(),
            reason,
        };
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(std::time::Duration::from_secs(30))
            .build()
            .map_err(|error| not_approved(format!("cannot build an HTTP client: {error}")))?;
        let response = client
            .get(url)
            .send()
            .await
            .map_err(|error| not_approved(format!("the authorization URL failed: {error}")))?;
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .ok_or_else(|| {
                not_approved(format!(
                    "the authorization server answered {} without redirecting \
                     (interactive = false needs a server that approves at once)",
                    response.status()
                ))
            })?;
        let target = response
            .url()
            .join(location)
            .map_err(|error| not_approved(format!("the redirect is not a URL: {error}")))?;
        Ok(target.to_string())
    }
}
