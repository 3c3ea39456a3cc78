//! Large tool outputs, stored once per run.
//!
//! A tool's output reaches the store twice in the same run: as the content of its tool message
//! (what the conversation holds) and as the `result` of its execution record (the full account
//! of the call). A text of [`SHARED_FROM_BYTES`] or more is written once into `tool_outputs`,
//! named by its SHA-256, and both rows name it instead of holding it. The two may arrive in
//! different steps (a call of a parallel batch is recorded when it ends, its message when the
//! whole batch has), and in either order: naming by content needs no coordination between them,
//! and a text already stored is not sent again. The message reads the text back through a join
//! on the primary key, so `history()` stays one query.
//!
//! Smaller texts stay in their rows: a shared row costs more than it saves below about 1 KiB.

use std::borrow::Cow;
use std::collections::BTreeMap;

use agentloop_core::StoreError;
use sha2::{Digest, Sha256};

use crate::db::{Db, Tx};
use crate::keys::lower_hex;

/// Texts at least this long (in UTF-8 bytes) are stored in `tool_outputs`.
pub(crate) const SHARED_FROM_BYTES: usize = 1024;

/// How a text is kept by the row that carries it.
pub(crate) enum Stored<'t> {
    /// In the row's own column (as `Db::text` encodes it).
    Inline(Cow<'t, str>),
    /// In `tool_outputs`, under this hash.
    Shared(String),
}

/// The large texts of one step, each once, as the database stores them.
#[derive(Default)]
pub(crate) struct SharedOutputs<'t> {
    by_hash: BTreeMap<String, Cow<'t, str>>,
}

impl<'t> SharedOutputs<'t> {
    /// Where `text` goes: its own row when small, else `tool_outputs` (added here once).
    pub(crate) fn keep(&mut self, db: &Db, text: &'t str) -> Stored<'t> {
        if text.len() < SHARED_FROM_BYTES {
            return Stored::Inline(db.text(text));
        }
        let hash = hash(text);
        self.by_hash
            .entry(hash.clone())
            .or_insert_with(|| db.text(text));
        Stored::Shared(hash)
    }

    /// Whether the step keeps no text apart (a step as one statement on PostgreSQL).
    #[cfg(feature = "postgres")]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_hash.is_empty()
    }

    /// Writes the texts the run does not hold yet; one it holds is not sent again.
    pub(crate) async fn insert(
        &self,
        db: &Db,
        tx: &mut Tx<'_>,
        run_id: &str,
    ) -> Result<(), StoreError> {
        for (hash, text) in &self.by_hash {
            let held = db
                .query("SELECT 1 FROM tool_outputs WHERE run_id = $1 AND hash = $2")
                .bind(run_id)
                .bind(hash.as_str())
                .fetch_optional(&mut *tx)
                .await?;
            if held.is_some() {
                continue;
            }
            db.query(
                "INSERT INTO tool_outputs (run_id, hash, text) VALUES ($1, $2, $3) \
                 ON CONFLICT (run_id, hash) DO NOTHING",
            )
            .bind(run_id)
            .bind(hash.as_str())
            .bind(text.as_ref())
            .execute(&mut *tx)
            .await?;
        }
        Ok(())
    }
}

/// The name of a text in `tool_outputs`: SHA-256 of its UTF-8 bytes, lowercase hex.
fn hash(text: &str) -> String {
    lower_hex(&Sha256::digest(text.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_texts_have_one_name_and_different_ones_two() {
        let a = "x".repeat(SHARED_FROM_BYTES);
        let mut b = a.clone();
        b.push('y');
        assert_eq!(hash(&a), hash(&a.clone()));
        assert_ne!(hash(&a), hash(&b));
        assert_eq!(hash(&a).len(), 64);
    }
}
