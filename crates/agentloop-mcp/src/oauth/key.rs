//! The key that seals OAuth tokens before they reach the store (`AGENTLOOP_TOKEN_KEY`), and
//! the sealing: XChaCha20-Poly1305 with a random nonce per record, the record's server and user
//! as associated data (a sealed record moved to another row does not open).

use base64::{Engine, engine::general_purpose::STANDARD};
use chacha20poly1305::{
    AeadCore, KeyInit, XChaCha20Poly1305, XNonce,
    aead::{Aead, OsRng, Payload},
};

/// The variable that holds the key.
pub const TOKEN_KEY_ENV: &str = "AGENTLOOP_TOKEN_KEY";

const KEY_BYTES: usize = 32;
const NONCE_BYTES: usize = 24;
/// Marks the format of a sealed record, so that another can follow.
const VERSION: &str = "v1:";

/// A key to seal tokens with: 32 bytes.
#[derive(Clone)]
pub struct TokenKey {
    cipher: XChaCha20Poly1305,
}

/// Why a key cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum TokenKeyError {
    #[error(
        "{TOKEN_KEY_ENV} must be 32 bytes as 64 hex digits or in base64 (for example the output \
         of `openssl rand -hex 32`); it is {0}"
    )]
    Malformed(&'static str),
}

impl TokenKey {
    /// The key in `AGENTLOOP_TOKEN_KEY`; `None` when it is unset or empty.
    pub fn from_env() -> Result<Option<TokenKey>, TokenKeyError> {
        match std::env::var(TOKEN_KEY_ENV) {
            Ok(text) if !text.trim().is_empty() => TokenKey::parse(&text).map(Some),
            Ok(_) | Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(TokenKeyError::Malformed("not text")),
        }
    }

    /// 64 hex digits, or 32 bytes in base64.
    pub fn parse(text: &str) -> Result<TokenKey, TokenKeyError> {
        let text = text.trim();
        let bytes = if text.len() == 2 * KEY_BYTES && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            (0..KEY_BYTES)
                .map(|i| u8::from_str_radix(&text[2 * i..2 * i + 2], 16))
                .collect::<Result<Vec<u8>, _>>()
                .map_err(|_| TokenKeyError::Malformed("not hex"))?
        } else {
            STANDARD
                .decode(text)
                .map_err(|_| TokenKeyError::Malformed("neither 64 hex digits nor base64"))?
        };
        if bytes.len() != KEY_BYTES {
            return Err(TokenKeyError::Malformed("not 32 bytes long"));
        }
        let cipher = XChaCha20Poly1305::new_from_slice(&bytes)
            .map_err(|_| TokenKeyError::Malformed("not 32 bytes long"))?;
        Ok(TokenKey { cipher })
    }

    /// `plain` sealed for the row of `server` and `user`, as text.
    pub(crate) fn seal(&self, server: &str, user: &str, plain: &[u8]) -> Result<String, Sealing> {
        let nonce = XChaCha20Poly1305::generate_nonce(&mut OsRng);
        let aad = associated(server, user);
        let sealed = self
            .cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plain,
                    aad: &aad,
                },
            )
            .map_err(|_| Sealing)?;
        let mut bytes = nonce.to_vec();
        bytes.extend_from_slice(&sealed);
        Ok(format!("{VERSION}{}", STANDARD.encode(bytes)))
    }

    /// What [`TokenKey::seal`] sealed for this row; an error for another key, row or format.
    pub(crate) fn open(&self, server: &str, user: &str, sealed: &str) -> Result<Vec<u8>, Sealing> {
        let encoded = sealed.strip_prefix(VERSION).ok_or(Sealing)?;
        let bytes = STANDARD.decode(encoded).map_err(|_| Sealing)?;
        if bytes.len() < NONCE_BYTES {
            return Err(Sealing);
        }
        let (nonce, sealed) = bytes.split_at(NONCE_BYTES);
        let nonce: [u8; NONCE_BYTES] = nonce.try_into().map_err(|_| Sealing)?;
        let aad = associated(server, user);
        self.cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: sealed,
                    aad: &aad,
                },
            )
            .map_err(|_| Sealing)
    }
}

/// A record did not seal or open (another key, another row, altered): nothing more is known,
/// by design.
#[derive(Debug, thiserror::Error)]
#[error("the sealed OAuth record does not open with this key (another key, or altered)")]
pub(crate) struct Sealing;

fn associated(server: &str, user: &str) -> Vec<u8> {
    // The length keeps ("a", "bc") apart from ("ab", "c").
    let mut aad = server.len().to_be_bytes().to_vec();
    aad.extend_from_slice(server.as_bytes());
    aad.extend_from_slice(user.as_bytes());
    aad
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TokenKey(***)")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const HEX: &str = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f";

    #[test]
    fn a_record_opens_only_with_its_key_and_row() {
        let key = TokenKey::parse(HEX).unwrap();
        let sealed = key.seal("github", "ana", b"secret-token").unwrap();
        assert!(!sealed.contains("secret-token"));
        assert_eq!(key.open("github", "ana", &sealed).unwrap(), b"secret-token");
        assert!(key.open("github", "bob", &sealed).is_err());
        assert!(key.open("gitlab", "ana", &sealed).is_err());
        let other = TokenKey::parse(&STANDARD.encode([7u8; 32])).unwrap();
        assert!(other.open("github", "ana", &sealed).is_err());
        // Two seals of the same text differ (a fresh nonce each).
        assert_ne!(sealed, key.seal("github", "ana", b"secret-token").unwrap());
    }

    #[test]
    fn malformed_keys_are_refused_with_what_to_set() {
        for bad in ["short", &HEX[..62], "zz".repeat(32).as_str()] {
            let error = TokenKey::parse(bad).unwrap_err().to_string();
            assert!(error.contains(TOKEN_KEY_ENV), "{error}");
        }
    }
}
