//! `agentloop keys create|revoke|list` as an operator meets them: a real process, a SQLite file
//! in a temporary directory, and the store opened beside it to check what the server would see.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, stderr, stdout};

use std::path::Path;

use agentloop::{KeyStore, SqlStore};
use serde_json::Value;

/// The store the commands use: `agentloop.db` in `dir`, the default without a config file.
async fn store(dir: &Path) -> SqlStore {
    let url = format!("sqlite://{}", dir.join("agentloop.db").display());
    SqlStore::connect(&url).await.unwrap()
}

fn is_key(line: &str) -> bool {
    line.strip_prefix("al_").is_some_and(|hex| {
        hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// Creates a key for `user`; returns the key and its id.
async fn create(dir: &Path, user: &str) -> (String, String) {
    let output = agentloop(dir, &["keys", "create", "--user", user]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let key = stdout(&output).trim_end_matches('\n').to_string();
    let notice = stderr(&output);
    let id = notice
        .split_whitespace()
        .find(|word| word.starts_with("key_"))
        .unwrap_or_else(|| panic!("no key id in {notice}"))
        .to_string();
    (key, id)
}

#[tokio::test]
async fn create_prints_the_key_alone_and_it_authenticates() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(dir.path(), &["keys", "create", "--user", "alice"]).await;
    assert!(output.status.success(), "{}", stderr(&output));

    let printed = stdout(&output);
    let lines: Vec<&str> = printed.lines().collect();
    assert_eq!(lines.len(), 1, "{printed}");
    assert!(is_key(lines[0]), "{printed}");
    assert!(printed.ends_with('\n'));
    let notice = stderr(&output);
    assert!(
        notice.contains("for user alice") && notice.contains("cannot be shown again"),
        "{notice}"
    );
    assert!(
        !notice.contains(lines[0]),
        "the key is on stderr too: {notice}"
    );

    let store = store(dir.path()).await;
    assert_eq!(
        store.authenticate(lines[0]).await.unwrap().as_deref(),
        Some("alice")
    );
    store.close().await;
}

#[tokio::test]
async fn list_shows_ids_and_prefixes_but_never_the_keys() {
    let dir = tempfile::tempdir().unwrap();
    let (alice_key, alice_id) = create(dir.path(), "alice").await;
    let (bob_key, bob_id) = create(dir.path(), "bob").await;

    let output = agentloop(dir.path(), &["keys", "list"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let table = stdout(&output);
    for (key, id, user) in [(&alice_key, &alice_id, "alice"), (&bob_key, &bob_id, "bob")] {
        let row = table
            .lines()
            .find(|line| line.starts_with(id.as_str()))
            .unwrap_or_else(|| panic!("no row of {id} in {table}"));
        assert!(row.contains(user), "{row}");
        assert!(row.contains(&key[..11]), "{row}");
        assert!(
            row.ends_with('-'),
            "an active key shows no revocation: {row}"
        );
        assert!(!table.contains(&key[11..]), "a key is listed: {table}");
    }

    let output = agentloop(dir.path(), &["keys", "list", "--user", "bob", "--json"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let text = stdout(&output);
    assert!(!text.contains(&bob_key[11..]), "a key is listed: {text}");
    let keys: Value = serde_json::from_str(&text).unwrap();
    let keys = keys.as_array().unwrap();
    assert_eq!(keys.len(), 1, "{text}");
    assert_eq!(keys[0]["id"], bob_id.as_str());
    assert_eq!(keys[0]["user_id"], "bob");
    assert_eq!(keys[0]["prefix"], &bob_key[..11]);
}

#[tokio::test]
async fn a_revoked_key_no_longer_authenticates() {
    let dir = tempfile::tempdir().unwrap();
    let (by_id, id) = create(dir.path(), "alice").await;
    let (by_key, key_id) = create(dir.path(), "alice").await;

    let output = agentloop(dir.path(), &["keys", "revoke", &id]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("revoked {id} (user alice)\n"));

    let output = agentloop(dir.path(), &["keys", "revoke", &by_key]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), format!("revoked {key_id} (user alice)\n"));

    let store = store(dir.path()).await;
    assert_eq!(store.authenticate(&by_id).await.unwrap(), None);
    assert_eq!(store.authenticate(&by_key).await.unwrap(), None);
    store.close().await;

    let output = agentloop(dir.path(), &["keys", "list"]).await;
    let table = stdout(&output);
    let row = table.lines().find(|line| line.starts_with(&id)).unwrap();
    assert!(!row.ends_with('-'), "the revocation is shown: {row}");

    // Revoking again is refused: nothing active matches any more.
    let output = agentloop(dir.path(), &["keys", "revoke", &by_key]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stdout(&output));
    let message = stderr(&output);
    assert!(message.contains("no active key matches"), "{message}");
    assert!(
        !message.contains(&by_key[11..]),
        "the key is echoed: {message}"
    );
}

#[tokio::test]
async fn revoking_an_unknown_key_fails_with_what_to_give() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(dir.path(), &["keys", "revoke", "key_000000000000"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(stdout(&output), "");
    let message = stderr(&output);
    assert!(
        message.contains("no active key matches \"key_000000000000\"")
            && message.contains("agentloop keys list"),
        "{message}"
    );

    let output = agentloop(dir.path(), &["keys", "revoke", "hunter2-secret"]).await;
    assert_eq!(output.status.code(), Some(1));
    let message = stderr(&output);
    assert!(message.contains("key_ and 12 hex digits"), "{message}");
    assert!(!message.contains("hunter2-secret"), "{message}");
}

#[tokio::test]
async fn create_needs_a_user() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["keys", "create"][..],
        &["keys", "create", "--user", ""][..],
    ] {
        let output = agentloop(dir.path(), args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        assert!(stderr(&output).contains("--user"), "{}", stderr(&output));
        assert_eq!(stdout(&output), "");
    }
}

#[tokio::test]
async fn every_keys_command_has_help() {
    let dir = tempfile::tempdir().unwrap();
    for (args, expected) in [
        (&["keys", "--help"][..], "create"),
        (&["keys", "create", "--help"][..], "--user"),
        (&["keys", "revoke", "--help"][..], "key_"),
        (&["keys", "list", "--help"][..], "--json"),
    ] {
        let output = agentloop(dir.path(), args).await;
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let help = stdout(&output);
        assert!(help.contains(expected), "{args:?}: {help}");
        assert!(help.contains("--config"), "{args:?}: {help}");
    }
    assert!(
        !dir.path().join("agentloop.db").exists(),
        "--help opened the store"
    );
}

#[tokio::test]
async fn keys_use_the_store_of_the_config_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("conf")).unwrap();
    let config = dir.path().join("conf").join("server.toml");
    std::fs::write(&config, "[store]\nurl = \"sqlite://keys.db\"\n").unwrap();
    let config = config.display().to_string();

    let output = agentloop(
        dir.path(),
        &["keys", "create", "--user", "alice", "--config", &config],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let key = stdout(&output).trim_end().to_string();

    // A relative SQLite path lives next to the config file.
    let path = dir.path().join("conf").join("keys.db");
    let store = SqlStore::connect(&format!("sqlite://{}", path.display()))
        .await
        .unwrap();
    assert_eq!(
        store.authenticate(&key).await.unwrap().as_deref(),
        Some("alice")
    );
    store.close().await;
    assert!(!dir.path().join("agentloop.db").exists());
}
