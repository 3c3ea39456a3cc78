//! The OAuth record of one server and user (rmcp's credentials, and the client's secret and
//! redirect URI, which rmcp does not keep) as rmcp's `CredentialStore`: in memory for the
//! process, and sealed in agentloop's store when there is one. Without a key nothing is kept
//! in the store: saving fails, saying what to set.

use std::sync::Arc;

use agentloop_core::OAuthTokenStore;
use async_trait::async_trait;
use rmcp::transport::{
    AuthError,
    auth::{CredentialStore, StoredCredentials},
};
use serde::{Deserialize, Serialize};
use tokio::sync::RwLock;

use super::{OAuthContext, OAuthError, TOKEN_KEY_ENV, TokenKey};

/// What is kept of one authorization.
#[derive(Clone, Serialize, Deserialize)]
pub(crate) struct Record {
    pub(crate) credentials: StoredCredentials,
    /// The secret of a client agentloop registered itself (rmcp's credentials hold only its
    /// ID): a confidential client needs it to refresh.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) client_secret: Option<String>,
    /// The redirect URI the client was registered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) redirect_uri: Option<String>,
}

/// The record of one server and user.
#[derive(Clone)]
pub(crate) struct Vault {
    inner: Arc<Inner>,
}

struct Inner {
    server: String,
    user: String,
    tokens: Option<Arc<dyn OAuthTokenStore>>,
    key: Option<TokenKey>,
    /// `None` until read from the store once: every request asks for the token, and a server
    /// without OAuth must not cost a query each time.
    record: RwLock<Option<Option<Record>>>,
    /// Set while an authorization registers its client, saved with the tokens.
    client: RwLock<(Option<String>, Option<String>)>,
}

impl Vault {
    pub(crate) fn new(server: &str, context: &OAuthContext) -> Vault {
        Vault {
            inner: Arc::new(Inner {
                server: server.to_owned(),
                user: context.user.clone(),
                tokens: context.tokens.clone(),
                key: context.key.clone(),
                record: RwLock::new(None),
                client: RwLock::new((None, None)),
            }),
        }
    }

    /// Whether tokens obtained now could be kept: refused before a person approves anything.
    pub(crate) fn check_keepable(&self) -> Result<(), OAuthError> {
        if self.inner.tokens.is_some() && self.inner.key.is_none() {
            return Err(OAuthError::NoKey {
                server: self.inner.server.clone(),
            });
        }
        Ok(())
    }

    /// The secret and redirect URI of the client the next saved tokens belong to.
    pub(crate) async fn set_client(&self, secret: Option<String>, redirect_uri: Option<String>) {
        *self.inner.client.write().await = (secret, redirect_uri);
    }

    /// The record, from memory or else from the store (unsealed). A record that does not open
    /// (the key changed) is as good as none: the person authorizes again.
    pub(crate) async fn record(&self) -> Result<Option<Record>, OAuthError> {
        if let Some(record) = self.inner.record.read().await.clone() {
            return Ok(record);
        }
        let (Some(tokens), Some(key)) = (&self.inner.tokens, &self.inner.key) else {
            *self.inner.record.write().await = Some(None);
            return Ok(None);
        };
        let Some(sealed) = tokens
            .load_oauth_tokens(&self.inner.server, &self.inner.user)
            .await?
        else {
            *self.inner.record.write().await = Some(None);
            return Ok(None);
        };
        let record = key
            .open(&self.inner.server, &self.inner.user, &sealed)
            .ok()
            .and_then(|plain| serde_json::from_slice::<Record>(&plain).ok());
        if record.is_none() {
            tracing::warn!(
                server = %self.inner.server,
                "the stored OAuth record does not open with {TOKEN_KEY_ENV}: authorize again"
            );
        }
        if let Some(record) = &record {
            *self.inner.client.write().await =
                (record.client_secret.clone(), record.redirect_uri.clone());
        }
        *self.inner.record.write().await = Some(record.clone());
        Ok(record)
    }

    async fn keep(&self, record: Option<Record>) -> Result<(), AuthError> {
        *self.inner.record.write().await = Some(record.clone());
        let Some(tokens) = &self.inner.tokens else {
            return Ok(());
        };
        let (server, user) = (&self.inner.server, &self.inner.user);
        let Some(record) = record else {
            return tokens
                .delete_oauth_tokens(server, user)
                .await
                .map(drop)
                .map_err(|error| AuthError::CredentialStoreError(error.to_string()));
        };
        let Some(key) = &self.inner.key else {
            return Err(AuthError::CredentialStoreError(
                OAuthError::NoKey {
                    server: server.clone(),
                }
                .to_string(),
            ));
        };
        let plain = serde_json::to_vec(&record)
            .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?;
        let sealed = key
            .seal(server, user, &plain)
            .map_err(|error| AuthError::CredentialStoreError(error.to_string()))?;
        tokens
            .save_oauth_tokens(server, user, &sealed)
            .await
            .map_err(|error| AuthError::CredentialStoreError(error.to_string()))
    }
}

