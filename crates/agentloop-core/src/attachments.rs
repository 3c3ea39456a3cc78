//! Admitting a message's images and files: their type found in their bytes, their size and
//! number bounded (`[agent.attachments]`), and what the model is shown of them.
//!
//! Every way in (the HTTP routes, `agentloop run --attach`) reads the bytes or the URL, then
//! [`admit_bytes`] or [`admit_url`] each one and [`check_message`] the whole list, before anything
//! is stored: a refused attachment leaves no trace.

use std::sync::Arc;

use agentloop_protocol::Attachment;
use base64::Engine as _;
use sha2::{Digest, Sha256};

pub use crate::settings::{AttachmentSettings, ModelAttachments};

/// The media types a message may carry: the images and documents the providers read.
pub const SUPPORTED_TYPES: [&str; 8] = [
    "image/png",
    "image/jpeg",
    "image/gif",
    "image/webp",
    "application/pdf",
    "text/plain",
    "text/markdown",
    "text/csv",
];

/// Why an attachment is refused. `is_too_large` ones are 413s, the others 400s.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    #[error(
        "the attachment {name} is {size} bytes; the limit is {limit} bytes \
         (agent.attachments.max_bytes)"
    )]
    TooLarge { name: String, size: u64, limit: u64 },
    #[error(
        "the attachments of the message are {total} bytes in all; the limit is {limit} bytes \
         (agent.attachments.max_total_bytes)"
    )]
    TotalTooLarge { total: u64, limit: u64 },
    #[error(
        "the message has {count} attachments; the limit is {limit} \
         (agent.attachments.max_count)"
    )]
    TooMany { count: usize, limit: usize },
    #[error(
        "the attachment {name} is {found}, which the model cannot read; supported: {}",
        SUPPORTED_TYPES.join(", ")
    )]
    Unsupported { name: String, found: String },
    #[error("the attachment {name} was sent as {declared}, but its content is {found}")]
    Mismatch {
        name: String,
        declared: String,
        found: String,
    },
    #[error("the attachment {name} is not a data: URL with base64 content or an https: URL")]
    BadUrl { name: String },
    #[error(
        "this agent's model reads no images or files (agent.attachments.model = \"refuse\"): \
         send the message without attachments"
    )]
    ModelIsTextOnly,
}

impl AttachmentError {
    /// Whether the refusal is about size or number (HTTP 413), not about content (400).
    pub fn is_too_large(&self) -> bool {
        matches!(
            self,
            Self::TooLarge { .. } | Self::TotalTooLarge { .. } | Self::TooMany { .. }
        )
    }

    /// The code of the refusal in an API error body.
    pub fn code(&self) -> &'static str {
        match self {
            Self::TooLarge { .. } | Self::TotalTooLarge { .. } => "attachment_too_large",
            Self::TooMany { .. } => "too_many_attachments",
            Self::Unsupported { .. } | Self::Mismatch { .. } => "attachment_type",
            Self::BadUrl { .. } => "invalid_attachment",
            Self::ModelIsTextOnly => "attachments_unsupported",
        }
    }
}

/// An attachment of bytes: its type found in its content (a `declared` type that differs is
/// refused; `image/jpg` reads as `image/jpeg`), its size within `max_bytes`.
pub fn admit_bytes(
    data: Vec<u8>,
    declared: Option<&str>,
    name: Option<String>,
    settings: &AttachmentSettings,
) -> Result<Attachment, AttachmentError> {
    let label = name.clone().unwrap_or_else(|| "attachment".to_owned());
    let size = data.len() as u64;
    if size > settings.max_bytes {
        return Err(AttachmentError::TooLarge {
            name: label,
            size,
            limit: settings.max_bytes,
        });
    }
    let declared = declared.map(normalized).filter(|media| !media.is_empty());
    let found = sniff(&data, declared.as_deref());
    let Some(found) = found.filter(|found| SUPPORTED_TYPES.contains(&found.as_str())) else {
        return Err(AttachmentError::Unsupported {
            name: label,
            found: sniff_any(&data),
        });
    };
    if let Some(declared) = declared
        && declared != found
    {
        return Err(AttachmentError::Mismatch {
            name: label,
            declared,
            found,
        });
    }
    Ok(Attachment {
        media_type: found,
        name,
        size,
        sha256: Some(sha256_hex(&data)),
        url: None,
        data: Some(Arc::from(data)),
    })
}

