//! Attachments through the whole loop, over each provider's wire format: an image of the
//! question reaches the model in the provider's own form, a later run of the session still
//! sends it (read back from the store by its hash), and a text-only model is shown a note.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::core::attachments::{AttachmentSettings, admit_bytes, base64_of};
use agentloop::{Config, ConfigOrigin};
use agentloop::{RunRequest, RunStatus, Runtime, Store};
use agentloop_test_support::config::TestConfig;
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm, Wire};
use common::config_with_store;
use serde_json::{Value, json};
use uuid::Uuid;

/// The smallest PNG: a 1×1 transparent pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

macro_rules! per_wire {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[tokio::test]
            async fn chat_completions() {
                super::$name(super::Wire::ChatCompletions).await
            }
            #[tokio::test]
            async fn responses() {
                super::$name(super::Wire::Responses).await
            }
            #[tokio::test]
            async fn anthropic() {
                super::$name(super::Wire::Anthropic).await
            }
        }
    )*};
}

per_wire!(
    an_image_reaches_the_model_in_its_own_form_and_later_runs_of_the_session_see_it,
    an_image_a_tool_returns_reaches_the_next_request_in_the_providers_form,
);

/// The images of the user messages of a recorded request, each as its provider writes it: the
/// data URL (OpenAI) or the base64 data (Anthropic).
fn user_images(request: &Value, wire: Wire) -> Vec<String> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let items = match wire {
        Wire::Responses => &request["input"],
        _ => &request["messages"],
    };
    let mut images = Vec::new();
    for message in items.as_array().unwrap() {
        if message["role"] != "user" {
            continue;
        }
        for part in message["content"].as_array().into_iter().flatten() {
            match (wire, part["type"].as_str()) {
                (Wire::ChatCompletions, Some("image_url")) => {
                    images.push(text(&part["image_url"]["url"]))
                }
                (Wire::Responses, Some("input_image")) => images.push(text(&part["image_url"])),
                (Wire::Anthropic, Some("image")) => {
                    assert_eq!(part["source"]["type"], "base64");
                    assert_eq!(part["source"]["media_type"], "image/png");
                    images.push(text(&part["source"]["data"]))
                }
                _ => {}
            }
        }
    }
    images
}

async fn runtime(llm: &ScriptedLlm, store_url: &str, extra: &str) -> Runtime {
    let config = config_with_store(llm, None, store_url, extra);
    Runtime::start(&config).await.expect("runtime starts")
}

async fn an_image_reaches_the_model_in_its_own_form_and_later_runs_of_the_session_see_it(
    wire: Wire,
) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![Reply::text("A dot."), Reply::text("Still a dot.")],
    )
    .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let runtime = runtime(&llm, &url, "").await;
    let image = admit_bytes(
        PNG.to_vec(),
        Some("image/png"),
        Some("dot.png".into()),
        &AttachmentSettings::default(),
    )
    .unwrap();
    let session_id = Uuid::now_v7();
    let first = RunRequest {
        query: "What is in this picture?".into(),
        attachments: vec![image.clone()],
        session_id: Some(session_id),
        ..RunRequest::default()
    };
    let (_, outcome) = runtime.agent().run(first).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let later = RunRequest {
        query: "And now?".into(),
        session_id: Some(session_id),
        ..RunRequest::default()
    };
    let (_, outcome) = runtime.agent().run(later).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");

    let expected = match wire {
        Wire::Anthropic => base64_of(PNG),
        _ => format!("data:image/png;base64,{}", base64_of(PNG)),
    };
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        user_images(&requests[0], wire),
        std::slice::from_ref(&expected)
    );
    // The second run read the image from the store: its bytes came back by their hash.
    assert_eq!(user_images(&requests[1], wire), [expected]);
    let stored = runtime.store();
    let hash = image.sha256.as_deref().unwrap();
    let (media_type, bytes) = stored.attachment(hash).await.unwrap().unwrap();
    assert_eq!((media_type.as_str(), bytes.as_slice()), ("image/png", PNG));
    // The session's listing names the image without its bytes.
    let messages = stored.messages(session_id).await.unwrap();
    assert_eq!(
        messages[0].message.attachments[0].sha256.as_deref(),
        Some(hash)
    );
    assert_eq!(messages[0].message.attachments[0].data, None);
}

#[tokio::test]
async fn a_text_only_model_is_shown_a_note_in_place_of_the_image() {
    let llm = ScriptedLlm::start(vec![Reply::text("I cannot see it.")]).await;
    let runtime = runtime(
        &llm,
        "sqlite::memory:",
        "[agent.attachments]\nmodel = \"note\"",
    )
    .await;
    let image = admit_bytes(
        PNG.to_vec(),
        None,
        Some("dot.png".into()),
        &AttachmentSettings::default(),
    )
    .unwrap();
    let request = RunRequest {
        query: "What is this?".into(),
        attachments: vec![image],
        ..RunRequest::default()
    };
    let (_, outcome) = runtime.agent().run(request).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let sent = &llm.requests()[0]["messages"];
    let question = sent.as_array().unwrap().last().unwrap();
    assert_eq!(
        question["content"],
        format!(
            "What is this?\n[attachment: dot.png, image/png, {} bytes]",
            PNG.len()
        )
    );
}

