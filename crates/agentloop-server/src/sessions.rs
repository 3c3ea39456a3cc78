//! `/v1/sessions`: a user's conversations.
//!
//! Answers stay bounded whatever the tools returned: a session's tool outputs are cut to their
//! first [`SHOWN_OUTPUT_BYTES`] (marked `truncated`, with their whole length and where to fetch
//! them whole), and sessions are listed in pages.

use agentloop_core::SessionCursor;
use agentloop_core::protocol::{
    MessageKind, RunInfo, SessionInfo, SessionMessage, ToolExecutionRecord,
};
use axum::{
    Json,
    extract::{RawQuery, State},
    http::StatusCode,
};
use chrono::DateTime;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use crate::{
    auth::User,
    error::{ApiError, ErrorBody},
    extract::{PathId, query_value},
    owned::owned_session,
    state::AppState,
};

/// Sessions in a page unless `limit` says otherwise.
const DEFAULT_LIMIT: u32 = 50;
/// At most this many sessions in a page.
const MAX_LIMIT: u32 = 200;

/// A tool output longer than this (UTF-8 bytes) is cut in a session's answer; the whole of it
/// comes from `GET /v1/runs/{id}/tools/{call_id}`.
pub const SHOWN_OUTPUT_BYTES: usize = 16 * 1024;

/// A page of sessions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionInfo>,
    /// Present when more sessions follow: pass it as `cursor` for the next page.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// A session with its messages (traces included, as system messages; those a regenerated
/// answer superseded only when asked for, each with `superseded_by_run`) and its runs. Tool
/// outputs longer than 16 KiB are cut and marked `truncated`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SessionDetails {
    pub session: SessionInfo,
    pub messages: Vec<ShownMessage>,
    pub runs: Vec<SessionRun>,
}

/// A message of the session. The content of a tool result longer than 16 KiB is cut to its
/// first 16 KiB: `truncated` is then true, `content_bytes` gives the whole length and
/// `full_output` the route that answers the whole output.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShownMessage {
    #[serde(flatten)]
    pub message: SessionMessage,
    /// True when `content` (or, in a trace, a result of `metadata.execution_trace`) was cut.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub truncated: bool,
    /// The length of the whole content, in UTF-8 bytes, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content_bytes: Option<u64>,
    /// Where the whole output is (`/v1/runs/{id}/tools/{call_id}`), when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output: Option<String>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct SessionRun {
    #[serde(flatten)]
    pub run: RunInfo,
    pub execution_trace: Vec<ShownRecord>,
}

/// A tool call of a run. A `result` longer than 16 KiB is cut to its first 16 KiB, and a
/// `structured_result` whose JSON is longer is left out: `truncated` is then true, with the
/// whole lengths and the route that answers the whole record.
#[derive(Debug, Serialize, ToSchema)]
pub struct ShownRecord {
    #[serde(flatten)]
    pub record: ToolExecutionRecord,
    /// True when `result` was cut or `structured_result` left out.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    #[schema(required = false)]
    pub truncated: bool,
    /// The length of the whole result, in UTF-8 bytes, when it was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result_bytes: Option<u64>,
    /// The length of the structured result's compact JSON, in bytes, when it was left out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_result_bytes: Option<u64>,
    /// Where the whole record is (`/v1/runs/{id}/tools/{call_id}`), when something was cut.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub full_output: Option<String>,
}

