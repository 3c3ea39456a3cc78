use agentloop_core::{ApiKeyInfo, KeyStore, NewApiKey, Store, StoreError};
use agentloop_store::SqlStore;

use super::Fixture;
use super::data::*;

async fn new_key(fixture: &Fixture, user_id: &str) -> NewApiKey {
    fixture.store.create_api_key(user_id).await.unwrap()
}

async fn user_of(fixture: &Fixture, secret: &str) -> Option<String> {
    fixture.store.authenticate(secret).await.unwrap()
}

fn ids(keys: &[ApiKeyInfo]) -> Vec<&str> {
    keys.iter().map(|key| key.id.as_str()).collect()
}

fn is_lower_hex(text: &str, digits: usize) -> bool {
    text.len() == digits && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

pub async fn an_api_key_authenticates_its_user(fixture: &Fixture) {
    session(fixture, "alice").await;
    let key = new_key(fixture, "alice").await;

    let secret = key
        .secret
        .strip_prefix("al_")
        .unwrap_or_else(|| panic!("{}", key.secret));
    assert!(is_lower_hex(secret, 64), "{}", key.secret);
    let id = key
        .info
        .id
        .strip_prefix("key_")
        .unwrap_or_else(|| panic!("{}", key.info.id));
    assert!(is_lower_hex(id, 12), "{}", key.info.id);
    assert_eq!(key.info.prefix, key.secret[..11]);
    assert_eq!(key.info.user_id, "alice");
    assert_eq!(key.info.revoked_at, None);

    assert_eq!(
        user_of(fixture, &key.secret).await.as_deref(),
        Some("alice")
    );
    let listed = fixture.store.list_api_keys(None).await.unwrap();
    assert_eq!(listed, [key.info]);
    // The user of the session owns the key too: no second row.
    assert_eq!(fixture.count("SELECT COUNT(*) FROM users").await, 1);
}

pub async fn a_key_of_a_new_user_creates_the_user(fixture: &Fixture) {
    let key = new_key(fixture, "bob").await;
    assert_eq!(user_of(fixture, &key.secret).await.as_deref(), Some("bob"));
    assert_eq!(
        fixture
            .count("SELECT COUNT(*) FROM users WHERE id = 'bob'")
            .await,
        1
    );
}

pub async fn the_secret_of_a_key_is_never_stored(fixture: &Fixture) {
    let key = new_key(fixture, "alice").await;
    let random_part = &key.secret["al_".len()..];
    let row = fixture
        .cells(&format!(
            "SELECT * FROM api_keys WHERE id = '{}'",
            key.info.id
        ))
        .await;
    assert!(row.len() >= 6, "{row:?}");
    for cell in &row {
        assert!(!cell.contains(random_part), "the key is stored: {row:?}");
    }
    let stored_hash = fixture
        .text(&format!(
            "SELECT key_hash FROM api_keys WHERE id = '{}'",
            key.info.id
        ))
        .await;
    assert!(is_lower_hex(&stored_hash, 64), "{stored_hash}");
}

pub async fn wrong_malformed_and_revoked_keys_do_not_authenticate(fixture: &Fixture) {
    let key = new_key(fixture, "alice").await;
    let unknown = format!("al_{}", "0".repeat(64));
    let mut one_digit_off = key.secret.clone();
    let last = if one_digit_off.ends_with('0') {
        "1"
    } else {
        "0"
    };
    one_digit_off.replace_range(66.., last);
    let malformed = [
        String::new(),
        "al_".into(),
        key.info.prefix.clone(),
        key.info.id.clone(),
        key.secret.to_uppercase(),
        format!("{} ", key.secret),
        format!("Bearer {}", key.secret),
        format!("{}0", key.secret),
        key.secret.replacen("al_", "sk_", 1),
    ];
    for wrong in [unknown, one_digit_off].iter().chain(&malformed) {
        assert_eq!(user_of(fixture, wrong).await, None, "{wrong:?}");
    }

    assert_eq!(
        user_of(fixture, &key.secret).await.as_deref(),
        Some("alice")
    );
    assert!(
        fixture
            .store
            .revoke_api_key(&key.info.id)
            .await
            .unwrap()
            .is_some()
    );
    assert_eq!(user_of(fixture, &key.secret).await, None);
}

pub async fn a_key_is_revoked_by_id_or_by_itself_once(fixture: &Fixture) {
    let store = &fixture.store;
    let by_id = new_key(fixture, "alice").await;
    let by_secret = new_key(fixture, "alice").await;
    let kept = new_key(fixture, "alice").await;

    let revoked = store.revoke_api_key(&by_id.info.id).await.unwrap().unwrap();
    assert_eq!(revoked.id, by_id.info.id);
    assert!(revoked.revoked_at.is_some());
    assert!(
        store
            .revoke_api_key(&by_id.info.id)
            .await
            .unwrap()
            .is_none()
    );
    assert!(store.revoke_api_key(&by_id.secret).await.unwrap().is_none());

    let revoked = store
        .revoke_api_key(&by_secret.secret)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        revoked.id, by_secret.info.id,
        "revoking by the key names its id"
    );
    assert!(
        store
            .revoke_api_key(&by_secret.secret)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .revoke_api_key(&by_secret.info.id)
            .await
            .unwrap()
            .is_none()
    );

    for unknown in [
        "key_000000000000",
        "",
        "key_",
        "nonsense",
        kept.info.prefix.as_str(),
    ] {
        assert!(
            store.revoke_api_key(unknown).await.unwrap().is_none(),
            "{unknown:?}"
        );
    }
    assert_eq!(
        user_of(fixture, &kept.secret).await.as_deref(),
        Some("alice")
    );

    let listed = store.list_api_keys(None).await.unwrap();
    for key in [&by_id, &by_secret] {
        let info = listed.iter().find(|info| info.id == key.info.id).unwrap();
        let revoked_at = info.revoked_at.unwrap_or_else(|| panic!("{info:?}"));
        assert!(revoked_at >= info.created_at, "{info:?}");
    }
    let kept_info = listed.iter().find(|info| info.id == kept.info.id).unwrap();
    assert_eq!(kept_info.revoked_at, None);
}