/// The images of the tool results of a recorded request, in the form each provider takes for
/// tool results: Anthropic `image` blocks inside `tool_result`, Responses `input_image` in the
/// `function_call_output`, Chat Completions (whose tool messages hold text only) a user message
/// right after the tool messages.
fn tool_result_images(request: &Value, wire: Wire) -> Vec<String> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    let mut images = Vec::new();
    match wire {
        Wire::Anthropic => {
            for message in request["messages"].as_array().unwrap() {
                for block in message["content"].as_array().into_iter().flatten() {
                    if block["type"] != "tool_result" {
                        continue;
                    }
                    for part in block["content"].as_array().into_iter().flatten() {
                        if part["type"] == "image" {
                            images.push(text(&part["source"]["data"]));
                        }
                    }
                }
            }
        }
        Wire::Responses => {
            for item in request["input"].as_array().unwrap() {
                if item["type"] != "function_call_output" {
                    continue;
                }
                for part in item["output"].as_array().into_iter().flatten() {
                    if part["type"] == "input_image" {
                        images.push(text(&part["image_url"]));
                    }
                }
            }
        }
        Wire::ChatCompletions => {
            let messages = request["messages"].as_array().unwrap();
            for pair in messages.windows(2) {
                if pair[0]["role"] != "tool" || pair[1]["role"] != "user" {
                    continue;
                }
                for part in pair[1]["content"].as_array().into_iter().flatten() {
                    if part["type"] == "image_url" {
                        images.push(text(&part["image_url"]["url"]));
                    }
                }
            }
        }
    }
    images
}

/// The reference server's `get-tiny-image` answers text, a PNG (the MCP logo) and text.
async fn an_image_a_tool_returns_reaches_the_next_request_in_the_providers_form(wire: Wire) {
    if !agentloop_test_support::requires::mcp_reference_servers() {
        return;
    }
    let (command, args) = agentloop_test_support::mcp::reference_server_everything();
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("everything__get-tiny-image", json!({})),
            Reply::text("It is the MCP logo."),
        ],
    )
    .await;
    let extra = format!(
        "[mcp_servers.everything]\ncommand = {}\nargs = {}\nstartup_timeout_s = 60\n",
        json!(command),
        json!(args)
    );
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let runtime = runtime(&llm, &url, &extra).await;
    let (_, outcome) = runtime
        .agent()
        .run(RunRequest::new("Show me the logo"))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    let requests = llm.requests();
    let images = tool_result_images(&requests[1], wire);
    assert_eq!(images.len(), 1, "{}", requests[1]);
    let data = images[0]
        .strip_prefix("data:image/png;base64,")
        .unwrap_or(&images[0]);
    assert!(
        data.starts_with("iVBORw0KGgo") && data.len() > 1000,
        "{data}"
    );
    // The record keeps the text with the image named; the session's tool message carries the
    // image's reference, and the store its bytes.
    let record = outcome.records[0].result.as_deref().unwrap();
    assert!(record.contains("[image: image/png]"), "{record}");
    let messages = runtime.store().messages(outcome.session_id).await.unwrap();
    let tool = messages
        .iter()
        .find(|message| !message.message.attachments.is_empty())
        .expect("the tool message carries the image");
    let hash = tool.message.attachments[0].sha256.as_deref().unwrap();
    assert!(runtime.store().attachment(hash).await.unwrap().is_some());
    runtime.shutdown().await;
}

/// A cassette keeps a request's attachments as references (type, size, hash), never their
/// bytes: a replay of the same image matches, one of another image is refused at its hash.
#[tokio::test]
async fn a_cassette_records_attachments_by_hash_and_a_replay_checks_them() {
    let llm = ScriptedLlm::start(vec![Reply::text("A dot.")]).await;
    let dir = tempfile::tempdir().unwrap();
    let cassette = dir.path().join("run.cassette.json");
    let start = |line: String| {
        let text = TestConfig::new(&llm.base_url())
            .llm(&line)
            .store("sqlite::memory:")
            .toml();
        async move {
            let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
            Runtime::start(&config).await.unwrap()
        }
    };
    let ask = |data: Vec<u8>| RunRequest {
        query: "What is this?".into(),
        attachments: vec![admit_bytes(data, None, None, &AttachmentSettings::default()).unwrap()],
        ..RunRequest::default()
    };
    let path = json!(cassette.display().to_string());
    let recording = start(format!("record = {path}")).await;
    let (_, outcome) = recording
        .agent()
        .run(ask(PNG.to_vec()))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    recording.shutdown().await;
    let saved = std::fs::read_to_string(&cassette).unwrap();
    assert!(saved.contains(&agentloop::core::attachments::sha256_hex(PNG)));
    assert!(!saved.contains(&base64_of(PNG)), "no bytes in the cassette");

    let replaying = start(format!("replay = {path}")).await;
    let (_, same) = replaying
        .agent()
        .run(ask(PNG.to_vec()))
        .collect()
        .await
        .unwrap();
    assert_eq!(same.answer.as_deref(), Some("A dot."));
    replaying.shutdown().await;
    // Each replay reads the cassette from its start.
    let replaying = start(format!("replay = {path}")).await;
    let (_, other) = replaying
        .agent()
        .run(ask(b"another file".to_vec()))
        .collect()
        .await
        .unwrap();
    assert_eq!(other.status, RunStatus::Failed);
    let message = other
        .failure
        .map(|failure| failure.message)
        .unwrap_or_default();
    assert!(message.contains("attachments"), "{message}");
    assert_eq!(llm.requests().len(), 1, "a replay asks no model");
}
