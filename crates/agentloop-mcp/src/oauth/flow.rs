//! One server's OAuth: the tokens the transport sends (through rmcp's `AuthClient`, which
//! refreshes them as they expire and once more when the server rejects one), and what happens
//! on a challenge the transport cannot answer itself: an authorization, or a step-up of scopes.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use rmcp::transport::{
    AuthClient, AuthorizationManager, AuthorizationRequest, AuthorizationSession,
    auth::{ClientCredentialsConfig, OAuthClientConfig, OAuthState, WWWAuthenticateParams},
};
use tokio::sync::Mutex;

use super::{
    Approval, Challenge, OAuthConfig, OAuthContext, OAuthError, OAuthGrant, authorizer::Direct,
    vault::Vault,
};

/// The client name agentloop registers itself with (dynamic client registration).
const CLIENT_NAME: &str = "agentloop";

/// How many authorizations in a row may go without a request the server then accepted: a
/// server that refuses every token must not send the person to approve forever.
pub(crate) const MAX_AUTHORIZATIONS_IN_A_ROW: u32 = 3;

/// The OAuth state of one server's link.
pub(crate) struct OAuthLink {
    server: String,
    url: String,
    config: OAuthConfig,
    /// Whether `[mcp_servers.NAME.oauth]` was written: only then is a server that publishes
    /// no metadata authorized at its default endpoints (the 2025-03-26 specification).
    configured: bool,
    context: OAuthContext,
    vault: Vault,
    /// What the transport sends requests through; its manager is replaced by each
    /// authorization.
    client: AuthClient<reqwest::Client>,
    /// One authorization at a time; the count of those completed, so that requests refused
    /// together authorize once.
    authorizing: Mutex<()>,
    authorized: AtomicU64,
    /// Authorizations since a request was last accepted after one.
    in_a_row: AtomicU32,
    /// The scopes asked for last, which a step-up adds to.
    requested: Mutex<Vec<String>>,
}

impl OAuthLink {
    /// The server's OAuth state, with the tokens kept from an earlier authorization when there
    /// are some (the authorization server's metadata is read to refresh them).
    pub(crate) async fn new(
        server: &str,
        url: &str,
        (config, configured): (OAuthConfig, bool),
        context: OAuthContext,
        http: reqwest::Client,
    ) -> Result<OAuthLink, OAuthError> {
        let vault = Vault::new(server, &context);
        let mut manager = manager(server, url, &vault).await?;
        if let Some(record) = vault.record().await? {
            match manager.initialize_from_store().await {
                Ok(true) => {
                    if let Some(secret) = &record.client_secret {
                        // rmcp knows only the client's ID from what it stored.
                        let redirect = record
                            .redirect_uri
                            .clone()
                            .unwrap_or_else(|| config.redirect_uri().to_owned());
                        let client =
                            OAuthClientConfig::new(&record.credentials.client_id, redirect)
                                .with_client_secret(secret);
                        manager
                            .configure_client(client)
                            .map_err(|error| OAuthError::failed(server, error))?;
                    }
                    tracing::debug!(server, "OAuth tokens kept from an earlier authorization");
                }
                Ok(false) => {}
                // The tokens are still sent; only a refresh needs the metadata.
                Err(error) => tracing::warn!(
                    server,
                    %error,
                    "cannot read the authorization server's metadata to refresh kept tokens"
                ),
            }
        }
        Ok(OAuthLink {
            server: server.to_owned(),
            url: url.to_owned(),
            config,
            configured,
            context,
            vault,
            client: AuthClient::new(http, manager),
            authorizing: Mutex::new(()),
            authorized: AtomicU64::new(0),
            in_a_row: AtomicU32::new(0),
            requested: Mutex::new(Vec::new()),
        })
    }

    /// What the transport sends requests through.
    pub(crate) fn client(&self) -> AuthClient<reqwest::Client> {
        self.client.clone()
    }

    /// How many authorizations completed: read before a request, passed to [`Self::answer`].
    pub(crate) fn authorizations(&self) -> u64 {
        self.authorized.load(Ordering::Acquire)
    }

