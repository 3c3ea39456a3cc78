//! Attachments in each provider's own form: Chat Completions content parts (`image_url`,
//! `file`), Responses content (`input_image`, `input_file`), Anthropic blocks (`image`,
//! `document`).
//!
//! Bytes go inline (base64: a data URL for OpenAI, a `base64` source for Anthropic); an `https`
//! URL goes as a URL where the provider takes one (agentloop never fetches it). A text file
//! goes as text where a provider has no text document (Chat Completions, Responses). What a
//! provider cannot take (a URL of a PDF on Chat Completions, bytes that were not loaded) goes as
//! the attachment's note, so the model still knows it is there.

use agentloop_core::attachments::base64_of;
use agentloop_core::protocol::Attachment;
use serde_json::{Value, json};

/// `data:<type>;base64,<bytes>`, when the bytes are loaded.
fn data_url(attachment: &Attachment) -> Option<String> {
    let data = attachment.data.as_deref()?;
    Some(format!(
        "data:{};base64,{}",
        attachment.media_type,
        base64_of(data)
    ))
}

/// The text of a text file, when its bytes are loaded.
fn text_of(attachment: &Attachment) -> Option<String> {
    if !attachment.is_text() {
        return None;
    }
    let data = attachment.data.as_deref()?;
    Some(format!(
        "<file name=\"{}\" type=\"{}\">\n{}\n</file>",
        attachment.label(),
        attachment.media_type,
        String::from_utf8_lossy(data)
    ))
}

fn filename(attachment: &Attachment) -> String {
    match &attachment.name {
        Some(name) => name.clone(),
        None => format!(
            "{}.{}",
            attachment.label(),
            extension(&attachment.media_type)
        ),
    }
}

fn extension(media_type: &str) -> &str {
    media_type
        .rsplit('/')
        .next()
        .unwrap_or("bin")
        .trim_start_matches("x-")
}

/// Chat Completions: the content parts of a user message (text first).
pub(crate) fn chat_parts(text: &str, attachments: &[Attachment]) -> Vec<Value> {
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({"type": "text", "text": text}));
    }
    for attachment in attachments {
        let url = attachment.url.clone().or_else(|| data_url(attachment));
        parts.push(match (attachment.is_image(), url, text_of(attachment)) {
            (true, Some(url), _) => json!({"type": "image_url", "image_url": {"url": url}}),
            (false, _, Some(text)) => json!({"type": "text", "text": text}),
            (false, Some(_), None) if attachment.url.is_none() => json!({
                "type": "file",
                "file": {"filename": filename(attachment), "file_data": data_url(attachment)},
            }),
            _ => json!({"type": "text", "text": attachment.note()}),
        });
    }
    parts
}

/// Responses: the content of a user message, or of a `function_call_output` (text first).
pub(crate) fn responses_parts(text: &str, attachments: &[Attachment]) -> Vec<Value> {
    let mut parts = Vec::new();
    if !text.is_empty() {
        parts.push(json!({"type": "input_text", "text": text}));
    }
    for attachment in attachments {
        let part = if let Some(text) = text_of(attachment) {
            json!({"type": "input_text", "text": text})
        } else if attachment.is_image() {
            match attachment.url.clone().or_else(|| data_url(attachment)) {
                Some(url) => json!({"type": "input_image", "image_url": url, "detail": "auto"}),
                None => json!({"type": "input_text", "text": attachment.note()}),
            }
        } else if let Some(url) = &attachment.url {
            json!({"type": "input_file", "file_url": url})
        } else if let Some(data) = data_url(attachment) {
            json!({"type": "input_file", "filename": filename(attachment), "file_data": data})
        } else {
            json!({"type": "input_text", "text": attachment.note()})
        };
        parts.push(part);
    }
    parts
}

/// Anthropic: the `image` and `document` blocks of attachments.
pub(crate) fn anthropic_blocks(attachments: &[Attachment]) -> Vec<Value> {
    attachments.iter().map(anthropic_block).collect()
}

fn anthropic_block(attachment: &Attachment) -> Value {
    let source = match (&attachment.url, attachment.data.as_deref()) {
        (Some(url), _) => json!({"type": "url", "url": url}),
        (None, Some(data)) if attachment.is_text() => json!({
            "type": "text",
            "media_type": "text/plain",
            "data": String::from_utf8_lossy(data),
        }),
        (None, Some(data)) => json!({
            "type": "base64",
            "media_type": attachment.media_type,
            "data": base64_of(data),
        }),
        (None, None) => return json!({"type": "text", "text": attachment.note()}),
    };
    if attachment.is_image() {
        json!({"type": "image", "source": source})
    } else {
        let mut block = json!({"type": "document", "source": source});
        if let Some(name) = &attachment.name {
            block["title"] = Value::from(name.as_str());
        }
        block
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn image() -> Attachment {
        Attachment {
            media_type: "image/png".into(),
            name: Some("dot.png".into()),
            size: 3,
            sha256: Some("0".repeat(64)),
            url: None,
            data: Some(Arc::from(&b"png"[..])),
        }
    }

    fn pdf_url() -> Attachment {
        Attachment {
            media_type: "application/pdf".into(),
            name: None,
            size: 0,
            sha256: None,
            url: Some("https://example.com/a.pdf".into()),
            data: None,
        }
    }

    fn text() -> Attachment {
        Attachment {
            media_type: "text/plain".into(),
            name: Some("notes.txt".into()),
            size: 5,
            sha256: Some("1".repeat(64)),
            url: None,
            data: Some(Arc::from(&b"hello"[..])),
        }
    }

    #[test]
    fn chat_completions_sends_images_as_data_urls_and_what_it_cannot_take_as_notes() {
        let parts = chat_parts("look", &[image(), pdf_url(), text()]);
        assert_eq!(parts[0], json!({"type": "text", "text": "look"}));
        assert_eq!(
            parts[1],
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,cG5n"}})
        );
        assert_eq!(
            parts[2]["text"],
            "[attachment: https://example.com/a.pdf, application/pdf, https://example.com/a.pdf]"
        );
        assert_eq!(
            parts[3]["text"],
            "<file name=\"notes.txt\" type=\"text/plain\">\nhello\n</file>"
        );
        let pdf = Attachment {
            media_type: "application/pdf".into(),
            data: Some(Arc::from(&b"%PDF"[..])),
            ..image()
        };
        assert_eq!(
            chat_parts("", &[pdf])[0],
            json!({"type": "file", "file": {"filename": "dot.png",
                "file_data": "data:application/pdf;base64,JVBERg=="}})
        );
    }

    #[test]
    fn responses_and_anthropic_take_urls_as_urls() {
        let parts = responses_parts("", &[image(), pdf_url()]);
        assert_eq!(parts[0]["type"], "input_image");
        assert_eq!(parts[0]["image_url"], "data:image/png;base64,cG5n");
        assert_eq!(
            parts[1],
            json!({"type": "input_file", "file_url": "https://example.com/a.pdf"})
        );
        let blocks = anthropic_blocks(&[image(), pdf_url(), text()]);
        assert_eq!(
            blocks[0],
            json!({"type": "image", "source": {"type": "base64", "media_type": "image/png",
                "data": "cG5n"}})
        );
        assert_eq!(
            blocks[1],
            json!({"type": "document", "source": {"type": "url",
                "url": "https://example.com/a.pdf"}})
        );
        assert_eq!(blocks[2]["source"]["type"], "text");
        assert_eq!(blocks[2]["title"], "notes.txt");
    }
}