/// Your sessions, most recently active first, a page at a time.
///
/// The order is by last activity, then id; `next_cursor` continues after the last session of
/// the page. A session active while you page moves to the front and is not repeated.
#[utoipa::path(
    get,
    path = "/v1/sessions",
    tag = "sessions",
    params(
        ("limit" = Option<u32>, Query, description = "Sessions per page: 1 to 200, 50 by default"),
        ("cursor" = Option<String>, Query, description = "The `next_cursor` of the previous page"),
    ),
    responses(
        (status = 200, description = "A page of your sessions, the most recently active first", body = SessionList),
        (status = 400, description = "A limit out of range, or a cursor this server did not make", body = ErrorBody),
        (status = 401, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn list_sessions(
    State(state): State<AppState>,
    User(user): User,
    RawQuery(query): RawQuery,
) -> Result<Json<SessionList>, ApiError> {
    let limit = page_limit(query_value(query.as_deref(), "limit")?)?;
    let after = query_value(query.as_deref(), "cursor")?
        .map(|cursor| decode_cursor(&cursor))
        .transpose()?;
    // One more than the page, to know whether another follows.
    let mut sessions = state
        .store
        .list_sessions_after(Some(&user), after, limit + 1)
        .await?;
    let page = usize::try_from(limit).unwrap_or(usize::MAX);
    let next_cursor = match sessions.len() > page {
        true => {
            sessions.truncate(page);
            sessions
                .last()
                .map(|last| encode_cursor(SessionCursor::after(last)))
        }
        false => None,
    };
    Ok(Json(SessionList {
        sessions,
        next_cursor,
    }))
}

fn page_limit(given: Option<String>) -> Result<u32, ApiError> {
    let Some(text) = given else {
        return Ok(DEFAULT_LIMIT);
    };
    match text.trim().parse::<u32>() {
        Ok(limit) if (1..=MAX_LIMIT).contains(&limit) => Ok(limit),
        _ => Err(ApiError::bad_request(
            "invalid_limit",
            format!("limit must be a whole number from 1 to {MAX_LIMIT}, got {text:?}"),
        )),
    }
}

/// Hex digits of a cursor: the time (milliseconds, 16) then the id (32).
const CURSOR_DIGITS: usize = 48;

/// Opaque to clients: the `(updated_at, id)` of the last session shown, in hex.
fn encode_cursor(cursor: SessionCursor) -> String {
    let millis = cursor.updated_at.timestamp_millis().to_be_bytes();
    let mut text = String::with_capacity(CURSOR_DIGITS);
    for byte in millis {
        text.push_str(&format!("{byte:02x}"));
    }
    text.push_str(&cursor.id.simple().to_string());
    text
}

fn decode_cursor(text: &str) -> Result<SessionCursor, ApiError> {
    let invalid = || {
        ApiError::bad_request(
            "invalid_cursor",
            format!(
                "{text:?} is not a cursor of this listing: pass the `next_cursor` of the \
                 previous page as it was given, or leave cursor out for the first page"
            ),
        )
    };
    if text.len() != CURSOR_DIGITS || !text.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    let (millis, id) = text.split_at(16);
    let millis = u64::from_str_radix(millis, 16).map_err(|_| invalid())?;
    let millis = i64::from_be_bytes(millis.to_be_bytes());
    Ok(SessionCursor {
        updated_at: DateTime::from_timestamp_millis(millis).ok_or_else(invalid)?,
        id: Uuid::parse_str(id).map_err(|_| invalid())?,
    })
}

/// One of your sessions: its messages and runs with their tool calls, tool outputs longer than
/// 16 KiB cut (`truncated`); `GET /v1/runs/{id}/tools/{call_id}` answers one whole. The
/// messages are the conversation as it stands: those a regenerated answer replaced are left
/// out, unless `superseded=true` asks for them (each then names the run that replaced it,
/// `superseded_by_run`).
#[utoipa::path(
    get,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(
        ("id" = uuid::Uuid, Path, description = "Session id"),
        ("superseded" = Option<bool>, Query, description = "Also the messages a regenerated answer replaced (false by default)"),
    ),
    responses(
        (status = 200, description = "The session with its messages and runs", body = SessionDetails),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_session(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
    RawQuery(query): RawQuery,
) -> Result<Json<SessionDetails>, ApiError> {
    let id = id.parse("session")?;
    let superseded = match query_value(query.as_deref(), "superseded")?.as_deref() {
        None | Some("false") => false,
        Some("true") => true,
        Some(other) => {
            return Err(ApiError::bad_request(
                "invalid_query",
                format!("superseded must be true or false, got {other:?}"),
            ));
        }
    };
    let session = owned_session(&state, id, &user).await?;
    let messages = match superseded {
        true => state.store.messages_with_superseded(id).await?,
        false => state.store.messages(id).await?,
    };
    let messages = messages.into_iter().map(ShownMessage::bounded).collect();
    let mut runs = Vec::new();
    for run in state.store.session_runs(id).await? {
        let execution_trace = state
            .store
            .tool_executions(run.id)
            .await?
            .into_iter()
            .map(|record| ShownRecord::bounded(run.id, record))
            .collect();
        runs.push(SessionRun {
            run: crate::disclosure::shown_run(&crate::request_id::current(), run),
            execution_trace,
        });
    }
    Ok(Json(SessionDetails {
        session,
        messages,
        runs,
    }))
}

impl ShownMessage {
    /// The message with the content of a tool result cut to `SHOWN_OUTPUT_BYTES`, and the
    /// results in the metadata of a trace bounded the same way (traces written by earlier
    /// versions hold them whole; newer ones leave them out).
    fn bounded(mut message: SessionMessage) -> ShownMessage {
        let mut truncated = false;
        let mut content_bytes = None;
        let mut full_output = None;
        match message.kind {
            MessageKind::ToolResult => {
                if let Some(bytes) = message.message.content.as_mut().and_then(cut) {
                    truncated = true;
                    content_bytes = Some(bytes);
                    full_output = match (message.run_id, &message.message.tool_call_id) {
                        (Some(run_id), Some(call_id)) => Some(tool_route(run_id, call_id)),
                        _ => None,
                    };
                }
            }
            MessageKind::Trace => truncated = bound_trace(&mut message.metadata),
            _ => {}
        }
        ShownMessage {
            message,
            truncated,
            content_bytes,
            full_output,
        }
    }
}

impl ShownRecord {
    /// The record of a call of `run_id` with its result cut to `SHOWN_OUTPUT_BYTES`, and its
    /// structured result left out when its JSON is longer.
    fn bounded(run_id: Uuid, mut record: ToolExecutionRecord) -> ShownRecord {
        let result_bytes = record.result.as_mut().and_then(cut);
        let structured_result_bytes = match &record.structured_result {
            Some(value) => {
                let bytes = json_bytes(value);
                (bytes > SHOWN_OUTPUT_BYTES as u64).then_some(bytes)
            }
            None => None,
        };
        if structured_result_bytes.is_some() {
            record.structured_result = None;
        }
        let truncated = result_bytes.is_some() || structured_result_bytes.is_some();
        let full_output = truncated.then(|| tool_route(run_id, &record.call_id));
        ShownRecord {
            record,
            truncated,
            result_bytes,
            structured_result_bytes,
            full_output,
        }
    }
}

/// Cuts `text` to at most `SHOWN_OUTPUT_BYTES` (at a character boundary); its whole length in
/// bytes when it was cut.
fn cut(text: &mut String) -> Option<u64> {
    if text.len() <= SHOWN_OUTPUT_BYTES {
        return None;
    }
    let whole = text.len();
    let mut end = SHOWN_OUTPUT_BYTES;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    Some(u64::try_from(whole).unwrap_or(u64::MAX))
}

/// The results in `metadata.execution_trace` bounded like records (`result` cut,
/// `structured_result` left out, `truncated`, `result_bytes`, `structured_result_bytes`);
/// whether any was. Traces written since outputs are stored once hold no results.
fn bound_trace(metadata: &mut Value) -> bool {
    let Some(entries) = metadata
        .get_mut("execution_trace")
        .and_then(Value::as_array_mut)
    else {
        return false;
    };
    let mut any = false;
    for entry in entries.iter_mut().filter_map(Value::as_object_mut) {
        let mut truncated = false;
        if let Some(Value::String(result)) = entry.get_mut("result")
            && let Some(bytes) = cut(result)
        {
            entry.insert("result_bytes".into(), bytes.into());
            truncated = true;
        }
        let structured = entry.get("structured_result").map(json_bytes);
        if let Some(bytes) = structured.filter(|bytes| *bytes > SHOWN_OUTPUT_BYTES as u64) {
            entry.remove("structured_result");
            entry.insert("structured_result_bytes".into(), bytes.into());
            truncated = true;
        }
        if truncated {
            entry.insert("truncated".into(), true.into());
            any = true;
        }
    }
    any
}

/// The length of `value`'s compact JSON, without writing it anywhere.
fn json_bytes(value: &Value) -> u64 {
    struct Counter(u64);
    impl std::io::Write for Counter {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += u64::try_from(buf.len()).unwrap_or(u64::MAX);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut counter = Counter(0);
    match serde_json::to_writer(&mut counter, value) {
        Ok(()) => counter.0,
        Err(_) => u64::MAX,
    }
}

/// The route that answers the whole record of a call (the call id percent-encoded).
pub(crate) fn tool_route(run_id: Uuid, call_id: &str) -> String {
    let mut path = format!("/v1/runs/{run_id}/tools/");
    for byte in call_id.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            path.push(char::from(byte));
        } else {
            path.push_str(&format!("%{byte:02X}"));
        }
    }
    path
}

/// Delete one of your sessions with its messages, runs and events.
#[utoipa::path(
    delete,
    path = "/v1/sessions/{id}",
    tag = "sessions",
    params(("id" = uuid::Uuid, Path, description = "Session id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
        (status = 409, description = "A run of the session is in progress", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn delete_session(
    State(state): State<AppState>,
    User(user): User,
    id: PathId,
) -> Result<StatusCode, ApiError> {
    let id = id.parse("session")?;
    let session = owned_session(&state, id, &user).await?;
    if let Some(run) = session.active_run_id {
        return Err(ApiError::conflict(
            "session_busy",
            format!("session {id} has a run in progress ({run}); cancel it or wait, then delete"),
        ));
    }
    state.store.delete_session(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_cursor_reads_back_as_it_was_made() {
        let cursor = SessionCursor {
            updated_at: DateTime::from_timestamp_millis(1_750_000_000_123).unwrap(),
            id: Uuid::new_v4(),
        };
        let text = encode_cursor(cursor);
        assert_eq!(text.len(), CURSOR_DIGITS);
        assert_eq!(decode_cursor(&text).unwrap(), cursor);
        for bad in [
            "",
            "zz",
            &text[1..],
            &format!("{text}0"),
            &text.replace('0', "g"),
        ] {
            assert!(decode_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn limits_default_and_stay_in_range() {
        assert_eq!(page_limit(None).unwrap(), DEFAULT_LIMIT);
        assert_eq!(page_limit(Some("7".into())).unwrap(), 7);
        assert_eq!(page_limit(Some("200".into())).unwrap(), 200);
        for bad in ["0", "201", "-1", "ten", "", "1.5"] {
            assert_eq!(
                page_limit(Some(bad.into())).unwrap_err().code,
                "invalid_limit"
            );
        }
    }

    #[test]
    fn text_is_cut_at_a_character_boundary() {
        let mut text = format!("{}é and more", "a".repeat(SHOWN_OUTPUT_BYTES - 1));
        let whole = text.len() as u64;
        assert_eq!(cut(&mut text), Some(whole));
        assert_eq!(text.len(), SHOWN_OUTPUT_BYTES - 1);
        let mut short = "short".to_string();
        assert_eq!(cut(&mut short), None);
        assert_eq!(short, "short");
    }

    #[test]
    fn call_ids_are_escaped_in_the_route() {
        let run = Uuid::nil();
        assert_eq!(
            tool_route(run, "call_1"),
            format!("/v1/runs/{run}/tools/call_1")
        );
        assert_eq!(
            tool_route(run, "a/b c"),
            format!("/v1/runs/{run}/tools/a%2Fb%20c")
        );
    }
}