#[async_trait]
impl CredentialStore for Vault {
    async fn load(&self) -> Result<Option<StoredCredentials>, AuthError> {
        match self.record().await {
            Ok(record) => Ok(record.map(|record| record.credentials)),
            Err(error) => Err(AuthError::CredentialStoreError(error.to_string())),
        }
    }

    async fn save(&self, credentials: StoredCredentials) -> Result<(), AuthError> {
        let (client_secret, redirect_uri) = self.inner.client.read().await.clone();
        self.keep(Some(Record {
            credentials,
            client_secret,
            redirect_uri,
        }))
        .await
    }

    async fn clear(&self) -> Result<(), AuthError> {
        self.keep(None).await
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::{collections::HashMap, sync::Mutex};

    use agentloop_core::StoreError;

    use super::*;
    use crate::oauth::NoAuthorizer;

    #[derive(Default)]
    struct Rows(Mutex<HashMap<(String, String), String>>);

    #[async_trait]
    impl OAuthTokenStore for Rows {
        async fn load_oauth_tokens(&self, s: &str, u: &str) -> Result<Option<String>, StoreError> {
            Ok(self.0.lock().unwrap().get(&(s.into(), u.into())).cloned())
        }
        async fn save_oauth_tokens(&self, s: &str, u: &str, v: &str) -> Result<(), StoreError> {
            self.0
                .lock()
                .unwrap()
                .insert((s.into(), u.into()), v.into());
            Ok(())
        }
        async fn delete_oauth_tokens(&self, s: &str, u: &str) -> Result<bool, StoreError> {
            Ok(self
                .0
                .lock()
                .unwrap()
                .remove(&(s.into(), u.into()))
                .is_some())
        }
    }

    fn context(rows: &Arc<Rows>, key: Option<TokenKey>) -> OAuthContext {
        OAuthContext {
            tokens: Some(rows.clone() as Arc<dyn OAuthTokenStore>),
            key,
            user: "ana".into(),
            authorizer: Arc::new(NoAuthorizer),
        }
    }

    fn credentials() -> StoredCredentials {
        StoredCredentials::new("client-1".into(), None, vec!["mcp".into()], Some(1))
    }

    #[tokio::test]
    async fn records_are_sealed_in_the_store_and_read_back_by_a_new_process() {
        let rows = Arc::new(Rows::default());
        let key = TokenKey::parse(&"ab".repeat(32)).unwrap();
        let vault = Vault::new("github", &context(&rows, Some(key.clone())));
        vault.set_client(Some("client-secret-1".into()), None).await;
        vault.save(credentials()).await.unwrap();
        let stored = rows.0.lock().unwrap().values().next().cloned().unwrap();
        assert!(!stored.contains("client-secret-1") && !stored.contains("client-1"));

        let again = Vault::new("github", &context(&rows, Some(key)));
        let record = again.record().await.unwrap().unwrap();
        assert_eq!(record.credentials.client_id, "client-1");
        assert_eq!(record.client_secret.as_deref(), Some("client-secret-1"));

        again.clear().await.unwrap();
        assert!(rows.0.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_missing_record_is_looked_for_once() {
        let rows = Arc::new(Rows::default());
        let key = TokenKey::parse(&"ab".repeat(32)).unwrap();
        let vault = Vault::new("github", &context(&rows, Some(key)));
        assert!(vault.load().await.unwrap().is_none());
        // Written behind the vault's back: it is not asked again.
        rows.0
            .lock()
            .unwrap()
            .insert(("github".into(), "ana".into()), "v1:x".into());
        assert!(vault.load().await.unwrap().is_none());
    }

    #[tokio::test]
    async fn without_a_key_nothing_is_stored_and_the_error_says_what_to_set() {
        let rows = Arc::new(Rows::default());
        let vault = Vault::new("github", &context(&rows, None));
        let error = vault.check_keepable().unwrap_err().to_string();
        assert!(error.contains(TOKEN_KEY_ENV), "{error}");
        let error = vault.save(credentials()).await.unwrap_err().to_string();
        assert!(error.contains(TOKEN_KEY_ENV), "{error}");
        assert!(rows.0.lock().unwrap().is_empty());
    }
}
