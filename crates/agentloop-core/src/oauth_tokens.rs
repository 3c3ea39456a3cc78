//! Where the OAuth tokens of MCP servers are kept between runs: one sealed record per server
//! and user. The store sees only what the MCP crate sealed (encrypted with a key the store
//! never holds), so a copy of the database gives nobody a token.

use async_trait::async_trait;

use crate::StoreError;

/// Sealed OAuth records of MCP servers, by server name and user.
#[async_trait]
pub trait OAuthTokenStore: Send + Sync {
    /// The sealed record of `user` for `server`; `None` when there is none.
    async fn load_oauth_tokens(
        &self,
        server: &str,
        user: &str,
    ) -> Result<Option<String>, StoreError>;

    /// Puts `sealed` in place of whatever `user` had for `server`.
    async fn save_oauth_tokens(
        &self,
        server: &str,
        user: &str,
        sealed: &str,
    ) -> Result<(), StoreError>;

    /// Forgets `user`'s record for `server`; whether there was one.
    async fn delete_oauth_tokens(&self, server: &str, user: &str) -> Result<bool, StoreError>;
}
