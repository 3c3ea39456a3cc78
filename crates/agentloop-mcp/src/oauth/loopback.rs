//! The redirect listener of `agentloop mcp login`: one HTTP GET on the loopback interface, at
//! the redirect URI's port (any free one when it is 0), carrying the authorization's `code` and
//! `state` (or its `error`). The browser is told it may close the tab.

use std::{sync::Arc, time::Duration};

use async_trait::async_trait;
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpListener, TcpStream},
};

use super::{Approval, Authorizer, OAuthError, config::check_redirect_uri};

/// The most of a request that is read: a redirect's request line and headers fit.
const MAX_REQUEST_BYTES: usize = 16 * 1024;

/// Shows the authorization URL to the person (prints it, opens a browser).
pub type ShowUrl = Arc<dyn Fn(&str) + Send + Sync>;

/// Receives the redirect on the loopback interface.
pub struct LoopbackAuthorizer {
    show: ShowUrl,
    wait: Duration,
}

impl LoopbackAuthorizer {
    /// `show` tells the person where to go; the redirect is awaited for `wait` at most.
    pub fn new(show: ShowUrl, wait: Duration) -> Self {
        Self { show, wait }
    }
}

impl std::fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("wait", &self.wait)
            .finish()
    }
}

#[async_trait]
impl Authorizer for LoopbackAuthorizer {
    async fn prepare(
        &self,
        server: &str,
        redirect_uri: &str,
    ) -> Result<Box<dyn Approval>, OAuthError> {
        let not_approved = |reason: String| OAuthError::NotApproved {
            server: server.to_owned(),
            reason,
        };
        let mut url = check_redirect_uri(redirect_uri).map_err(not_approved)?;
        let host = url.host_str().unwrap_or("127.0.0.1").to_owned();
        let host = host.trim_start_matches('[').trim_end_matches(']');
        let port = url.port().unwrap_or(80);
        let listener = TcpListener::bind((host, port)).await.map_err(|error| {
            not_approved(format!(
                "cannot listen on {host}:{port} for the redirect: {error}"
            ))
        })?;
        let bound = listener
            .local_addr()
            .map_err(|error| not_approved(error.to_string()))?
            .port();
        let _ = url.set_port(Some(bound));
        Ok(Box::new(Listening {
            server: server.to_owned(),
            redirect_uri: url.to_string(),
            listener,
            show: self.show.clone(),
            wait: self.wait,
        }))
    }
}

struct Listening {
    server: String,
    redirect_uri: String,
    listener: TcpListener,
    show: ShowUrl,
    wait: Duration,
}

#[async_trait]
impl Approval for Listening {
    fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    async fn approve(self: Box<Self>, url: &str) -> Result<String, OAuthError> {
        (self.show)(url);
        let path = url::Url::parse(&self.redirect_uri)
            .map(|url| url.path().to_owned())
            .unwrap_or_else(|_| "/".to_owned());
        let receive = async {
            loop {
                let Ok((stream, _)) = self.listener.accept().await else {
                    continue;
                };
                if let Some(target) = receive(stream, &path).await {
                    return target;
                }
            }
        };
        let target = tokio::time::timeout(self.wait, receive)
            .await
            .map_err(|_| OAuthError::NotApproved {
                server: self.server.clone(),
                reason: format!(
                    "no redirect came to {} within {} s",
                    self.redirect_uri,
                    self.wait.as_secs()
                ),
            })?;
        let full = url::Url::parse(&self.redirect_uri)
            .and_then(|base| base.join(&target))
            .map_err(|error| OAuthError::NotApproved {
                server: self.server.clone(),
                reason: format!("the redirect is not a URL: {error}"),
            })?;
        if let Some((_, error)) = full.query_pairs().find(|(name, _)| name == "error") {
            let description = full
                .query_pairs()
                .find(|(name, _)| name == "error_description")
                .map(|(_, text)| format!(": {text}"))
                .unwrap_or_default();
            return Err(OAuthError::NotApproved {
                server: self.server.clone(),
                reason: format!("the authorization server answered {error}{description}"),
            });
        }
        Ok(full.to_string())
    }
}

/// Reads one request; the target (path and query) of a GET to `path`, answered with a page
/// that says what happened. Other requests (a favicon) get a 404 and `None`.
async fn receive(mut stream: TcpStream, path: &str) -> Option<String> {
    let mut request = Vec::with_capacity(1024);
    let mut chunk = [0u8; 1024];
    while !request.windows(4).any(|window| window == b"\r\n\r\n") {
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read(&mut chunk))
            .await
            .ok()?
            .ok()?;
        if read == 0 || request.len() + read > MAX_REQUEST_BYTES {
            return None;
        }
        request.extend_from_slice(&chunk[..read]);
    }
    let text = String::from_utf8_lossy(&request);
    let mut line = text.lines().next().unwrap_or_default().split_whitespace();
    let (method, target) = (line.next()?, line.next()?);
    let ours = method == "GET" && target.split('?').next() == Some(path);
    let (status, body) = if ours {
        (
            "200 OK",
            "agentloop received the authorization; you may close this tab.",
        )
    } else {
        ("404 Not Found", "Not found.")
    };
    let answer = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(answer.as_bytes()).await;
    let _ = stream.shutdown().await;
    ours.then(|| target.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::Mutex;

    use super::*;

    #[tokio::test]
    async fn the_redirect_is_received_on_a_free_port() {
        let shown = Arc::new(Mutex::new(String::new()));
        let seen = shown.clone();
        let authorizer = LoopbackAuthorizer::new(
            Arc::new(move |url: &str| *seen.lock().unwrap() = url.to_owned()),
            Duration::from_secs(30),
        );
        let approval = authorizer
            .prepare("github", "http://127.0.0.1:0/callback")
            .await
            .unwrap();
        let redirect = approval.redirect_uri().to_owned();
        assert!(!redirect.contains(":0/"), "{redirect}");
        let browser = tokio::spawn({
            let redirect = redirect.clone();
            async move {
                let client = reqwest::Client::new();
                // A request elsewhere first, as browsers ask for icons.
                let other = redirect.replace("/callback", "/favicon.ico");
                let _ = client.get(other).send().await;
                client
                    .get(format!("{redirect}?code=abc&state=xyz"))
                    .send()
                    .await
                    .unwrap()
                    .text()
                    .await
                    .unwrap()
            }
        });
        let target = approval
            .approve("https://auth.example/authorize")
            .await
            .unwrap();
        assert_eq!(target, format!("{redirect}?code=abc&state=xyz"));
        assert!(browser.await.unwrap().contains("close this tab"));
        assert_eq!(*shown.lock().unwrap(), "https://auth.example/authorize");
    }

    #[tokio::test]
    async fn a_refusal_is_an_error_that_says_so() {
        let authorizer = LoopbackAuthorizer::new(Arc::new(|_: &str| {}), Duration::from_secs(30));
        let approval = authorizer
            .prepare("github", "http://127.0.0.1:0/cb")
            .await
            .unwrap();
        let redirect = approval.redirect_uri().to_owned();
        tokio::spawn(async move {
            let _ = reqwest::get(format!("{redirect}?error=access_denied")).await;
        });
        let error = approval
            .approve("https://x/")
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("access_denied"), "{error}");
    }
}
