//! The OAuth context of a process's MCP connections: tokens kept in the store, sealed with the
//! key in `AGENTLOOP_TOKEN_KEY`, belonging to the local user (`agentloop mcp login` authorizes
//! for it; every run of the process uses them).

use std::sync::Arc;

use agentloop_core::{DEFAULT_USER, OAuthTokenStore};
use agentloop_mcp::oauth::{Authorizer, OAuthContext, TokenKey, TokenKeyError};
use agentloop_store::SqlStore;

/// Tokens in `store` (memory only without one), approved by `authorizer`.
pub fn oauth_context(
    store: Option<Arc<SqlStore>>,
    authorizer: Arc<dyn Authorizer>,
) -> Result<OAuthContext, TokenKeyError> {
    Ok(OAuthContext {
        tokens: store.map(|store| store as Arc<dyn OAuthTokenStore>),
        key: TokenKey::from_env()?,
        user: DEFAULT_USER.to_owned(),
        authorizer,
    })
}
