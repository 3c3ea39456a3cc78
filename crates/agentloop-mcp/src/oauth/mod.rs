//! OAuth 2.1 for MCP servers reached over HTTP, as the specification's authorization section
//! describes (2025-11-25): a 401 starts discovery (protected-resource metadata from the
//! `WWW-Authenticate` challenge or its well-known places, then the authorization server's
//! metadata, RFC 8414 and OpenID Connect), a client (configured, a client ID metadata document,
//! or dynamic registration), PKCE S256 and the `resource` parameter, then tokens refreshed as
//! they expire and scopes stepped up on a 403 `insufficient_scope`, a few times at most.
//!
//! rmcp's `auth` feature does the protocol ([`rmcp::transport::auth`]); this module decides
//! when, keeps the tokens sealed in agentloop's store ([`vault`]), and asks a person to approve
//! through an [`Authorizer`] (`agentloop mcp login`'s local redirect listener, or none during a
//! run).

mod authorizer;
mod challenge;
mod config;
mod flow;
mod key;
mod loopback;
mod vault;

use std::{fmt, sync::Arc};

use agentloop_core::{DEFAULT_USER, OAuthTokenStore};

pub use authorizer::{Approval, Authorizer, NoAuthorizer};
pub(crate) use challenge::Challenge;
pub use config::{OAuthConfig, OAuthGrant};
pub(crate) use flow::{MAX_AUTHORIZATIONS_IN_A_ROW, OAuthLink};
pub use key::{TOKEN_KEY_ENV, TokenKey, TokenKeyError};
pub use loopback::LoopbackAuthorizer;

/// What a connection needs to authorize with OAuth: where its tokens are kept, the key that
/// seals them, whose they are, and who approves an authorization.
#[derive(Clone)]
pub struct OAuthContext {
    /// Where sealed tokens are kept between processes; `None` keeps them in memory only.
    pub tokens: Option<Arc<dyn OAuthTokenStore>>,
    /// Seals the tokens; without it, tokens are not kept in `tokens` at all (and an
    /// authorization that would have to be kept is refused, saying what to set).
    pub key: Option<TokenKey>,
    /// Whose tokens these are.
    pub user: String,
    /// Asks a person to approve an authorization.
    pub authorizer: Arc<dyn Authorizer>,
}

impl OAuthContext {
    /// Tokens in memory only, and no one to approve an authorization (the server's 401 is an
    /// error that says to log in).
    pub fn in_memory() -> Self {
        Self {
            tokens: None,
            key: None,
            user: DEFAULT_USER.to_owned(),
            authorizer: Arc::new(NoAuthorizer),
        }
    }
}

impl Default for OAuthContext {
    fn default() -> Self {
        Self::in_memory()
    }
}

impl fmt::Debug for OAuthContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthContext")
            .field("stored", &self.tokens.is_some())
            .field("key", &self.key.is_some())
            .field("user", &self.user)
            .finish()
    }
}

/// Why authorizing with a server failed; the message says what to do.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// Authorization is needed and no one can approve it here.
    #[error(
        "MCP server '{server}' needs OAuth authorization: run `agentloop mcp login {server}` \
         (the tokens are kept in the store, sealed with {TOKEN_KEY_ENV})"
    )]
    LoginNeeded { server: String },
    /// The server answered 401 and publishes no OAuth metadata.
    #[error(
        "the server refused the request (HTTP 401 Unauthorized) and publishes no OAuth \
         metadata; check mcp_servers.{server}.headers (does the server need an Authorization \
         header, and is its token right?), or add [mcp_servers.{server}.oauth] to authorize at \
         its default endpoints"
    )]
    NotOAuth { server: String },
    /// Tokens would have to be kept, and there is no key to seal them with.
    #[error(
        "MCP server '{server}' needs OAuth tokens kept in the store, and they are only kept \
         encrypted: set {TOKEN_KEY_ENV} to 32 random bytes as 64 hex digits (for example the \
         output of `openssl rand -hex 32`)"
    )]
    NoKey { server: String },
    /// rmcp's OAuth client failed.
    #[error("OAuth authorization with MCP server '{server}' failed: {reason}")]
    Failed {
        server: String,
        reason: String,
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// The person did not approve, or the redirect never came.
    #[error("OAuth authorization with MCP server '{server}' was not completed: {reason}")]
    NotApproved { server: String, reason: String },
    /// The server kept refusing the tokens of several authorizations in a row.
    #[error(
        "MCP server '{server}' still refuses agentloop's requests after {times} OAuth \
         authorizations in a row; check mcp_servers.{server}.oauth.scopes and the account's rights"
    )]
    StillRefused { server: String, times: u32 },
    #[error("the OAuth token store failed: {0}")]
    Store(#[from] agentloop_core::StoreError),
}

impl OAuthError {
    pub(crate) fn failed(server: &str, error: rmcp::transport::AuthError) -> Self {
        OAuthError::Failed {
            server: server.to_owned(),
            reason: error.to_string(),
            source: Some(Box::new(error)),
        }
    }
}
