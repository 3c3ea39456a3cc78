//! `agentloop run --attach FILE`: the file goes to the model with the question, its type read
//! from its content (not its name); a file no model reads stops the command before any run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, stderr, stdout, write_config};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};

/// The smallest PNG: a 1×1 transparent pixel.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0a, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0x00, 0x01, 0x00, 0x00,
    0x05, 0x00, 0x01, 0x0d, 0x0a, 0x2d, 0xb4, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45, 0x4e, 0x44, 0xae,
    0x42, 0x60, 0x82,
];

#[tokio::test]
async fn run_attach_sends_each_file_with_the_question() {
    let llm = ScriptedLlm::start(vec![Reply::text("A dot and a note.")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    // Named .jpg, but a PNG: the content decides.
    std::fs::write(dir.path().join("photo.jpg"), PNG).unwrap();
    std::fs::write(dir.path().join("note.txt"), "remember the milk").unwrap();
    let output = agentloop(
        dir.path(),
        &[
            "run",
            "--attach",
            "photo.jpg",
            "--attach",
            "note.txt",
            "What are these?",
        ],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "A dot and a note.\n");
    let question = &llm.requests()[0]["messages"][1];
    assert_eq!(question["content"][0]["text"], "What are these?");
    let url = question["content"][1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,iVBORw0KGgo"),
        "{url}"
    );
    let note = question["content"][2]["text"].as_str().unwrap();
    assert!(note.contains("name=\"note.txt\"") && note.contains("remember the milk"));
}

#[tokio::test]
async fn run_attach_refuses_a_file_no_model_reads_before_any_run() {
    let llm = ScriptedLlm::start(vec![Reply::text("never asked")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    std::fs::write(dir.path().join("archive.png"), b"PK\x03\x04zipped").unwrap();
    let output = agentloop(dir.path(), &["run", "--attach", "archive.png", "look"]).await;
    assert!(!output.status.success());
    let message = stderr(&output);
    assert!(message.contains("application/zip"), "{message}");
    assert!(llm.requests().is_empty());
}