    /// Answers a challenge to a request sent after `seen` authorizations: nothing to do when
    /// another request authorized since; else an authorization (401) or one with more scopes
    /// (403 `insufficient_scope`).
    pub(crate) async fn answer(&self, challenge: &Challenge, seen: u64) -> Result<(), OAuthError> {
        let _one = self.authorizing.lock().await;
        if self.authorizations() != seen {
            return Ok(());
        }
        if self.in_a_row.load(Ordering::Acquire) >= MAX_AUTHORIZATIONS_IN_A_ROW {
            return Err(OAuthError::StillRefused {
                server: self.server.clone(),
                times: MAX_AUTHORIZATIONS_IN_A_ROW,
            });
        }
        self.in_a_row.fetch_add(1, Ordering::AcqRel);
        let header = challenge.header();
        let header = (!header.trim().is_empty()).then_some(header);
        if self.config.grant == OAuthGrant::ClientCredentials {
            self.client_credentials().await?;
        } else {
            let scopes = match challenge {
                Challenge::Unauthorized(_) => self.config.scopes.clone(),
                Challenge::InsufficientScope(header) => self.stepped_up(header).await,
            };
            self.authorize(header, scopes).await?;
        }
        self.authorized.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// A request sent after an authorization was accepted: the count in a row starts again.
    pub(crate) fn accepted(&self) {
        self.in_a_row.store(0, Ordering::Release);
    }

    /// The scopes asked for before and those the challenge names.
    async fn stepped_up(&self, header: &str) -> Vec<String> {
        let mut scopes = self.requested.lock().await.clone();
        if let Ok(base) = url::Url::parse(&self.url)
            && let Some(wanted) = WWWAuthenticateParams::parse(header, &base).scope
        {
            for scope in wanted.split_whitespace() {
                if !scopes.iter().any(|known| known == scope) {
                    scopes.push(scope.to_owned());
                }
            }
        }
        scopes
    }

    /// The authorization code flow: discovery (from the challenge when there is one), a
    /// client, PKCE, a person's approval, the code exchanged for tokens (kept in the vault).
    async fn authorize(
        &self,
        challenge: Option<&str>,
        scopes: Vec<String>,
    ) -> Result<(), OAuthError> {
        let server = self.server.as_str();
        let failed = |error| OAuthError::failed(server, error);
        let mut manager = manager(server, &self.url, &self.vault).await?;
        let resolution = manager
            .resolve_metadata_from_challenge(challenge)
            .await
            .map_err(failed)?;
        if !resolution.source.is_discovered() && !self.configured {
            // A 401 with no sign of OAuth: a token of the server's own, in `headers`.
            return Err(OAuthError::NotOAuth {
                server: server.to_owned(),
            });
        }
        self.vault.check_keepable()?;
        let metadata_documents = resolution
            .metadata
            .additional_fields
            .get("client_id_metadata_document_supported")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false);
        manager.set_metadata(resolution.metadata);

        let approval: Box<dyn Approval> = if self.config.interactive {
            self.context
                .authorizer
                .prepare(server, self.config.redirect_uri())
                .await?
        } else {
            Box::new(Direct::new(server, self.config.redirect_uri()))
        };
        let redirect = approval.redirect_uri().to_owned();
        let scopes = if scopes.is_empty() {
            manager.select_initial_scopes(&[]).await
        } else {
            scopes
        };
        let mut request =
            AuthorizationRequest::new(redirect.as_str()).with_client_name(CLIENT_NAME);
        if !scopes.is_empty() {
            request = request.with_scopes(scopes.iter().cloned());
        }
        let secret = match (&self.config.client_id, &self.config.client_metadata_url) {
            (Some(client_id), _) => {
                request = request.with_preregistered_client(client_id);
                self.config.client_secret.clone()
            }
            (None, Some(url)) if metadata_documents => {
                request = request.with_client_metadata_url(url);
                None
            }
            _ => {
                // Registered here rather than by rmcp, which would keep the secret to itself.
                let asked: Vec<&str> = scopes.iter().map(String::as_str).collect();
                let client = manager
                    .register_client(CLIENT_NAME, &redirect, &asked)
                    .await
                    .map_err(failed)?;
                request = request.with_preregistered_client(&client.client_id);
                client.client_secret
            }
        };
        if let Some(secret) = &secret {
            request = request.with_client_secret(secret);
        }
        self.vault.set_client(secret, Some(redirect)).await;
        let session = AuthorizationSession::new(manager, request)
            .await
            .map_err(|(_, error)| failed(error))?;
        let callback = approval.approve(session.get_authorization_url()).await?;
        session
            .handle_callback_url(&callback)
            .await
            .map_err(failed)?;
        *self.requested.lock().await = session.auth_manager.get_current_scopes().await;
        *self.client.auth_manager.lock().await = session.auth_manager;
        tracing::info!(server, "authorized with OAuth");
        Ok(())
    }

    /// The client credentials grant: the client itself, no person.
    async fn client_credentials(&self) -> Result<(), OAuthError> {
        let server = self.server.as_str();
        let failed = |error| OAuthError::failed(server, error);
        let (Some(client_id), Some(client_secret)) =
            (&self.config.client_id, &self.config.client_secret)
        else {
            // `validate` refused this configuration already.
            return Err(OAuthError::LoginNeeded {
                server: server.to_owned(),
            });
        };
        self.vault.check_keepable()?;
        let manager = manager(server, &self.url, &self.vault).await?;
        let mut state = OAuthState::Unauthorized(manager);
        state
            .authenticate_client_credentials(ClientCredentialsConfig::ClientSecret {
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scopes: self.config.scopes.clone(),
                resource: Some(self.url.clone()),
            })
            .await
            .map_err(failed)?;
        let Some(manager) = state.into_authorization_manager() else {
            return Err(OAuthError::NotApproved {
                server: server.to_owned(),
                reason: "the client credentials grant did not authorize".to_owned(),
            });
        };
        *self.client.auth_manager.lock().await = manager;
        tracing::info!(server, "authorized with OAuth client credentials");
        Ok(())
    }
}

/// A manager for the server at `url` that keeps its tokens in `vault`. Metadata found through
/// the server may point at loopback or private addresses only when the server's own URL does.
async fn manager(
    server: &str,
    url: &str,
    vault: &Vault,
) -> Result<AuthorizationManager, OAuthError> {
    let mut manager = AuthorizationManager::new(url)
        .await
        .map_err(|error| OAuthError::failed(server, error))?;
    manager.set_credential_store(vault.clone());
    Ok(manager)
}
