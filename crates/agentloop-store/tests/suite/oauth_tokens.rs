use agentloop_core::OAuthTokenStore;

use super::Fixture;

/// Sealed OAuth records are kept per server and user, replaced, and forgotten.
pub async fn oauth_records_are_kept_per_server_and_user(fixture: &Fixture) {
    let store = &fixture.store;
    assert_eq!(
        store.load_oauth_tokens("github", "ana").await.unwrap(),
        None
    );
    store
        .save_oauth_tokens("github", "ana", "v1:first")
        .await
        .unwrap();
    store
        .save_oauth_tokens("github", "bob", "v1:bob's")
        .await
        .unwrap();
    store
        .save_oauth_tokens("gitlab", "ana", "v1:other server")
        .await
        .unwrap();
    store
        .save_oauth_tokens("github", "ana", "v1:second")
        .await
        .unwrap();
    assert_eq!(
        store
            .load_oauth_tokens("github", "ana")
            .await
            .unwrap()
            .as_deref(),
        Some("v1:second")
    );
    assert_eq!(
        store
            .load_oauth_tokens("github", "bob")
            .await
            .unwrap()
            .as_deref(),
        Some("v1:bob's")
    );
    assert!(store.delete_oauth_tokens("github", "ana").await.unwrap());
    assert!(!store.delete_oauth_tokens("github", "ana").await.unwrap());
    assert_eq!(
        store.load_oauth_tokens("github", "ana").await.unwrap(),
        None
    );
    assert_eq!(
        store
            .load_oauth_tokens("gitlab", "ana")
            .await
            .unwrap()
            .as_deref(),
        Some("v1:other server")
    );
    assert_eq!(
        fixture.count("SELECT COUNT(*) FROM mcp_oauth_tokens").await,
        2
    );
}
