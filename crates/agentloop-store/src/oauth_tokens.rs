//! The sealed OAuth records of MCP servers (migration 15), one per server and user. What is
//! kept was encrypted by the MCP crate before it came here: the store never sees a token.

use agentloop_core::StoreError;

use crate::columns::{millis, now};
use crate::db::Db;

pub(crate) async fn load(db: &Db, server: &str, user: &str) -> Result<Option<String>, StoreError> {
    let row = db
        .query("SELECT sealed FROM mcp_oauth_tokens WHERE server = $1 AND user_id = $2")
        .bind(db.text(server))
        .bind(db.text(user))
        .fetch_optional(db)
        .await?;
    row.map(|row| db.cells(&row, "mcp_oauth_tokens").text("sealed"))
        .transpose()
}

pub(crate) async fn save(
    db: &Db,
    server: &str,
    user: &str,
    sealed: &str,
) -> Result<(), StoreError> {
    db.query(
        "INSERT INTO mcp_oauth_tokens (server, user_id, sealed, updated_at) \
         VALUES ($1, $2, $3, $4) \
         ON CONFLICT (server, user_id) DO UPDATE SET sealed = $3, updated_at = $4",
    )
    .bind(db.text(server))
    .bind(db.text(user))
    .bind(sealed)
    .bind(millis(now()))
    .execute(db)
    .await?;
    Ok(())
}

pub(crate) async fn delete(db: &Db, server: &str, user: &str) -> Result<bool, StoreError> {
    let deleted = db
        .query("DELETE FROM mcp_oauth_tokens WHERE server = $1 AND user_id = $2")
        .bind(db.text(server))
        .bind(db.text(user))
        .execute(db)
        .await?;
    Ok(deleted > 0)
}