/// An attachment given as a URL: a `data:` URL is decoded and admitted as bytes; an `https:`
/// URL is kept as it is, for the provider to fetch (agentloop does not), its type the
/// `declared` one or the one its path's extension names.
pub fn admit_url(
    url: &str,
    declared: Option<&str>,
    name: Option<String>,
    settings: &AttachmentSettings,
) -> Result<Attachment, AttachmentError> {
    let label = || name.clone().unwrap_or_else(|| "attachment".to_owned());
    if let Some(rest) = url.strip_prefix("data:") {
        let (data, in_url) =
            decode_data_url(rest).ok_or_else(|| AttachmentError::BadUrl { name: label() })?;
        let declared = declared.or((!in_url.is_empty()).then_some(in_url.as_str()));
        return admit_bytes(data, declared, name, settings);
    }
    if !url.starts_with("https://") {
        return Err(AttachmentError::BadUrl { name: label() });
    }
    let media_type = declared
        .map(normalized)
        .or_else(|| by_extension(url).map(str::to_owned))
        .unwrap_or_default();
    if !SUPPORTED_TYPES.contains(&media_type.as_str()) {
        return Err(AttachmentError::Unsupported {
            name: label(),
            found: if media_type.is_empty() {
                "of no known type (give its media_type)".to_owned()
            } else {
                media_type
            },
        });
    }
    Ok(Attachment {
        media_type,
        name,
        size: 0,
        sha256: None,
        url: Some(url.to_owned()),
        data: None,
    })
}

/// The count and total size of one message's attachments, and whether its model takes any.
pub fn check_message(
    attachments: &[Attachment],
    settings: &AttachmentSettings,
) -> Result<(), AttachmentError> {
    if attachments.is_empty() {
        return Ok(());
    }
    if settings.model == ModelAttachments::Refuse {
        return Err(AttachmentError::ModelIsTextOnly);
    }
    if attachments.len() > settings.max_count {
        return Err(AttachmentError::TooMany {
            count: attachments.len(),
            limit: settings.max_count,
        });
    }
    let total: u64 = attachments.iter().map(|attachment| attachment.size).sum();
    if total > settings.max_total_bytes {
        return Err(AttachmentError::TotalTooLarge {
            total,
            limit: settings.max_total_bytes,
        });
    }
    Ok(())
}

/// The bytes of a data URL (what follows `data:`) and the media type it names.
fn decode_data_url(rest: &str) -> Option<(Vec<u8>, String)> {
    let (header, payload) = rest.split_once(',')?;
    let mut parts = header.split(';');
    let media_type = parts.next().unwrap_or_default().trim().to_owned();
    if !parts.any(|part| part.trim() == "base64") {
        return None;
    }
    let payload: String = payload.chars().filter(|ch| !ch.is_whitespace()).collect();
    let data = base64::engine::general_purpose::STANDARD
        .decode(payload.as_bytes())
        .ok()?;
    Some((data, media_type))
}

/// The bytes as base64 (what data URLs and the providers' `data` fields hold).
pub fn base64_of(data: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(data)
}

/// SHA-256 of `data`, lowercase hex: the name the store keeps the bytes under.
pub fn sha256_hex(data: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(data);
    let mut hex = String::with_capacity(64);
    for byte in digest {
        hex.push(char::from(DIGITS[usize::from(byte >> 4)]));
        hex.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    hex
}

fn normalized(media_type: &str) -> String {
    let media_type = media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    match media_type.as_str() {
        "image/jpg" => "image/jpeg".to_owned(),
        _ => media_type,
    }
}

/// The type the content has: its magic bytes, or text for UTF-8 without NUL (`text/plain`,
/// or the text type declared: Markdown and CSV have no magic of their own).
fn sniff(data: &[u8], declared: Option<&str>) -> Option<String> {
    if let Some(kind) = infer::get(data) {
        return Some(kind.mime_type().to_owned());
    }
    let text = std::str::from_utf8(data).is_ok_and(|text| !text.contains('\0'));
    if !text {
        return None;
    }
    match declared {
        Some(declared) if declared.starts_with("text/") => Some(declared.to_owned()),
        _ => Some("text/plain".to_owned()),
    }
}

/// The type to name in a refusal.
fn sniff_any(data: &[u8]) -> String {
    match infer::get(data) {
        Some(kind) => kind.mime_type().to_owned(),
        None => "of no known type".to_owned(),
    }
}

fn by_extension(url: &str) -> Option<&'static str> {
    let path = url.split(['?', '#']).next().unwrap_or_default();
    let extension = path.rsplit_once('.')?.1.to_ascii_lowercase();
    Some(match extension.as_str() {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "txt" => "text/plain",
        "md" => "text/markdown",
        "csv" => "text/csv",
        _ => return None,
    })
}

/// Tokens an image is counted as in the context window: about what Anthropic charges for the
/// largest image it takes without scaling it down (1.15 megapixels), above OpenAI's 765 for a
/// 1024×1024 image in high detail. Counting it high keeps the window under its limit.
pub const IMAGE_TOKENS: usize = 1_600;

