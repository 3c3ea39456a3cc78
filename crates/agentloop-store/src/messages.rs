//! The messages of sessions, in the order they were written.

use std::borrow::Cow;

use crate::execute::On;
use crate::sql::{Query, Row};
use agentloop_core::StoreError;
use agentloop_core::protocol::{ChatMessage, MessageKind, SessionMessage, ToolCall};
use serde_json::Value;
use uuid::Uuid;

use crate::attachments::StepAttachments;
use crate::batch::{rows_per_statement, values_sql};
use crate::columns::{Cells, json_text, millis, to_json};
use crate::db::Db;
use crate::outputs::{SharedOutputs, Stored};

const COLUMNS: &str = "id, session_id, run_id, kind, role, content, content_hash, tool_calls, \
    tool_call_id, metadata, created_at, attachments";
const WIDTH: usize = 12;

/// The columns of `m` (messages) and the shared text its `content_hash` names, if any.
const SELECT: &str = "SELECT m.id, m.session_id, m.run_id, m.kind, m.role, m.content, \
    m.content_hash, m.tool_calls, m.tool_call_id, m.metadata, m.created_at, \
    m.superseded_by_run, m.attachments, o.text AS shared_content \
    FROM messages m LEFT JOIN tool_outputs o ON o.run_id = m.run_id AND o.hash = m.content_hash";

/// A message as its row holds it, encoded before the transaction opens.
pub(crate) struct MessageRow<'m> {
    id: String,
    session_id: String,
    run_id: Option<String>,
    kind: &'static str,
    role: &'static str,
    content: Option<Cow<'m, str>>,
    /// Set when the content is in `tool_outputs` (and `content` is NULL).
    content_hash: Option<String>,
    tool_calls: Option<String>,
    tool_call_id: Option<Cow<'m, str>>,
    metadata: Option<String>,
    created_at: i64,
    /// The references of its attachments, as JSON (the bytes go to `attachments`).
    attachments: Option<String>,
}

impl<'m> MessageRow<'m> {
    /// The result of a tool call of `run_id` keeps a large content in `shared`; anything else
    /// keeps it in its row. The bytes of its attachments go to `blobs`.
    pub(crate) fn encode(
        db: &Db,
        message: &'m SessionMessage,
        run_id: Uuid,
        shared: &mut SharedOutputs<'m>,
        blobs: &mut StepAttachments<'m>,
    ) -> Result<Self, StoreError> {
        let chat = &message.message;
        blobs.keep(&chat.attachments);
        let attachments = match chat.attachments.is_empty() {
            true => None,
            false => Some(to_json(&chat.attachments, "the attachments of a message")?),
        };
        let shareable = message.kind == MessageKind::ToolResult && message.run_id == Some(run_id);
        let (content, content_hash) = match chat.content.as_deref() {
            Some(content) if shareable => match shared.keep(db, content) {
                Stored::Inline(text) => (Some(text), None),
                Stored::Shared(hash) => (None, Some(hash)),
            },
            content => (db.optional_text(content), None),
        };
        let tool_calls = match chat.tool_calls.is_empty() {
            true => None,
            false => Some(to_json(&chat.tool_calls, "the tool calls of a message")?),
        };
        let metadata = match &message.metadata {
            Value::Null => None,
            metadata => Some(json_text(metadata)),
        };
        Ok(Self {
            id: message.id.to_string(),
            session_id: message.session_id.to_string(),
            run_id: message.run_id.map(|id| id.to_string()),
            kind: message.kind.as_str(),
            role: chat.role.as_str(),
            content,
            content_hash,
            tool_calls,
            tool_call_id: db.optional_text(chat.tool_call_id.as_deref()),
            metadata,
            created_at: millis(message.created_at),
            attachments,
        })
    }
}

