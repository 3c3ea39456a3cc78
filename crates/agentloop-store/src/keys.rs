//! API keys of the HTTP server: made here, shown once to whoever creates them, and kept only as
//! a hash.

use crate::sql::Row;
use agentloop_core::{ApiKeyInfo, NewApiKey, StoreError};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use crate::columns::{millis, now};
use crate::db::Db;
use crate::sessions::add_user;

/// Keys read `al_` and 64 lowercase hex digits; the marker lets secret scanners and people tell
/// an agentloop key from other tokens.
const KEY_MARKER: &str = "al_";
const KEY_HEX_DIGITS: usize = 64;
const ID_MARKER: &str = "key_";
const ID_HEX_DIGITS: usize = 12;
/// The marker and 8 hex digits: enough for a person to recognise a key, far too little to guess
/// the rest.
const SHOWN_PREFIX_LEN: usize = KEY_MARKER.len() + 8;

const SELECT_KEY: &str = "SELECT id, user_id, prefix, created_at, revoked_at FROM api_keys";

pub(crate) async fn create(db: &Db, user_id: &str) -> Result<NewApiKey, StoreError> {
    let secret = new_secret();
    let info = ApiKeyInfo {
        id: new_id(),
        user_id: user_id.to_owned(),
        prefix: secret.chars().take(SHOWN_PREFIX_LEN).collect(),
        created_at: now(),
        revoked_at: None,
    };
    let mut tx = db.begin().await?;
    add_user(db, &mut tx, user_id, info.created_at).await?;
    db.query(
        "INSERT INTO api_keys (id, user_id, key_hash, prefix, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(info.id.as_str())
    .bind(db.text(user_id))
    .bind(hash(&secret))
    .bind(info.prefix.as_str())
    .bind(millis(info.created_at))
    .execute(&mut tx)
    .await?;
    tx.commit().await?;
    Ok(NewApiKey { info, secret })
}

/// The lookup is by hash through a unique index, so how long it takes says nothing about how
/// close a guess came: no constant-time comparison is needed.
pub(crate) async fn authenticate(db: &Db, secret: &str) -> Result<Option<String>, StoreError> {
    if !is_secret(secret) {
        return Ok(None);
    }
    let row = db
        .query("SELECT user_id FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL")
        .bind(hash(secret))
        .fetch_optional(db)
        .await?;
    row.map(|row| db.cells(&row, "api_keys").free_text("user_id"))
        .transpose()
}

pub(crate) async fn revoke(db: &Db, id_or_secret: &str) -> Result<Option<ApiKeyInfo>, StoreError> {
    let (column, value) = if is_id(id_or_secret) {
        ("id", id_or_secret.to_owned())
    } else if is_secret(id_or_secret) {
        ("key_hash", hash(id_or_secret))
    } else {
        return Ok(None);
    };
    let row = db
        .query(&format!(
            "UPDATE api_keys SET revoked_at = $2 WHERE {column} = $1 AND revoked_at IS NULL \
             RETURNING id, user_id, prefix, created_at, revoked_at"
        ))
        .bind(value)
        .bind(millis(now()))
        .fetch_optional(db)
        .await?;
    row.as_ref().map(|row| key_info(db, row)).transpose()
}

pub(crate) async fn list(db: &Db, user_id: Option<&str>) -> Result<Vec<ApiKeyInfo>, StoreError> {
    // The id breaks ties between keys created in the same millisecond, so the order is stable.
    let order = "ORDER BY created_at DESC, id DESC";
    let query = match user_id {
        Some(user_id) => db
            .query(&format!("{SELECT_KEY} WHERE user_id = $1 {order}"))
            .bind(db.text(user_id)),
        None => db.query(&format!("{SELECT_KEY} {order}")),
    };
    let rows = query.fetch_all(db).await?;
    rows.iter().map(|row| key_info(db, row)).collect()
}

fn key_info(db: &Db, row: &Row) -> Result<ApiKeyInfo, StoreError> {
    let cells = db.cells(row, "api_keys");
    Ok(ApiKeyInfo {
        id: cells.text("id")?,
        user_id: cells.free_text("user_id")?,
        prefix: cells.text("prefix")?,
        created_at: cells.time("created_at")?,
        revoked_at: cells.optional_time("revoked_at")?,
    })
}

/// Two v4 UUIDs give 244 random bits (each fixes 6 of its 128), from the operating system's
/// generator.
fn new_secret() -> String {
    format!(
        "{KEY_MARKER}{}{}",
        Uuid::new_v4().simple(),
        Uuid::new_v4().simple()
    )
}

/// The first 12 hex digits of a v4 UUID are all random (its version digit is the 13th).
fn new_id() -> String {
    let mut random = Uuid::new_v4().simple().to_string();
    random.truncate(ID_HEX_DIGITS);
    format!("{ID_MARKER}{random}")
}

/// SHA-256 rather than a password hash (argon2, bcrypt): a key carries 244 random bits, so there
/// is no dictionary to slow down, and every request of the server pays for this hash.
fn hash(secret: &str) -> String {
    lower_hex(&Sha256::digest(secret.as_bytes()))
}

pub(crate) fn lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut hex = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

fn is_secret(text: &str) -> bool {
    marked_hex(text, KEY_MARKER, KEY_HEX_DIGITS)
}

fn is_id(text: &str) -> bool {
    marked_hex(text, ID_MARKER, ID_HEX_DIGITS)
}

fn marked_hex(text: &str, marker: &str, digits: usize) -> bool {
    text.strip_prefix(marker).is_some_and(|hex| {
        hex.len() == digits && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_secrets_and_ids_have_the_documented_shape() {
        let secret = new_secret();
        assert!(is_secret(&secret), "{secret}");
        assert_eq!(secret.len(), 67);
        let id = new_id();
        assert!(is_id(&id), "{id}");
        assert_ne!(new_secret(), secret);
        assert_ne!(new_id(), id);
    }

    #[test]
    fn only_well_formed_keys_and_ids_are_recognised() {
        let hex64 = "0123456789abcdef".repeat(4);
        assert!(is_secret(&format!("al_{hex64}")));
        assert!(!is_secret(&format!("al_{}", hex64.to_uppercase())));
        assert!(!is_secret(&format!("al_{hex64}0")));
        assert!(!is_secret(&format!("al_{}", &hex64[1..])));
        assert!(!is_secret(&format!("xx_{hex64}")));
        assert!(!is_secret(&format!(" al_{hex64}")));
        assert!(!is_secret(""));
        assert!(is_id("key_0123456789ab"));
        assert!(!is_id("key_0123456789a"));
        assert!(!is_id("key_0123456789ag"));
        assert!(!is_id("0123456789abcdef"));
        // Multi-byte characters must not be mistaken for hex digits, nor panic a slice.
        assert!(!is_id("key_0123456789é"));
    }

    #[test]
    fn the_hash_is_lowercase_hex_sha256() {
        assert_eq!(
            hash("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(lower_hex(&[0x00, 0x0f, 0xa5, 0xff]), "000fa5ff");
    }
}
