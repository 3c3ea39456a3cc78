//! From an MCP `tools/call` result to what the loop and the model read.

use agentloop_core::attachments::{self, AttachmentSettings};
use agentloop_core::protocol::Attachment;
use agentloop_core::{ToolError, ToolOutput};
use rmcp::model::{CallToolResponse, CallToolResult, ContentBlock, ResourceContents};

/// A `tools/call` answer: a complete result, or a kind agentloop cannot continue yet.
pub(crate) fn call_output(response: CallToolResponse) -> Result<ToolOutput, ToolError> {
    match response {
        CallToolResponse::Complete(result) => tool_output(result),
        CallToolResponse::InputRequired(_) => Err(ToolError::Failed(
            "the MCP server asked for more input from the user, which agentloop does not support \
             yet"
            .to_owned(),
        )),
        CallToolResponse::Task(_) => Err(ToolError::Failed(
            "the MCP server answered with a task to poll, which agentloop does not support yet"
                .to_owned(),
        )),
        _ => Err(ToolError::Failed(
            "the MCP server answered with a kind of result agentloop does not know".to_owned(),
        )),
    }
}

/// Where a tool reports what its call cost, in USD: a number in the result's `_meta`.
pub const COST_META_KEY: &str = "agentloop/cost_usd";

/// Text blocks become the text, other blocks a short placeholder the model can still reason
/// about; an `image` block the model can read (PNG, JPEG, GIF, WebP, its type matching its
/// bytes) is also kept as an image of the result, which a multimodal model sees;
/// `isError` turns the whole result into a tool failure. A cost in
/// `_meta["agentloop/cost_usd"]` (a finite number, 0 or more) is kept as the call's cost.
pub(crate) fn tool_output(result: CallToolResult) -> Result<ToolOutput, ToolError> {
    let cost_usd = result
        .meta
        .as_ref()
        .and_then(|meta| meta.0.get(COST_META_KEY))
        .and_then(serde_json::Value::as_f64)
        .filter(|cost| cost.is_finite() && *cost >= 0.0);
    let structured = result.structured_content.filter(|value| !value.is_null());
    let mut parts: Vec<String> = Vec::with_capacity(result.content.len());
    let mut has_text = false;
    let mut images = Vec::new();
    for block in &result.content {
        let (part, textual) = render_block(block);
        has_text |= textual;
        parts.push(part);
        if let ContentBlock::Image(image) = block
            && let Some(image) = readable_image(&image.data, &image.mime_type)
        {
            images.push(image);
        }
    }
    if !has_text && let Some(value) = &structured {
        parts.push(value.to_string());
    }
    let text = parts.join("\n");

    if result.is_error == Some(true) {
        return Err(ToolError::Failed(if text.is_empty() {
            "the tool reported an error without a message".to_owned()
        } else {
            text
        }));
    }
    Ok(ToolOutput {
        text,
        structured,
        usage: None,
        cost_usd,
        images,
    })
}

/// An image block as an attachment of the result, when it is one a model reads (the same
/// limits as a user's, `[agent.attachments]` defaults); else the placeholder alone stays.
fn readable_image(data: &str, mime_type: &str) -> Option<Attachment> {
    let url = format!("data:{mime_type};base64,{data}");
    let image = attachments::admit_url(&url, None, None, &AttachmentSettings::default()).ok()?;
    image.is_image().then_some(image)
}

/// The text of one block: its text, or a short placeholder.
pub(crate) fn block_text(block: &ContentBlock) -> String {
    render_block(block).0
}

