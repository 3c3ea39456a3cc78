//! Sessions and their users.

use crate::sql::{Query, Row};
use agentloop_core::protocol::SessionInfo;
use agentloop_core::{NewSession, SessionCursor, StoreError};
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::columns::{millis, now};
use crate::db::{Db, Tx, changed};

const SELECT_SESSION: &str = "SELECT s.id, s.user_id, s.title, s.created_at, s.updated_at, \
    s.active_run_id, s.lock_expires_at, \
    (SELECT COUNT(*) FROM messages m \
        WHERE m.session_id = s.id AND m.superseded_by_run IS NULL) AS message_count \
    FROM sessions s";

pub(crate) async fn create(db: &Db, session: &NewSession) -> Result<SessionInfo, StoreError> {
    let created_at = now();
    let mut tx = db.begin().await?;
    insert(db, &mut tx, session, created_at, None).await?;
    tx.commit().await?;
    Ok(SessionInfo {
        id: session.id,
        user_id: session.user_id.clone(),
        title: session.title.clone(),
        created_at,
        updated_at: created_at,
        message_count: 0,
        active_run_id: None,
    })
}

/// Inserts the session (and its user, if new) in `tx`; with `held_by`, already taken by that
/// run until the lease's expiry (milliseconds).
pub(crate) async fn insert(
    db: &Db,
    tx: &mut Tx<'_>,
    session: &NewSession,
    created_at: DateTime<Utc>,
    held_by: Option<(&str, i64)>,
) -> Result<(), StoreError> {
    for query in insert_queries(db, session, created_at, held_by) {
        query.execute(&mut *tx).await?;
    }
    Ok(())
}

/// The statements of [`insert`]: the user first.
pub(crate) fn insert_queries<'p>(
    db: &Db,
    session: &'p NewSession,
    created_at: DateTime<Utc>,
    held_by: Option<(&'p str, i64)>,
) -> [Query<'p>; 2] {
    let session_row = db
        .query(
            "INSERT INTO sessions (id, user_id, title, created_at, updated_at, active_run_id, \
                 lock_expires_at) \
             VALUES ($1, $2, $3, $4, $4, $5, $6)",
        )
        .bind(session.id.to_string())
        .bind(db.text(&session.user_id))
        .bind(db.text(&session.title))
        .bind(millis(created_at))
        .bind(held_by.map(|(run_id, _)| run_id))
        .bind(held_by.map(|(_, expires_at)| expires_at));
    [
        add_user_query(db, &session.user_id, created_at),
        session_row,
    ]
}

/// Adds the user unless it exists: users come into being with their first session or key.
pub(crate) async fn add_user(
    db: &Db,
    tx: &mut Tx<'_>,
    user_id: &str,
    at: DateTime<Utc>,
) -> Result<(), StoreError> {
    add_user_query(db, user_id, at).execute(&mut *tx).await?;
    Ok(())
}

fn add_user_query<'p>(db: &Db, user_id: &'p str, at: DateTime<Utc>) -> Query<'p> {
    db.query("INSERT INTO users (id, created_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING")
        .bind(db.text(user_id))
        .bind(millis(at))
}

pub(crate) async fn get(db: &Db, id: Uuid) -> Result<Option<SessionInfo>, StoreError> {
    let row = db
        .query(&format!("{SELECT_SESSION} WHERE s.id = $1"))
        .bind(id.to_string())
        .fetch_optional(db)
        .await?;
    row.as_ref().map(|row| session_info(db, row)).transpose()
}

/// Keyset paging on `(updated_at, id)`, the order of the listing: a page starts right after the
/// last session of the one before, whatever was added or deleted meanwhile.
pub(crate) async fn list(
    db: &Db,
    user_id: Option<&str>,
    after: Option<SessionCursor>,
    limit: u32,
) -> Result<Vec<SessionInfo>, StoreError> {
    // The id breaks ties so that pages of sessions updated in the same millisecond are stable.
    let mut filters = Vec::new();
    let mut parameter = 0;
    let mut next = || {
        parameter += 1;
        format!("${parameter}")
    };
    if user_id.is_some() {
        filters.push(format!("s.user_id = {}", next()));
    }
    if after.is_some() {
        let (time, id) = (next(), next());
        filters.push(format!(
            "(s.updated_at < {time} OR (s.updated_at = {time} AND s.id < {id}))"
        ));
    }
    let filter = match filters.is_empty() {
        true => String::new(),
        false => format!("WHERE {}", filters.join(" AND ")),
    };
    let sql = format!(
        "{SELECT_SESSION} {filter} ORDER BY s.updated_at DESC, s.id DESC LIMIT {}",
        next()
    );
    let mut query = db.query(&sql);
    if let Some(user_id) = user_id {
        query = query.bind(db.text(user_id));
    }
    if let Some(after) = after {
        query = query
            .bind(millis(after.updated_at))
            .bind(after.id.to_string());
    }
    let rows = query.bind(i64::from(limit)).fetch_all(db).await?;
    rows.iter().map(|row| session_info(db, row)).collect()
}

/// Runs go first: they have no foreign key to the session (a run that does not save the chat
/// may have no session row), so no cascade would reach them. Their tool executions and events
/// follow them by cascade, as messages follow the session.
pub(crate) async fn delete(db: &Db, id: Uuid) -> Result<bool, StoreError> {
    let id = id.to_string();
    let mut tx = db.begin().await?;
    let runs = db
        .query("DELETE FROM runs WHERE session_id = $1")
        .bind(id.as_str())
        .execute(&mut tx)
        .await?;
    let session = db
        .query("DELETE FROM sessions WHERE id = $1")
        .bind(id.as_str())
        .execute(&mut tx)
        .await?;
    tx.commit().await?;
    Ok(changed(&session) || changed(&runs))
}

fn session_info(db: &Db, row: &Row) -> Result<SessionInfo, StoreError> {
    let cells = db.cells(row, "sessions");
    // A holder whose lease ran out holds nothing any more, even before another run takes over.
    let lease_is_live = cells
        .optional_integer("lock_expires_at")?
        .is_some_and(|expires_at| expires_at > millis(now()));
    let active_run_id = match lease_is_live {
        true => cells.optional_uuid("active_run_id")?,
        false => None,
    };
    Ok(SessionInfo {
        id: cells.uuid("id")?,
        user_id: cells.free_text("user_id")?,
        title: cells.free_text("title")?,
        created_at: cells.time("created_at")?,
        updated_at: cells.time("updated_at")?,
        message_count: cells.counter("message_count")?,
        active_run_id,
    })
}
