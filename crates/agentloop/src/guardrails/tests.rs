#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::time::Duration;

use agentloop_core::guardrail::{Decision, Guardrail, GuardrailRequest, GuardrailSide};
use agentloop_test_support::webhook::RecordingWebhook;
use serde_json::json;
use uuid::Uuid;

use super::*;

fn parse(toml_text: &str) -> Vec<GuardrailConfig> {
    #[derive(Deserialize)]
    struct File {
        guardrails: Vec<GuardrailConfig>,
    }
    toml::from_str::<File>(toml_text).unwrap().guardrails
}

fn key_of(toml_text: &str) -> String {
    validate(&parse(toml_text)).unwrap_err().key
}

#[test]
fn the_tables_are_read_with_their_defaults() {
    let configs = parse(
        "[[guardrails]]\nname = \"pii\"\nkind = \"regex\"\non = \"input\"\ndeny = [\"\\\\d{3}-\\\\d{2}\"]\n\
         [[guardrails]]\nname = \"tone\"\nkind = \"llm\"\non = \"output\"\naction = \"retry\"\nprompt = \"polite\"\n",
    );
    validate(&configs).unwrap();
    assert_eq!(configs[0].action, GuardrailAction::Block);
    assert_eq!(configs[0].fail, FailMode::Closed);
    let rule = configs[1].rule();
    assert_eq!(
        (rule.action, rule.retries),
        (GuardrailAction::Retry, DEFAULT_RETRIES)
    );
}

#[test]
fn bad_tables_are_refused_naming_the_key() {
    let base = "[[guardrails]]\nname = \"g\"\n";
    assert_eq!(
        key_of("[[guardrails]]\nkind = \"regex\"\ndeny = [\"x\"]\n"),
        "guardrails[0].name"
    );
    assert_eq!(
        key_of(&format!("{base}deny = [\"(\"]\n")),
        "guardrails[0].deny"
    );
    assert_eq!(key_of(base), "guardrails[0].deny");
    assert_eq!(
        key_of(&format!("{base}kind = \"webhook\"\n")),
        "guardrails[0].url"
    );
    assert_eq!(
        key_of(&format!("{base}kind = \"llm\"\n")),
        "guardrails[0].prompt"
    );
    assert_eq!(
        key_of(&format!("{base}deny = [\"x\"]\naction = \"retry\"\n")),
        "guardrails[0].action"
    );
    assert_eq!(
        key_of(&format!("{base}deny = [\"x\"]\ntimeout_s = 0\n")),
        "guardrails[0].timeout_s"
    );
    assert_eq!(
        key_of(&format!("{base}deny = [\"x\"]\n{base}deny = [\"y\"]\n")),
        "guardrails[0].name"
    );
    #[derive(Debug, Deserialize)]
    #[allow(dead_code)]
    struct File {
        guardrails: Vec<GuardrailConfig>,
    }
    assert!(toml::from_str::<File>(&format!("{base}denny = [\"x\"]\n")).is_err());
}

fn request(text: &str) -> GuardrailRequest<'_> {
    GuardrailRequest::new(
        GuardrailSide::Output,
        text,
        Uuid::from_u128(1),
        Uuid::from_u128(2),
    )
    .user(Some("ann"))
}

fn hook(url: &str, timeout: Duration) -> WebhookGuardrail {
    WebhookGuardrail::new(reqwest::Client::new(), url.to_string(), timeout)
}

#[tokio::test]
async fn a_webhook_is_sent_the_check_and_its_answer_decides() {
    let webhook = RecordingWebhook::start(|body| {
        if body["text"].as_str().unwrap_or_default().contains("bad") {
            (200, json!({"allow": false, "reason": "not allowed here"}))
        } else {
            (200, json!({"allow": true}))
        }
    })
    .await;
    let guard = hook(webhook.url(), Duration::from_secs(10));
    assert_eq!(
        guard.check(&request("fine")).await.unwrap(),
        Decision::Allow
    );
    assert_eq!(
        guard.check(&request("a bad one")).await.unwrap(),
        Decision::Trip {
            reason: "not allowed here".into()
        }
    );
    let body = &webhook.received()[0];
    assert_eq!(body["on"], "output");
    assert_eq!(body["text"], "fine");
    assert_eq!(body["run_id"], json!(Uuid::from_u128(1)));
    assert_eq!(body["session_id"], json!(Uuid::from_u128(2)));
    assert_eq!(body["user"], "ann");
}

#[tokio::test]
async fn a_webhook_that_fails_or_answers_otherwise_is_an_error_not_a_verdict() {
    let failing = RecordingWebhook::start(|_| (500, json!({"allow": true}))).await;
    let error = hook(failing.url(), Duration::from_secs(10))
        .check(&request("x"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("HTTP 500"), "{error}");

    let odd = RecordingWebhook::start(|_| (200, json!({"ok": true}))).await;
    let error = hook(odd.url(), Duration::from_secs(10))
        .check(&request("x"))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("allow"), "{error}");

    // Refused connections: a port nothing listens on.
    let closed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", closed.local_addr().unwrap());
    drop(closed);
    assert!(
        hook(&url, Duration::from_secs(10))
            .check(&request("x"))
            .await
            .is_err()
    );
}

/// A server that takes connections and never answers.
pub(crate) async fn silent_server() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    (url, task)
}

#[tokio::test]
async fn a_webhook_that_never_answers_times_out_as_an_error() {
    let (url, server) = silent_server().await;
    let error = hook(&url, Duration::from_millis(200))
        .check(&request("x"))
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("did not answer within"),
        "{error}"
    );
    server.abort();
}