/// The statements that insert `rows` in the order given: the autoincremented `position` is the
/// order of the session.
pub(crate) fn insert_queries<'p>(db: &Db, rows: &'p [MessageRow<'p>]) -> Vec<Query<'p>> {
    let head = format!("INSERT INTO messages ({COLUMNS})");
    rows.chunks(rows_per_statement(WIDTH))
        .map(|chunk| {
            let mut query = db.query(&values_sql(&head, WIDTH, chunk.len(), ""));
            for row in chunk {
                query = query
                    .bind(row.id.as_str())
                    .bind(row.session_id.as_str())
                    .bind(row.run_id.as_deref())
                    .bind(row.kind)
                    .bind(row.role)
                    .bind(row.content.as_deref())
                    .bind(row.content_hash.as_deref())
                    .bind(row.tool_calls.as_deref())
                    .bind(row.tool_call_id.as_deref())
                    .bind(row.metadata.as_deref())
                    .bind(row.created_at)
                    .bind(row.attachments.as_deref());
            }
            query
        })
        .collect()
}

/// The messages of a session in order: its current ones, or with `superseded` also those a
/// regenerated answer replaced.
pub(crate) async fn all(
    db: &Db,
    session_id: Uuid,
    superseded: bool,
) -> Result<Vec<SessionMessage>, StoreError> {
    let current = match superseded {
        true => "",
        false => " AND m.superseded_by_run IS NULL",
    };
    let rows = db
        .query(&format!(
            "{SELECT} WHERE m.session_id = $1{current} ORDER BY m.position"
        ))
        .bind(session_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| decode(db, row)).collect()
}

/// One message of a session.
pub(crate) async fn one(
    db: &Db,
    session_id: Uuid,
    id: Uuid,
) -> Result<Option<SessionMessage>, StoreError> {
    let row = db
        .query(&format!("{SELECT} WHERE m.session_id = $1 AND m.id = $2"))
        .bind(session_id.to_string())
        .bind(id.to_string())
        .fetch_optional(db)
        .await?;
    row.as_ref().map(|row| decode(db, row)).transpose()
}

/// The messages a run added to its session, in order.
pub(crate) async fn of_run(
    db: &Db,
    session_id: Uuid,
    run_id: Uuid,
) -> Result<Vec<SessionMessage>, StoreError> {
    let rows = db
        .query(&format!(
            "{SELECT} WHERE m.session_id = $1 AND m.run_id = $2 ORDER BY m.position"
        ))
        .bind(session_id.to_string())
        .bind(run_id.to_string())
        .fetch_all(db)
        .await?;
    rows.iter().map(|row| decode(db, row)).collect()
}

/// From the `dialogue_messages`-th most recent dialogue message on, traces and superseded messages
/// left out; everything but those when the session has fewer dialogue messages than that.
/// With `before_run`, the same as it was before that run's first message.
pub(crate) async fn history<'a, 'd: 'a>(
    db: &Db,
    on: impl Into<On<'a, 'd>>,
    session_id: Uuid,
    dialogue_messages: usize,
    before_run: Option<Uuid>,
) -> Result<Vec<SessionMessage>, StoreError> {
    let Some(skipped) = dialogue_messages.checked_sub(1) else {
        return Ok(Vec::new());
    };
    let trace = MessageKind::Trace.as_str();
    // Answers a guardrail refused (and the notes that sent the model back) stay in the
    // session, never in what a later run reads.
    let blocked = MessageKind::Blocked.as_str();
    let dialogue = MessageKind::Dialogue.as_str();
    let bound = format!(
        "COALESCE((SELECT MIN(position) FROM messages WHERE session_id = $1 AND run_id = $3), \
         {})",
        i64::MAX
    );
    let sql = format!(
        "{SELECT} \
         WHERE m.session_id = $1 AND m.kind NOT IN ('{trace}', '{blocked}') \
             AND m.position < {bound} \
             AND m.superseded_by_run IS NULL \
             AND m.position >= COALESCE(( \
             SELECT position FROM messages WHERE session_id = $1 AND kind = '{dialogue}' \
                 AND superseded_by_run IS NULL AND position < {bound} \
             ORDER BY position DESC LIMIT 1 OFFSET $2), 0) \
         ORDER BY m.position"
    );
    let rows = db
        .query(&sql)
        .bind(session_id.to_string())
        .bind(i64::try_from(skipped).unwrap_or(i64::MAX))
        .bind(before_run.map(|run| run.to_string()))
        .fetch_all(on)
        .await?;
    rows.iter().map(|row| decode(db, row)).collect()
}

fn decode(db: &Db, row: &Row) -> Result<SessionMessage, StoreError> {
    let cells = db.cells(row, "messages");
    let tool_calls: Option<Vec<ToolCall>> = cells.optional_json("tool_calls")?;
    Ok(SessionMessage {
        id: cells.uuid("id")?,
        session_id: cells.uuid("session_id")?,
        run_id: cells.optional_uuid("run_id")?,
        kind: cells.name("kind")?,
        message: ChatMessage {
            role: cells.name("role")?,
            content: content(&cells)?,
            tool_calls: tool_calls.unwrap_or_default(),
            tool_call_id: cells.optional_free_text("tool_call_id")?,
            attachments: cells.optional_json("attachments")?.unwrap_or_default(),
        },
        metadata: cells.optional_json("metadata")?.unwrap_or(Value::Null),
        created_at: cells.time("created_at")?,
        superseded_by_run: cells.optional_uuid("superseded_by_run")?,
    })
}

/// Marks the session's last exchange superseded by `by_run` (a regenerated answer): its current
/// messages from the first one of `from_run` on, or, when `from_run` has none, from the first
/// one of the session's last run that saves its chat (by its row, not its messages: a
/// regenerated run that failed before its question was saved has none, and then nothing more is
/// marked, rather than the exchange before it). The number of messages marked.
pub(crate) async fn supersede<'a, 'd: 'a>(
    db: &Db,
    on: impl Into<On<'a, 'd>>,
    session_id: Uuid,
    from_run: Option<Uuid>,
    by_run: Uuid,
) -> Result<u64, StoreError> {
    let first_of = |run: &str| {
        format!(
            "SELECT MIN(position) FROM messages \
             WHERE session_id = $1 AND superseded_by_run IS NULL AND run_id = {run}"
        )
    };
    let last_run = "(SELECT id FROM runs WHERE session_id = $1 AND save_chat = 1 AND id <> $3 \
        ORDER BY started_at DESC, id DESC LIMIT 1)";
    let sql = format!(
        "UPDATE messages SET superseded_by_run = $3 \
         WHERE session_id = $1 AND superseded_by_run IS NULL \
             AND position >= COALESCE(({}), ({}))",
        first_of("$2"),
        first_of(last_run),
    );
    db.query(&sql)
        .bind(session_id.to_string())
        .bind(from_run.map(|run| run.to_string()))
        .bind(by_run.to_string())
        .execute(on)
        .await
}

/// The content in the row, or the shared text its `content_hash` names.
fn content(cells: &Cells<'_>) -> Result<Option<String>, StoreError> {
    if cells.optional_text("content_hash")?.is_none() {
        return cells.optional_free_text("content");
    }
    match cells.optional_free_text("shared_content")? {
        Some(text) => Ok(Some(text)),
        None => Err(cells.corrupt(
            "content_hash",
            "names a tool output that tool_outputs does not hold",
        )),
    }
}
