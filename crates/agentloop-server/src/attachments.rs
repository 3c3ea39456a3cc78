//! Attachments on the HTTP routes: what a request body carries (`AttachmentBody`: a `data:` or
//! `https:` URL, a media type, a name), admitted under `[agent.attachments]` before the run
//! begins (so a refusal stores nothing: 413 with the limit named, 400 for a type the content
//! does not have or the model cannot read), and `GET /v1/attachments/{sha256}`, the bytes of a
//! stored one (the panel shows images with it).

use agentloop_core::attachments::{self, AttachmentError, AttachmentSettings};
use agentloop_core::protocol::Attachment;
use axum::{
    extract::{Path, State, rejection::PathRejection},
    http::{StatusCode, header},
    response::{IntoResponse, Response},
};
use serde::Deserialize;
use serde_json::json;
use utoipa::ToSchema;

use crate::{
    auth::User,
    error::{ApiError, ErrorBody},
    state::AppState,
};

/// An image or a file of a message.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AttachmentBody {
    /// `data:<type>;base64,<bytes>`, or an `https://` URL the model's provider fetches
    /// (agentloop does not).
    pub url: String,
    /// The media type: checked against the bytes' content (a mismatch is a 400); for an
    /// `https` URL, its type (default: from the URL's extension).
    #[serde(default)]
    pub media_type: Option<String>,
    /// A file name, shown beside the file.
    #[serde(default)]
    pub name: Option<String>,
}

/// What a message's attachments are once admitted: each checked, then all together.
pub fn admit(
    bodies: Vec<AttachmentBody>,
    settings: &AttachmentSettings,
) -> Result<Vec<Attachment>, ApiError> {
    admit_all(
        bodies
            .into_iter()
            .map(|body| (body.url, body.media_type, body.name)),
        settings,
    )
}

/// Admits `(url, media type, name)` triples: the count first (nothing is decoded past the
/// limit), then each, then their total.
pub fn admit_all(
    given: impl ExactSizeIterator<Item = (String, Option<String>, Option<String>)>,
    settings: &AttachmentSettings,
) -> Result<Vec<Attachment>, ApiError> {
    if given.len() == 0 {
        return Ok(Vec::new());
    }
    if given.len() > settings.max_count {
        return Err(refused(AttachmentError::TooMany {
            count: given.len(),
            limit: settings.max_count,
        }));
    }
    let admitted = given
        .map(|(url, media_type, name)| {
            attachments::admit_url(&url, media_type.as_deref(), name, settings)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(refused)?;
    attachments::check_message(&admitted, settings).map_err(refused)?;
    Ok(admitted)
}

/// The API error of a refused attachment: 413 for sizes and numbers, 400 for the rest.
pub fn refused(error: AttachmentError) -> ApiError {
    let status = match error.is_too_large() {
        true => StatusCode::PAYLOAD_TOO_LARGE,
        false => StatusCode::BAD_REQUEST,
    };
    let limit = match &error {
        AttachmentError::TooLarge { .. } => Some("agent.attachments.max_bytes"),
        AttachmentError::TotalTooLarge { .. } => Some("agent.attachments.max_total_bytes"),
        AttachmentError::TooMany { .. } => Some("agent.attachments.max_count"),
        _ => None,
    };
    let error_code = error.code();
    let refusal = ApiError::new(status, error_code, error.to_string());
    match limit {
        Some(limit) => refusal.with_details(json!({ "field": "attachments", "limit": limit })),
        None => refusal.with_details(json!({ "field": "attachments" })),
    }
}

/// The bytes of a stored attachment, with its media type. Attachments are stored once for
/// every message that carries them, named by their content: any key may read one by its hash,
/// which only the listings and events of the messages that carry it show.
#[utoipa::path(
    get,
    path = "/v1/attachments/{sha256}",
    tag = "sessions",
    params(("sha256" = String, Path, description = "SHA-256 of the bytes, lowercase hex (an attachment's `sha256`)")),
    responses(
        (status = 200, description = "The bytes, with their media type", content_type = "application/octet-stream"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "No attachment with these bytes is stored", body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_attachment(
    State(state): State<AppState>,
    User(_user): User,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(hash) = path.map_err(|rejection| {
        ApiError::bad_request(
            "invalid_id",
            format!("the path cannot be read: {}", rejection.body_text()),
        )
    })?;
    let is_hash = hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
    if !is_hash {
        return Err(ApiError::bad_request(
            "invalid_id",
            "an attachment is named by the SHA-256 of its bytes: 64 lowercase hex digits",
        ));
    }
    match state.store.attachment(&hash).await? {
        Some((media_type, bytes)) => Ok((
            [
                (header::CONTENT_TYPE, media_type),
                (
                    header::CACHE_CONTROL,
                    "private, max-age=31536000, immutable".to_owned(),
                ),
                (header::X_CONTENT_TYPE_OPTIONS, "nosniff".to_owned()),
            ],
            bytes,
        )
            .into_response()),
        None => Err(ApiError::not_found("attachment", hash)),
    }
}