/// Tokens a document that is not text is counted as (a PDF: about two pages).
pub const DOCUMENT_TOKENS: usize = 3_000;

/// The tokens an attachment is counted as: a text file by its bytes, an image or another
/// document by a fixed estimate (the bytes of an image say little of what a model charges).
pub fn estimated_tokens(attachment: &Attachment) -> usize {
    if attachment.is_image() {
        IMAGE_TOKENS
    } else if attachment.is_text() {
        usize::try_from(attachment.size / 3).unwrap_or(usize::MAX)
    } else {
        DOCUMENT_TOKENS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The smallest PNG: a 1×1 transparent pixel.
    pub(crate) const PNG: &[u8] = &[
        0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44,
        0x52, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f,
        0x15, 0xc4, 0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00,
        0x01, 0x00, 0x00, 0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49,
        0x45, 0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
    ];

    fn settings() -> AttachmentSettings {
        AttachmentSettings::default()
    }

    #[test]
    fn the_type_is_read_from_the_content_not_the_name() {
        let png = admit_bytes(PNG.to_vec(), None, Some("photo.jpg".into()), &settings()).unwrap();
        assert_eq!(png.media_type, "image/png");
        assert_eq!(png.size, PNG.len() as u64);
        assert_eq!(png.sha256.as_deref().map(str::len), Some(64));
        let mismatch =
            admit_bytes(PNG.to_vec(), Some("image/jpeg"), None, &settings()).unwrap_err();
        assert_eq!(mismatch.code(), "attachment_type");
        let binary = admit_bytes(vec![0, 1, 2, 3, 0xff], None, None, &settings()).unwrap_err();
        assert!(matches!(binary, AttachmentError::Unsupported { .. }));
        let zip = admit_bytes(b"PK\x03\x04rest".to_vec(), None, None, &settings()).unwrap_err();
        assert_eq!(
            zip.to_string().split(',').next(),
            Some("the attachment attachment is application/zip")
        );
        let markdown = admit_bytes(
            b"# Title".to_vec(),
            Some("text/markdown"),
            None,
            &settings(),
        );
        assert_eq!(markdown.unwrap().media_type, "text/markdown");
    }

    #[test]
    fn data_urls_are_decoded_and_https_urls_kept() {
        let url = format!("data:image/png;base64,{}", base64_of(PNG));
        let png = admit_url(&url, None, None, &settings()).unwrap();
        assert_eq!(png.data.as_deref(), Some(PNG));
        let lying = format!("data:image/gif;base64,{}", base64_of(PNG));
        assert_eq!(
            admit_url(&lying, None, None, &settings())
                .unwrap_err()
                .code(),
            "attachment_type"
        );
        let remote = admit_url("https://example.com/a/cat.JPG?x=1", None, None, &settings());
        let remote = remote.unwrap();
        assert_eq!(remote.media_type, "image/jpeg");
        assert_eq!(remote.data, None);
        assert!(admit_url("http://example.com/cat.png", None, None, &settings()).is_err());
        assert!(admit_url("https://example.com/cat", None, None, &settings()).is_err());
        assert!(admit_url("data:image/png,rawbytes", None, None, &settings()).is_err());
    }

    #[test]
    fn size_count_and_total_are_bounded_with_their_limit_named() {
        let small = AttachmentSettings {
            max_bytes: 10,
            max_total_bytes: 100,
            max_count: 2,
            model: ModelAttachments::Native,
        };
        let big = admit_bytes(PNG.to_vec(), None, None, &small).unwrap_err();
        assert!(big.is_too_large());
        assert!(big.to_string().contains("agent.attachments.max_bytes"));
        let text = admit_bytes(b"0123456789".to_vec(), None, None, &small).unwrap();
        let three = vec![text.clone(), text.clone(), text.clone()];
        let many = check_message(&three, &small).unwrap_err();
        assert_eq!(many.code(), "too_many_attachments");
        assert!(many.to_string().contains("agent.attachments.max_count"));
        let tight = AttachmentSettings {
            max_total_bytes: 15,
            ..small
        };
        let total = check_message(&three[..2], &tight).unwrap_err();
        assert!(
            total
                .to_string()
                .contains("agent.attachments.max_total_bytes")
        );
        let refuse = AttachmentSettings {
            model: ModelAttachments::Refuse,
            ..small
        };
        assert_eq!(
            check_message(&three[..1], &refuse).unwrap_err().code(),
            "attachments_unsupported"
        );
        assert!(check_message(&[], &refuse).is_ok());
    }
}
