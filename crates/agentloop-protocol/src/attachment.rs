//! Images and files a message carries: a user's attachments, and the images a tool returned.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// An image or a file of a message. It is either bytes, named by their SHA-256 (`sha256`, with
/// `size`), or an `https` URL the provider fetches itself (`url`; agentloop never fetches it).
///
/// The bytes travel in memory only (`data`): every serialized form of a message (the store's
/// rows, a run's saved state, events, the API's listings) carries the reference, and the store
/// keeps the bytes once per hash, loading them again when a conversation goes to the model.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The media type, as found in the bytes (`image/png`, `application/pdf`, `text/plain`),
    /// or as given with a URL.
    pub media_type: String,
    /// A file name, shown to people and to the model beside the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The number of bytes; 0 for a URL.
    #[serde(default)]
    pub size: u64,
    /// SHA-256 of the bytes, lowercase hex; absent for a URL.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// An `https` URL the provider reads the file from; absent for bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The bytes, when loaded: never serialized (see the type's documentation).
    #[serde(skip)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    pub data: Option<Arc<[u8]>>,
}

impl Attachment {
    /// Whether this is an image (`image/...`).
    pub fn is_image(&self) -> bool {
        self.media_type.starts_with("image/")
    }

    /// Whether this is text the model may read as text (`text/...`).
    pub fn is_text(&self) -> bool {
        self.media_type.starts_with("text/")
    }

    /// The name to show: the file name, else the hash's first characters, else the URL.
    pub fn label(&self) -> &str {
        if let Some(name) = self.name.as_deref() {
            return name;
        }
        match (&self.sha256, &self.url) {
            (Some(hash), _) => hash.get(..12).unwrap_or(hash),
            (None, Some(url)) => url,
            (None, None) => "attachment",
        }
    }

    /// The line a model that reads no images or files is shown in its place.
    pub fn note(&self) -> String {
        match &self.url {
            Some(url) => format!("[attachment: {}, {}, {url}]", self.label(), self.media_type),
            None => format!(
                "[attachment: {}, {}, {} bytes]",
                self.label(),
                self.media_type,
                self.size
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bytes_never_reach_json_and_the_reference_does() {
        let attachment = Attachment {
            media_type: "image/png".into(),
            name: Some("cat.png".into()),
            size: 3,
            sha256: Some("ab".repeat(32)),
            url: None,
            data: Some(Arc::from(&b"png"[..])),
        };
        let json = serde_json::to_value(&attachment).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"media_type": "image/png", "name": "cat.png", "size": 3,
                "sha256": "ab".repeat(32)})
        );
        let back: Attachment = serde_json::from_value(json).unwrap();
        assert_eq!(back.data, None);
        assert_eq!(back.note(), "[attachment: cat.png, image/png, 3 bytes]");
    }
}
