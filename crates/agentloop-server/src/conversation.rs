//! The session of a conversation a chat UI protocol names with an id of its own (the AI SDK's
//! chat `id`, AG-UI's `threadId`): the same id names the same session in both protocols. A
//! text id is the user's own: two users who name a conversation alike have two sessions, and
//! one cannot take or detect the other's.

use agentloop_core::{Store, StoreError, protocol::SessionInfo};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The session of conversation `id` of `user`: the id itself when it is a UUID (a session of
/// any user, whose owner alone may use it), else one derived from the user and the id.
pub fn session_of(user: &str, id: &str) -> Uuid {
    if let Ok(uuid) = Uuid::parse_str(id) {
        return uuid;
    }
    derived("agentloop-chat", user, id)
}

/// The session of conversation `id` of `user`, and the session when it exists. A text id's
/// session made before ids were the user's own (derived from the id alone) is still found,
/// when it is the user's.
pub async fn find(
    store: &dyn Store,
    user: &str,
    id: &str,
) -> Result<(Uuid, Option<SessionInfo>), StoreError> {
    let session_id = session_of(user, id);
    let session = store.session(session_id).await?;
    if session.is_some() || Uuid::parse_str(id).is_ok() {
        return Ok((session_id, session));
    }
    let earlier = unscoped("agentloop-chat", id);
    match store.session(earlier).await? {
        Some(session) if session.user_id == user => Ok((earlier, Some(session))),
        _ => Ok((session_id, None)),
    }
}

/// A UUID derived from `user`'s `id` in `namespace`: a version 8 (custom) UUID, RFC 9562
/// variant. The user's name is counted, so no other user and id give the same text.
pub fn derived(namespace: &str, user: &str, id: &str) -> Uuid {
    uuid_of(&format!("{namespace}:{}:{user}:{id}", user.len()))
}

/// The derivation of before (the id alone), for sessions made then.
fn unscoped(namespace: &str, id: &str) -> Uuid {
    uuid_of(&format!("{namespace}:{id}"))
}

fn uuid_of(text: &str) -> Uuid {
    let digest = Sha256::digest(text.as_bytes());
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
    fn a_uuid_is_its_own_session_and_other_ids_derive_one_per_user() {
        let uuid = Uuid::now_v7();
        assert_eq!(session_of("ann", &uuid.to_string()), uuid);
        assert_eq!(session_of("bob", &uuid.to_string()), uuid);
        assert_eq!(session_of("ann", "abc"), session_of("ann", "abc"));
        assert_ne!(session_of("ann", "abc"), session_of("ann", "abd"));
        assert_ne!(session_of("ann", "abc"), session_of("bob", "abc"));
        // The user's name is counted: "a" with "b:c" is not "a:b" with "c".
        assert_ne!(session_of("a", "b:c"), session_of("a:b", "c"));
        assert_eq!(session_of("ann", "abc").get_version_num(), 8);
        assert_ne!(derived("other", "ann", "abc"), session_of("ann", "abc"));
        assert_ne!(unscoped("agentloop-chat", "abc"), session_of("ann", "abc"));
    }
}
