//! Attachments over HTTP (`POST /v1/runs`): an image by data URL reaches the model and is
//! served back by its hash; an `https` URL goes to the model as a URL; attachments too large,
//! too many, of a type their content does not have or the model cannot read are refused with
//! 413 or 400 and leave nothing in the store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::Store;
use agentloop::core::attachments::{base64_of, sha256_hex};
use agentloop_test_support::scripted_llm::Reply;
use common::*;
use serde_json::{Value, json};

/// The smallest PNG: a 1×1 transparent pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

fn png_url() -> String {
    format!("data:image/png;base64,{}", base64_of(PNG))
}

fn data_url(media_type: &str, bytes: &[u8]) -> String {
    format!("data:{media_type};base64,{}", base64_of(bytes))
}

/// The content parts of the last user message of a recorded Chat Completions request.
fn question_parts(request: &Value) -> Vec<Value> {
    let messages = request["messages"].as_array().unwrap();
    let question = messages.iter().rev().find(|m| m["role"] == "user").unwrap();
    question["content"].as_array().cloned().unwrap_or_default()
}

#[tokio::test]
async fn an_image_reaches_the_model_and_is_served_back_by_its_hash() {
    let server = TestServer::start(vec![Reply::text("A dot.")], "").await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({
            "query": "What is this?",
            "stream": false,
            "attachments": [
                {"url": png_url(), "name": "dot.png"},
                {"url": "https://example.com/scan.pdf"},
            ],
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let run: Value = response.json().await.unwrap();
    assert_eq!(run["answer"], "A dot.");

    let parts = question_parts(&server.llm.requests()[0]);
    assert_eq!(parts[0], json!({"type": "text", "text": "What is this?"}));
    assert_eq!(parts[1]["image_url"]["url"], png_url());
    // Chat Completions takes no file by URL: the model is told of it; agentloop fetched nothing.
    assert_eq!(
        parts[2]["text"],
        "[attachment: https://example.com/scan.pdf, application/pdf, https://example.com/scan.pdf]"
    );

    let hash = sha256_hex(PNG);
    let session = run["session_id"].as_str().unwrap();
    let details: Value = server
        .get(&format!("/v1/sessions/{session}"), &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let attachments = &details["messages"][0]["attachments"];
    assert_eq!(
        attachments[0],
        json!({"media_type": "image/png", "name": "dot.png", "size": PNG.len(), "sha256": hash})
    );
    let served = server
        .get(&format!("/v1/attachments/{hash}"), &key)
        .send()
        .await
        .unwrap();
    assert_eq!(served.status(), 200);
    assert_eq!(served.headers()["content-type"], "image/png");
    assert_eq!(served.bytes().await.unwrap().as_ref(), PNG);
    let (status, error) = error_of(
        server
            .get(&format!("/v1/attachments/{}", "0".repeat(64)), &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!((status, error["code"].as_str()), (404, Some("not_found")));
    let (status, _) = error_of(
        server
            .get("/v1/attachments/not-a-hash", &key)
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 400);
    server.shutdown().await;
}

#[tokio::test]
async fn refused_attachments_are_413_or_400_and_leave_nothing_stored() {
    let server = TestServer::start(
        vec![Reply::text("never asked")],
        "[agent.attachments]\nmax_bytes = 100\nmax_total_bytes = 120\nmax_count = 2",
    )
    .await;
    let key = server.key("ann").await;
    let text = |n: usize| data_url("text/plain", &vec![b'a'; n]);
    let cases = [
        (
            json!([{"url": text(101)}]),
            413,
            "attachment_too_large",
            Some("agent.attachments.max_bytes"),
        ),
        (
            json!([{"url": text(70)}, {"url": text(70)}]),
            413,
            "attachment_too_large",
            Some("agent.attachments.max_total_bytes"),
        ),
        (
            json!([{"url": png_url()}, {"url": png_url()}, {"url": png_url()}]),
            413,
            "too_many_attachments",
            Some("agent.attachments.max_count"),
        ),
        // The name and the declared type say JPEG; the bytes are a PNG.
        (
            json!([{"url": png_url(), "media_type": "image/jpeg", "name": "dot.jpg"}]),
            400,
            "attachment_type",
            None,
        ),
        (
            json!([{"url": data_url("image/jpeg", PNG)}]),
            400,
            "attachment_type",
            None,
        ),
        // A zip archive: no model reads it.
        (
            json!([{"url": data_url("application/zip", b"PK\x03\x04zipped")}]),
            400,
            "attachment_type",
            None,
        ),
        (
            json!([{"url": "http://example.com/a.png"}]),
            400,
            "invalid_attachment",
            None,
        ),
        (
            json!([{"url": "data:image/png;base64,%%%"}]),
            400,
            "invalid_attachment",
            None,
        ),
    ];
    for (attachments, status, code, limit) in cases {
        let response = server
            .post("/v1/runs", &key)
            .json(&json!({"query": "look", "stream": false, "attachments": attachments}))
            .send()
            .await
            .unwrap();
        let (got, error) = error_of(response).await;
        assert_eq!(
            (got, error["code"].as_str().unwrap()),
            (status, code),
            "{error}"
        );
        assert_eq!(error["details"]["field"], "attachments");
        if let Some(limit) = limit {
            assert_eq!(error["details"]["limit"], limit);
            assert!(
                error["message"].as_str().unwrap().contains(limit),
                "{error}"
            );
        }
    }
    // Nothing reached the model, and nothing was stored: no session, no run, no bytes.
    assert!(server.llm.requests().is_empty());
    let sessions: Value = server
        .get("/v1/sessions", &key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(sessions["sessions"], json!([]), "{sessions}");
    assert_eq!(
        server.store.attachment(&sha256_hex(PNG)).await.unwrap(),
        None
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_text_only_model_refuses_attachments_when_configured_to() {
    let server = TestServer::start(
        vec![Reply::text("never asked")],
        "[agent.attachments]\nmodel = \"refuse\"",
    )
    .await;
    let key = server.key("ann").await;
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "look", "stream": false, "attachments": [{"url": png_url()}]}))
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(response).await;
    assert_eq!(
        (status, error["code"].as_str().unwrap()),
        (400, "attachments_unsupported")
    );
    assert!(server.llm.requests().is_empty());
    server.shutdown().await;
}

/// A body with attachments may be larger than `server.max_body_bytes` (1 MiB by default), up to
/// the attachments' own limit in base64; a body without may not.
#[tokio::test]
async fn a_body_with_attachments_may_be_as_large_as_they_may_be() {
    let server = TestServer::start(vec![Reply::text("Long.")], "").await;
    let key = server.key("ann").await;
    let large = data_url("text/plain", &vec![b'a'; 1_500_000]);
    let response = server
        .post("/v1/runs", &key)
        .json(&json!({"query": "read it", "stream": false, "attachments": [{"url": large}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let parts = question_parts(&server.llm.requests()[0]);
    assert!(parts[1]["text"].as_str().unwrap().len() > 1_500_000);
    server.shutdown().await;
}

/// The AI SDK's `file` parts (the wire shape `useChat` sends for `sendMessage({files})`): a
/// data URL and its `mediaType`, a `filename`.
#[tokio::test]
async fn the_ai_sdk_file_parts_are_the_messages_attachments() {
    let server = TestServer::start(vec![Reply::text("A dot."), Reply::text("x")], "").await;
    let key = server.key("ann").await;
    let body = |parts: Value| {
        json!({"id": "chat-1", "trigger": "submit-message",
            "messages": [{"id": "m1", "role": "user", "parts": parts}]})
    };
    let response = server
        .post("/v1/chat", &key)
        .json(&body(json!([
            {"type": "file", "mediaType": "image/png", "filename": "dot.png", "url": png_url()},
            {"type": "text", "text": "What is this?"},
        ])))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stream = response.text().await.unwrap();
    assert!(stream.contains("A dot."), "{stream}");
    let parts = question_parts(&server.llm.requests()[0]);
    assert_eq!(parts[0]["text"], "What is this?");
    assert_eq!(parts[1]["image_url"]["url"], png_url());
    // A file whose content is not what its part says: refused before any run.
    let lying = server
        .post("/v1/chat", &key)
        .json(
            &json!({"id": "chat-2", "trigger": "submit-message", "messages": [{"id": "m2",
            "role": "user", "parts": [{"type": "file", "mediaType": "application/pdf",
            "url": png_url()}, {"type": "text", "text": "read"}]}]}),
        )
        .send()
        .await
        .unwrap();
    let (status, error) = error_of(lying).await;
    assert_eq!(
        (status, error["code"].as_str()),
        (400, Some("attachment_type"))
    );
    assert_eq!(server.llm.requests().len(), 1);
    server.shutdown().await;
}

/// AG-UI's multimodal user content: a `binary` part (base64 `data`, `mimeType`) and an
/// `image` part with a `url` source.
#[tokio::test]
async fn ag_ui_binary_and_image_content_are_the_messages_attachments() {
    let server = TestServer::start(vec![Reply::text("Two dots.")], "").await;
    let key = server.key("ann").await;
    let input = json!({
        "threadId": "thread-1", "runId": uuid::Uuid::now_v7().to_string(),
        "tools": [], "context": [], "state": {}, "forwardedProps": {},
        "messages": [{"id": "u1", "role": "user", "content": [
            {"type": "text", "text": "Compare these."},
            {"type": "binary", "mimeType": "image/png", "data": base64_of(PNG),
                "filename": "dot.png"},
            {"type": "image", "source": {"type": "url", "value": "https://example.com/b.webp"}},
        ]}],
    });
    let response = server
        .post("/v1/ag-ui", &key)
        .json(&input)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let stream = response.text().await.unwrap();
    assert!(stream.contains("RUN_FINISHED"), "{stream}");
    let parts = question_parts(&server.llm.requests()[0]);
    assert_eq!(parts[0]["text"], "Compare these.");
    assert_eq!(parts[1]["image_url"]["url"], png_url());
    assert_eq!(parts[2]["image_url"]["url"], "https://example.com/b.webp");
    server.shutdown().await;
}
