//! The bytes of messages' images and files, stored once by SHA-256 (migration 13).
//!
//! A message row keeps its attachments' references as JSON (`messages.attachments`: media type,
//! name, size, hash or URL; never the bytes, which `Attachment` does not serialize). The bytes
//! go to `attachments`, named by their hash, in the transaction of the step that brings the
//! message: the same image sent twice, in one session or many, is one row. A step does not send
//! bytes the table holds already. What goes to the model (a run's history, the turn of a run
//! restored) has its bytes put back by [`fill`]; listings (`GET /v1/sessions/{id}/messages`)
//! carry the references only.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use agentloop_core::StoreError;
use agentloop_core::protocol::{Attachment, SessionMessage};

use crate::columns::{millis, now};
use crate::db::{Db, Tx};
use crate::execute::On;

/// The bytes a step brings, each once.
#[derive(Default)]
pub(crate) struct StepAttachments<'s> {
    by_hash: BTreeMap<&'s str, &'s Attachment>,
}

impl<'s> StepAttachments<'s> {
    /// Keeps the bytes of `attachments` that are loaded (a reference without bytes is already
    /// stored).
    pub(crate) fn keep(&mut self, attachments: &'s [Attachment]) {
        for attachment in attachments {
            if let (Some(hash), Some(_)) = (&attachment.sha256, &attachment.data) {
                self.by_hash.entry(hash.as_str()).or_insert(attachment);
            }
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Writes the bytes the table does not hold yet.
    pub(crate) async fn insert(&self, db: &Db, tx: &mut Tx<'_>) -> Result<(), StoreError> {
        for (hash, attachment) in &self.by_hash {
            let Some(data) = &attachment.data else {
                continue;
            };
            let held = db
                .query("SELECT 1 FROM attachments WHERE sha256 = $1")
                .bind(*hash)
                .fetch_optional(&mut *tx)
                .await?;
            if held.is_some() {
                continue;
            }
            db.query(
                "INSERT INTO attachments (sha256, media_type, size, data, created_at) \
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (sha256) DO NOTHING",
            )
            .bind(*hash)
            .bind(attachment.media_type.as_str())
            .bind(i64::try_from(data.len()).unwrap_or(i64::MAX))
            .bind(Arc::clone(data))
            .bind(millis(now()))
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    }
}

/// Puts the bytes back into the attachments of `messages` (each hash read once).
pub(crate) async fn fill<'a, 'd: 'a>(
    db: &Db,
    on: impl Into<On<'a, 'd>>,
    messages: &mut [SessionMessage],
) -> Result<(), StoreError> {
    let wanted: BTreeSet<String> = messages
        .iter()
        .flat_map(|message| &message.message.attachments)
        .filter(|attachment| attachment.data.is_none())
        .filter_map(|attachment| attachment.sha256.clone())
        .collect();
    if wanted.is_empty() {
        return Ok(());
    }
    let mut on = on.into();
    let mut loaded = BTreeMap::new();
    for hash in wanted {
        let row = db
            .query("SELECT data FROM attachments WHERE sha256 = $1")
            .bind(hash.as_str())
            .fetch_optional(on.reborrow())
            .await?;
        if let Some(row) = row {
            let data = db.cells(&row, "attachments").blob("data")?;
            loaded.insert(hash, Arc::<[u8]>::from(data));
        }
    }
    for attachment in messages
        .iter_mut()
        .flat_map(|message| &mut message.message.attachments)
    {
        if let Some(hash) = &attachment.sha256
            && attachment.data.is_none()
        {
            attachment.data = loaded.get(hash).cloned();
        }
    }
    Ok(())
}

/// The media type and bytes stored under `sha256`.
pub(crate) async fn one(db: &Db, sha256: &str) -> Result<Option<(String, Vec<u8>)>, StoreError> {
    let row = db
        .query("SELECT media_type, data FROM attachments WHERE sha256 = $1")
        .bind(sha256)
        .fetch_optional(db)
        .await?;
    row.map(|row| {
        let cells = db.cells(&row, "attachments");
        Ok((cells.text("media_type")?, cells.blob("data")?))
    })
    .transpose()
}
