//! Resources and prompts of agentloop-test-mcp (a real child process) through `McpSource`, and
//! the `mcp.read_resource` tool over it.
#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};

use agentloop_core::{ToolContext, ToolError, ToolSource};
use agentloop_mcp::{
    McpPromptMessage, McpPromptRole, McpServerConfig, McpSource, READ_RESOURCE_SOURCE, ReadResource,
};
use agentloop_test_support::mcp::{
    server::{GREETING_TEXT, GREETING_URI, LOGO_URI},
    test_mcp_server_path,
};
use serde_json::json;

async fn connect() -> McpSource {
    let config = McpServerConfig::new(test_mcp_server_path().to_string_lossy());
    McpSource::connect("test", &config).await.unwrap()
}

#[tokio::test]
async fn resources_and_templates_are_listed_and_read() {
    let source = connect().await;
    assert!(source.offers_resources().await);

    let resources = source.resources().await.unwrap();
    let uris: Vec<&str> = resources
        .iter()
        .map(|resource| resource.uri.as_str())
        .collect();
    assert_eq!(uris, [GREETING_URI, LOGO_URI]);
    assert_eq!(resources[0].title.as_deref(), Some("A greeting"));
    assert_eq!(resources[1].mime_type.as_deref(), Some("image/png"));

    let templates = source.resource_templates().await.unwrap();
    assert_eq!(templates.len(), 1);
    assert_eq!(templates[0].uri_template, "note://{name}");

    let greeting = source.read_resource(GREETING_URI).await.unwrap();
    assert_eq!(greeting.len(), 1);
    assert_eq!(greeting[0].text.as_deref(), Some(GREETING_TEXT));
    assert_eq!(greeting[0].as_text(), GREETING_TEXT);

    // Binary content is named, with its size, not shown.
    let logo = source.read_resource(LOGO_URI).await.unwrap();
    assert_eq!(logo[0].text, None);
    assert_eq!(logo[0].blob_bytes, Some(4));
    assert_eq!(
        logo[0].as_text(),
        "[binary resource blob://logo (image/png, 4 bytes), not shown]"
    );

    // A templated one, and one that does not exist.
    let note = source.read_resource("note://shopping").await.unwrap();
    assert_eq!(note[0].as_text(), "note shopping");
    match source.read_resource("nowhere://x").await {
        Err(ToolError::Failed(message)) => assert!(message.contains("no resource"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    source.shutdown().await;
}

#[tokio::test]
async fn prompts_are_listed_and_fetched_with_their_arguments() {
    let source = connect().await;
    assert!(source.offers_prompts().await);

    let prompts = source.prompts().await.unwrap();
    assert_eq!(prompts.len(), 1);
    assert_eq!(prompts[0].name, "summarize");
    assert_eq!(prompts[0].arguments.len(), 1);
    assert_eq!(prompts[0].arguments[0].name, "topic");
    assert!(prompts[0].arguments[0].required);

    let arguments = json!({"topic": "tides"}).as_object().cloned().unwrap();
    let messages = source.prompt("summarize", arguments).await.unwrap();
    assert_eq!(
        messages,
        [
            McpPromptMessage {
                role: McpPromptRole::Assistant,
                text: "What shall I summarize?".to_owned(),
            },
            McpPromptMessage {
                role: McpPromptRole::User,
                text: "Summarize what you know about tides.".to_owned(),
            },
        ]
    );
    match source.prompt("summarize", serde_json::Map::new()).await {
        Err(ToolError::Failed(message)) => assert!(message.contains("topic"), "{message}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    source.shutdown().await;
}

#[tokio::test]
async fn the_read_resource_tool_reads_a_servers_resource() {
    let source = Arc::new(connect().await);
    let servers = Arc::new(Mutex::new(Vec::new()));
    let reader = ReadResource::new(servers.clone());
    assert_eq!(reader.name(), READ_RESOURCE_SOURCE);
    // Not offered while no server has resources.
    assert!(reader.tools().await.unwrap().is_empty());

    let changes = reader.changes().unwrap();
    servers.lock().unwrap().push(source.clone());
    reader.joined();
    assert!(changes.has_changed().unwrap());
    let tools = reader.tools().await.unwrap();
    assert_eq!(tools.len(), 1);
    let tool = &tools[0];
    let info = tool.info();
    assert_eq!(info.name, "mcp.read_resource");
    assert_eq!(info.read_only_hint, Some(true));
    assert_eq!(
        info.input_schema["properties"]["server"]["enum"],
        json!(["test"])
    );
    assert!(info.description.contains("Servers with resources: test"));

    let read = tool
        .call(
            json!({"server": "test", "uri": GREETING_URI}),
            ToolContext::default(),
        )
        .await
        .unwrap();
    assert_eq!(read.text, GREETING_TEXT);
    let unknown = tool
        .call(
            json!({"server": "other", "uri": GREETING_URI}),
            ToolContext::default(),
        )
        .await;
    assert!(
        matches!(unknown, Err(ToolError::InvalidArguments(_))),
        "{unknown:?}"
    );
    source.shutdown().await;
}