pub async fn keys_are_listed_newest_first_and_filtered_by_user(fixture: &Fixture) {
    let oldest = new_key(fixture, "alice").await.info.id;
    let newest = new_key(fixture, "alice").await.info.id;
    let tied_alice = new_key(fixture, "alice").await.info.id;
    let tied_bob = new_key(fixture, "bob").await.info.id;
    // Creation times set by hand: the order must not depend on the clock.
    for (id, seconds) in [
        (&oldest, 0),
        (&newest, 20),
        (&tied_alice, 10),
        (&tied_bob, 10),
    ] {
        fixture
            .execute(&format!(
                "UPDATE api_keys SET created_at = {} WHERE id = '{id}'",
                at(seconds).timestamp_millis()
            ))
            .await;
    }
    let mut tied = [tied_alice.as_str(), tied_bob.as_str()];
    tied.sort_unstable_by(|a, b| b.cmp(a));

    let all = fixture.store.list_api_keys(None).await.unwrap();
    assert_eq!(
        ids(&all),
        [newest.as_str(), tied[0], tied[1], oldest.as_str()]
    );
    assert_eq!(all[0].created_at, at(20));

    let alices = fixture.store.list_api_keys(Some("alice")).await.unwrap();
    assert_eq!(
        ids(&alices),
        [newest.as_str(), tied_alice.as_str(), oldest.as_str()]
    );
    let bobs = fixture.store.list_api_keys(Some("bob")).await.unwrap();
    assert_eq!(ids(&bobs), [tied_bob.as_str()]);
    assert!(
        fixture
            .store
            .list_api_keys(Some("carol"))
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn two_keys_of_one_user_both_work(fixture: &Fixture) {
    let first = new_key(fixture, "alice").await;
    let second = new_key(fixture, "alice").await;
    assert_ne!(first.secret, second.secret);
    assert_ne!(first.info.id, second.info.id);
    assert_eq!(
        user_of(fixture, &first.secret).await.as_deref(),
        Some("alice")
    );
    assert_eq!(
        user_of(fixture, &second.secret).await.as_deref(),
        Some("alice")
    );
    assert_eq!(fixture.count("SELECT COUNT(*) FROM users").await, 1);
}

pub async fn keys_survive_the_deletion_of_their_users_sessions(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let key = new_key(fixture, "alice").await;
    assert!(fixture.store.delete_session(session_id).await.unwrap());
    assert_eq!(
        user_of(fixture, &key.secret).await.as_deref(),
        Some("alice")
    );
    assert_eq!(
        fixture.store.list_api_keys(Some("alice")).await.unwrap(),
        [key.info]
    );
}

pub async fn an_undecodable_key_row_is_a_corrupt_error(fixture: &Fixture) {
    let key = new_key(fixture, "alice").await;
    fixture
        .execute(&format!(
            "UPDATE api_keys SET revoked_at = {} WHERE id = '{}'",
            i64::MAX,
            key.info.id
        ))
        .await;
    match fixture.store.list_api_keys(None).await.unwrap_err() {
        StoreError::Corrupt { message, .. } => {
            assert!(message.contains("api_keys.revoked_at"), "{message}")
        }
        other => panic!("expected a Corrupt error naming api_keys.revoked_at, got {other:?}"),
    }
}

/// A database the first release of agentloop created and used gets the table of keys, and
/// nothing else changes.
pub async fn migrating_a_database_of_the_first_schema_adds_api_keys(fixture: &Fixture) {
    fixture.execute("DROP TABLE api_keys").await;
    fixture
        .execute("DELETE FROM _sqlx_migrations WHERE version = 2")
        .await;
    let session_id = session(fixture, "alice").await;

    let applied = SqlStore::migrate(&fixture.url).await.unwrap();
    assert_eq!(applied, ["2 api keys"]);
    assert!(SqlStore::migrate(&fixture.url).await.unwrap().is_empty());

    let kept = fixture.store.session(session_id).await.unwrap().unwrap();
    assert_eq!(kept.user_id, "alice");
    let key = new_key(fixture, "alice").await;
    assert_eq!(
        user_of(fixture, &key.secret).await.as_deref(),
        Some("alice")
    );
}

/// Strings that are not shaped like a key never reach the database: the answer comes even
/// when the database is gone, while a well-formed key needs it.
pub async fn malformed_keys_are_refused_without_a_query(fixture: &Fixture) {
    let key = new_key(fixture, "alice").await;
    fixture.store.close().await;
    for malformed in ["", "nonsense", "Bearer x", &key.info.prefix] {
        assert_eq!(user_of(fixture, malformed).await, None, "{malformed:?}");
        assert!(
            fixture
                .store
                .revoke_api_key(malformed)
                .await
                .unwrap()
                .is_none()
        );
    }
    let error = fixture.store.authenticate(&key.secret).await.unwrap_err();
    assert!(matches!(error, StoreError::Unavailable { .. }), "{error:?}");
}