/// The text of one block, and whether it is real text rather than a placeholder.
fn render_block(block: &ContentBlock) -> (String, bool) {
    match block {
        ContentBlock::Text(text) => (text.text.clone(), true),
        ContentBlock::Image(image) => (format!("[image: {}]", image.mime_type), false),
        ContentBlock::Audio(audio) => (format!("[audio: {}]", audio.mime_type), false),
        ContentBlock::Resource(embedded) => match &embedded.resource {
            ResourceContents::TextResourceContents { text, .. } => (text.clone(), true),
            ResourceContents::BlobResourceContents { uri, mime_type, .. } => (
                match mime_type {
                    Some(mime_type) => format!("[resource: {uri} ({mime_type})]"),
                    None => format!("[resource: {uri}]"),
                },
                false,
            ),
            _ => ("[resource]".to_owned(), false),
        },
        ContentBlock::ResourceLink(link) => (format!("[resource link: {}]", link.uri), false),
        // `ContentBlock` is non-exhaustive: a kind added by a later rmcp still reaches the model.
        _ => ("[unsupported content]".to_owned(), false),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn text_blocks_are_joined_by_newlines() {
        let result =
            CallToolResult::success(vec![ContentBlock::text("one"), ContentBlock::text("two")]);
        assert_eq!(tool_output(result), Ok(ToolOutput::text("one\ntwo")));
    }

    #[test]
    fn other_blocks_become_placeholders_or_their_text() {
        let result = CallToolResult::success(vec![
            ContentBlock::image("aGk=", "image/png"),
            ContentBlock::audio("aGk=", "audio/wav"),
            ContentBlock::embedded_text("file:///a.txt", "file text"),
            ContentBlock::resource(ResourceContents::BlobResourceContents {
                uri: "file:///a.bin".to_owned(),
                mime_type: Some("application/octet-stream".to_owned()),
                blob: "AA==".to_owned(),
                meta: None,
            }),
        ]);
        assert_eq!(
            tool_output(result).unwrap().text,
            "[image: image/png]\n[audio: audio/wav]\nfile text\n\
             [resource: file:///a.bin (application/octet-stream)]"
        );
    }

    #[test]
    fn an_image_a_model_reads_is_kept_as_an_image_of_the_result() {
        // A 1×1 PNG, and "hi" claiming to be one.
        let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAACklEQVR4nGMAAQAABQABDQottAAAAABJRU5ErkJggg==";
        let result = CallToolResult::success(vec![
            ContentBlock::text("the chart"),
            ContentBlock::image(png, "image/png"),
            ContentBlock::image("aGk=", "image/png"),
        ]);
        let output = tool_output(result).unwrap();
        assert_eq!(
            output.text,
            "the chart\n[image: image/png]\n[image: image/png]"
        );
        assert_eq!(output.images.len(), 1);
        assert_eq!(output.images[0].media_type, "image/png");
        assert_eq!(output.images[0].size, 67);
        assert!(output.images[0].data.is_some());
    }

    #[test]
    fn structured_content_is_kept_and_stands_in_for_missing_text() {
        let weather = json!({"temperature": 33, "conditions": "Cloudy"});

        let mut with_text = CallToolResult::success(vec![ContentBlock::text("33 and cloudy")]);
        with_text.structured_content = Some(weather.clone());
        let output = tool_output(with_text).unwrap();
        assert_eq!(output.text, "33 and cloudy");
        assert_eq!(output.structured, Some(weather.clone()));

        let mut only_structured = CallToolResult::structured(weather.clone());
        only_structured.content.clear();
        assert_eq!(tool_output(only_structured), Ok(ToolOutput::json(weather)));
    }

    #[test]
    fn a_cost_in_meta_is_the_calls_cost_and_nonsense_is_ignored() {
        let mut result = CallToolResult::success(vec![ContentBlock::text("4 docs")]);
        let meta = |value: serde_json::Value| {
            let mut object = serde_json::Map::new();
            object.insert(COST_META_KEY.to_owned(), value);
            Some(rmcp::model::MetaObject(object))
        };
        result.meta = meta(json!(0.0023));
        assert_eq!(tool_output(result.clone()).unwrap().cost_usd, Some(0.0023));
        result.meta = meta(json!("cheap"));
        assert_eq!(tool_output(result.clone()).unwrap().cost_usd, None);
        result.meta = meta(json!(-1));
        assert_eq!(tool_output(result.clone()).unwrap().cost_usd, None);
        result.meta = None;
        assert_eq!(tool_output(result).unwrap().cost_usd, None);
    }

    #[test]
    fn is_error_becomes_a_failure_with_the_text() {
        let result = CallToolResult::error(vec![ContentBlock::text("disk full")]);
        assert_eq!(
            tool_output(result),
            Err(ToolError::Failed("disk full".to_owned()))
        );

        let silent = CallToolResult::error(Vec::new());
        assert!(matches!(tool_output(silent), Err(ToolError::Failed(m)) if !m.is_empty()));
    }
}
