//! Attachments are stored once by SHA-256: a message keeps their references, the bytes go to
//! `attachments` once whatever the number of messages that carry them, and what goes to the
//! model (the history) has its bytes back, while listings carry the references only.

use std::sync::Arc;

use agentloop_core::Store;
use agentloop_core::protocol::Attachment;

use super::Fixture;
use super::data::*;

/// The smallest PNG (1×1), as `attachments::admit_bytes` would admit it.
fn png(name: &str) -> Attachment {
    const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];
    Attachment {
        media_type: "image/png".into(),
        name: Some(name.into()),
        size: PNG.len() as u64,
        sha256: Some(agentloop_core::attachments::sha256_hex(PNG)),
        url: None,
        data: Some(Arc::from(PNG)),
    }
}

pub async fn an_attachment_is_stored_once_and_read_back_for_the_model(fixture: &Fixture) {
    let store = &fixture.store;
    let image = png("dot.png");
    let hash = image.sha256.clone().unwrap();
    let mut runs = Vec::new();
    // The same image in two messages of one session, and in a message of another session.
    for user in ["alice", "bob"] {
        let session_id = session(fixture, user).await;
        let run_id = run(fixture, session_id).await;
        let mut first = question(session_id, run_id, "what is this?");
        first.message.attachments = vec![image.clone()];
        let mut again = question(session_id, run_id, "and this?");
        again.message.attachments = vec![png("copy.png")];
        let url = Attachment {
            media_type: "application/pdf".into(),
            name: None,
            size: 0,
            sha256: None,
            url: Some("https://example.com/a.pdf".into()),
            data: None,
        };
        again.message.attachments.push(url);
        save_messages(fixture, run_id, session_id, &[first, again]).await;
        runs.push(session_id);
    }
    assert_eq!(fixture.count("SELECT COUNT(*) FROM attachments").await, 1);
    let refs = fixture
        .text("SELECT attachments FROM messages ORDER BY position LIMIT 1")
        .await;
    assert!(refs.contains(&hash) && !refs.contains("data"), "{refs}");

    // Listings: references without bytes.
    let listed = store.messages(runs[0]).await.unwrap();
    assert_eq!(listed[0].message.attachments[0].data, None);
    assert_eq!(
        listed[0].message.attachments[0].sha256.as_deref(),
        Some(hash.as_str())
    );
    assert_eq!(
        listed[1].message.attachments[0].name.as_deref(),
        Some("copy.png")
    );
    // What the model reads: the bytes, from the one row.
    let history = store.history(runs[1], 10).await.unwrap();
    assert_eq!(history[0].message.attachments, vec![image.clone()]);
    assert_eq!(history[0].message.attachments[0].data, image.data);
    let url = &history[1].message.attachments[1];
    assert_eq!(url.url.as_deref(), Some("https://example.com/a.pdf"));
    assert_eq!(url.data, None);
    let (media_type, bytes) = store.attachment(&hash).await.unwrap().unwrap();
    assert_eq!(media_type, "image/png");
    assert_eq!(Some(bytes.as_slice()), image.data.as_deref());
    assert_eq!(store.attachment(&"0".repeat(64)).await.unwrap(), None);
}
