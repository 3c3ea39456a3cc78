//! The session of a conversation a chat UI protocol names with an id of its own (the AI SDK's
//! chat `id`, AG-UI's `threadId`): the same id names the same session in both protocols.

use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The session of conversation `id`: the id itself when it is a UUID, else one derived from it
/// (the same for every user: an id names one conversation, whose owner alone may use it).
pub fn session_of(id: &str) -> Uuid {
    if let Ok(uuid) = Uuid::parse_str(id) {
        return uuid;
    }
    derived("agentloop-chat", id)
}

/// A UUID derived from `id` in `namespace`: a version 8 (custom) UUID, RFC 9562 variant.
pub fn derived(namespace: &str, id: &str) -> Uuid {
    let digest = Sha256::digest(format!("{namespace}:{id}").as_bytes());
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    Uuid::from_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uuid_is_its_own_session_and_other_ids_derive_one() {
        let uuid = Uuid::now_v7();
        assert_eq!(session_of(&uuid.to_string()), uuid);
        assert_eq!(session_of("abc"), session_of("abc"));
        assert_ne!(session_of("abc"), session_of("abd"));
        assert_eq!(session_of("abc").get_version_num(), 8);
        assert_ne!(derived("other", "abc"), session_of("abc"));
    }
}
