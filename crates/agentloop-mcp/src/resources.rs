//! A server's resources and prompts (MCP `resources/*`, `prompts/*`), in agentloop's own types:
//! listed, read and fetched through [`McpSource`](crate::McpSource).

use rmcp::model::{
    GetPromptRequestParams, JsonObject, ReadResourceRequestParams, ResourceContents, Role,
};
use serde::Serialize;

use agentloop_core::ToolError;

use crate::connection::Connection;

/// A resource a server lists (`resources/list`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpResource {
    pub uri: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// A family of resources a server can read (`resources/templates/list`): `uri_template` is an
/// RFC 6570 URI template.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpResourceTemplate {
    pub uri_template: String,
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
}

/// What a resource holds (`resources/read`): its text, or for binary content its size and a
/// short note in its place.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpResourceContent {
    pub uri: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// The text of a text resource; `None` for a binary one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// The size of a binary resource (its base64 decoded), in bytes.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub blob_bytes: Option<usize>,
}

impl McpResourceContent {
    /// What a model reads of it: the text, or a note naming a binary resource.
    pub fn as_text(&self) -> String {
        match (&self.text, self.blob_bytes) {
            (Some(text), _) => text.clone(),
            (None, bytes) => format!(
                "[binary resource {} ({}, {} bytes), not shown]",
                self.uri,
                self.mime_type.as_deref().unwrap_or("unknown type"),
                bytes.unwrap_or(0)
            ),
        }
    }
}

/// A prompt a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpPrompt {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub arguments: Vec<McpPromptArgument>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpPromptArgument {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub required: bool,
}

/// Who says a message of a prompt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum McpPromptRole {
    User,
    Assistant,
}

/// One message of a prompt (`prompts/get`), as text: other content as a short note.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpPromptMessage {
    pub role: McpPromptRole,
    pub text: String,
}

/// What a server offers besides tools, from its `initialize` answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Offers {
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

pub(crate) async fn offers(connection: &Connection) -> Offers {
    let info = connection
        .request(|peer| async move { Ok(peer.peer_info()) })
        .await
        .ok()
        .flatten();
    info.map(|info| Offers {
        resources: info.capabilities.resources.is_some(),
        prompts: info.capabilities.prompts.is_some(),
    })
    .unwrap_or_default()
}

pub(crate) async fn list_resources(connection: &Connection) -> Result<Vec<McpResource>, ToolError> {
    let listed = connection
        .request(|peer| async move { peer.list_all_resources().await })
        .await?;
    Ok(listed
        .into_iter()
        .map(|resource| McpResource {
            uri: resource.uri.clone(),
            name: resource.name.clone(),
            title: resource.title.clone(),
            description: resource.description.clone(),
            mime_type: resource.mime_type.clone(),
        })
        .collect())
}

pub(crate) async fn list_resource_templates(
    connection: &Connection,
) -> Result<Vec<McpResourceTemplate>, ToolError> {
    let listed = connection
        .request(|peer| async move { peer.list_all_resource_templates().await })
        .await?;
    Ok(listed
        .into_iter()
        .map(|template| McpResourceTemplate {
            uri_template: template.uri_template.clone(),
            name: template.name.clone(),
            title: template.title.clone(),
            description: template.description.clone(),
            mime_type: template.mime_type.clone(),
        })
        .collect())
}

pub(crate) async fn read_resource(
    connection: &Connection,
    uri: &str,
) -> Result<Vec<McpResourceContent>, ToolError> {
    let read = connection
        .request(|peer| {
            let params = ReadResourceRequestParams::new(uri);
            async move { peer.read_resource_once(params).await }
        })
        .await?;
    let rmcp::model::ReadResourceResponse::Complete(read) = read else {
        return Err(ToolError::Failed(
            "the MCP server asked for more input to read the resource, which agentloop does not \
             support yet"
                .to_owned(),
        ));
    };
    Ok(read.contents.into_iter().map(content).collect())
}

fn content(contents: ResourceContents) -> McpResourceContent {
    match contents {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => McpResourceContent {
            uri,
            mime_type,
            text: Some(text),
            blob_bytes: None,
        },
        ResourceContents::BlobResourceContents {
            uri,
            mime_type,
            blob,
            ..
        } => McpResourceContent {
            uri,
            mime_type,
            text: None,
            // Base64: three bytes in four characters, less the padding.
            blob_bytes: Some(decoded_len(&blob)),
        },
        // A kind a later rmcp adds: named, not shown.
        _ => McpResourceContent {
            uri: String::new(),
            mime_type: None,
            text: None,
            blob_bytes: None,
        },
    }
}

/// The size of what base64 `blob` encodes: three bytes in four characters, less the padding.
fn decoded_len(blob: &str) -> usize {
    let padding = blob.bytes().rev().take_while(|byte| *byte == b'=').count();
    (blob.len() / 4 * 3).saturating_sub(padding)
}

pub(crate) async fn list_prompts(connection: &Connection) -> Result<Vec<McpPrompt>, ToolError> {
    let listed = connection
        .request(|peer| async move { peer.list_all_prompts().await })
        .await?;
    Ok(listed
        .into_iter()
        .map(|prompt| McpPrompt {
            name: prompt.name,
            title: prompt.title,
            description: prompt.description,
            arguments: prompt
                .arguments
                .unwrap_or_default()
                .into_iter()
                .map(|argument| McpPromptArgument {
                    name: argument.name,
                    description: argument.description,
                    required: argument.required.unwrap_or(false),
                })
                .collect(),
        })
        .collect())
}

pub(crate) async fn get_prompt(
    connection: &Connection,
    name: &str,
    arguments: JsonObject,
) -> Result<Vec<McpPromptMessage>, ToolError> {
    let got = connection
        .request(|peer| {
            let mut params = GetPromptRequestParams::new(name);
            params.arguments = Some(arguments.clone());
            async move { peer.get_prompt_once(params).await }
        })
        .await?;
    let rmcp::model::GetPromptResponse::Complete(got) = got else {
        return Err(ToolError::Failed(
            "the MCP server asked for more input to get the prompt, which agentloop does not \
             support yet"
                .to_owned(),
        ));
    };
    Ok(got
        .messages
        .into_iter()
        .map(|message| McpPromptMessage {
            role: match message.role {
                Role::Assistant => McpPromptRole::Assistant,
                Role::User => McpPromptRole::User,
            },
            text: crate::result::block_text(&message.content),
        })
        .collect())
}
