//! Guardrails through the real loop, configured by `[[guardrails]]`: a tripped input guardrail
//! makes no LLM call; an output guardrail sends the model back and a repaired answer completes
//! the run; a blocked answer is kept as blocked and no later run reads it; a webhook that
//! fails or never answers follows `fail`; an `llm` guardrail's verdict is read from the
//! scripted server, its call counted in the run's usage; a run resumed in another process does
//! not check its question again; a typed value is checked like any answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::Arc;

use agentloop::{
    ErrorCode, Event, EventKind, MessageKind, RunRequest, RunStatus, Runtime, Store,
    core::InputAnswer,
};
use agentloop_core::protocol::{GuardrailAction, GuardrailSide, LlmCallPurpose};
use agentloop_test_support::{
    scripted_llm::{Reply, ScriptedLlm},
    webhook::RecordingWebhook,
};
use common::*;
use serde_json::{Value, json};

const NO_SECRETS: &str = "[[guardrails]]\nname = \"no-secrets\"\nkind = \"regex\"\non = \"output\"\n\
                          deny = [\"(?i)password\"]\n";

/// Every text of the LLM requests' messages.
fn texts(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn shown(events: &[agentloop::Event]) -> String {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::AssistantDelta { text } => Some(text.as_str()),
            EventKind::FinalResponse { delta } => Some(delta.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_tripped_input_guardrail_blocks_the_run_without_any_llm_call() {
    let llm = ScriptedLlm::start(vec![Reply::text("never asked")]).await;
    let extra = "[[guardrails]]\nname = \"no-card-numbers\"\nkind = \"regex\"\non = \"input\"\n\
                 deny = [\"\\\\d{4} \\\\d{4} \\\\d{4} \\\\d{4}\"]\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "charge 4111 1111 1111 1111 please").await;

    assert_eq!(llm.requests().len(), 0, "no LLM call");
    assert_eq!(outcome.status, RunStatus::Blocked);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, ErrorCode::Blocked);
    assert!(
        failure.message.contains("no-card-numbers"),
        "{}",
        failure.message
    );
    assert_eq!(
        types(&events),
        [
            "run_started",
            "guardrail_checked",
            "guardrail_tripped",
            "error",
            "done"
        ]
    );
    assert!(matches!(
        find(&events, "guardrail_checked")[0],
        EventKind::GuardrailChecked { name, on: GuardrailSide::Input, allowed: false, .. }
            if name == "no-card-numbers"
    ));
    let info = runtime.store().run(outcome.run_id).await.unwrap().unwrap();
    assert_eq!(info.status, RunStatus::Blocked);
}

#[tokio::test]
async fn a_refused_answer_is_repaired_on_retry_and_never_shown() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("The admin password is hunter2."),
        Reply::text("I cannot share credentials."),
    ])
    .await;
    let extra = format!("{NO_SECRETS}action = \"retry\"\n");
    let runtime = runtime(&llm, None, &extra).await;
    let (events, outcome) = run(&runtime, "What is the admin password?").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("I cannot share credentials.")
    );
    assert_eq!(shown(&events), "I cannot share credentials.");
    assert!(!serde_json::to_string(&events).unwrap().contains("hunter2"));
    let retry = texts(&llm.requests()[1]);
    assert!(
        retry.iter().any(|text| text.contains("hunter2")),
        "the model reads what it wrote"
    );
    assert!(
        retry.last().unwrap().contains("no-secrets"),
        "the reason goes back to the model: {retry:?}"
    );
    assert!(
        find(&events, "guardrail_tripped")
            .iter()
            .any(|event| matches!(
                event,
                EventKind::GuardrailTripped {
                    action: GuardrailAction::Retry,
                    ..
                }
            ))
    );
}

#[tokio::test]
async fn a_blocked_answer_is_kept_as_blocked_and_no_later_run_reads_it() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("The admin password is hunter2."),
        Reply::text("Hello again."),
    ])
    .await;
    let runtime = runtime(&llm, None, NO_SECRETS).await;
    let (events, outcome) = run(&runtime, "What is the admin password?").await;
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert_eq!(outcome.answer, None);
    assert!(!serde_json::to_string(&events).unwrap().contains("hunter2"));

    let store = runtime.store();
    let messages = store.messages(outcome.session_id).await.unwrap();
    let blocked: Vec<_> = messages
        .iter()
        .filter(|message| message.kind == MessageKind::Blocked)
        .collect();
    assert_eq!(blocked.len(), 1);
    assert!(blocked[0].message.text_content().contains("hunter2"));
    assert_eq!(blocked[0].metadata["guardrail"], "no-secrets");

    let next = RunRequest::new("Hi").session(outcome.session_id);
    let (_, second) = runtime.agent().run(next).collect().await.unwrap();
    assert_eq!(second.status, RunStatus::Completed, "{:?}", second.failure);
    let history = texts(&llm.requests()[1]);
    assert!(
        history
            .iter()
            .any(|text| text == "What is the admin password?")
    );
    assert!(
        !history.iter().any(|text| text.contains("hunter2")),
        "{history:?}"
    );
}

/// A webhook guardrail on the question at `url`, failing `fail`.
fn webhook_guardrail(url: &str, fail: &str) -> String {
    format!(
        "[[guardrails]]\nname = \"hook\"\nkind = \"webhook\"\non = \"input\"\nurl = \"{url}\"\n\
         timeout_s = 0.3\nfail = \"{fail}\"\n"
    )
}

async fn status_with(url: &str, fail: &str) -> (RunStatus, Option<String>) {
    let llm = ScriptedLlm::start(vec![Reply::text("Answered.")]).await;
    let runtime = runtime(&llm, None, &webhook_guardrail(url, fail)).await;
    let (events, outcome) = run(&runtime, "Hello").await;
    let error = find(&events, "guardrail_checked")
        .iter()
        .find_map(|event| match event {
            EventKind::GuardrailChecked { error, .. } => error.clone(),
            _ => None,
        });
    (outcome.status, error)
}

#[tokio::test]
async fn a_webhook_guardrail_allows_and_denies() {
    let webhook = RecordingWebhook::start(|body| {
        let allow = !body["text"]
            .as_str()
            .unwrap_or_default()
            .contains("forbidden");
        (200, json!({"allow": allow, "reason": "a forbidden topic"}))
    })
    .await;
    let llm = ScriptedLlm::start(vec![Reply::text("Answered.")]).await;
    let runtime = runtime(&llm, None, &webhook_guardrail(webhook.url(), "closed")).await;
    let (_, allowed) = run(&runtime, "Hello").await;
    assert_eq!(allowed.status, RunStatus::Completed);
    let (_, denied) = run(&runtime, "a forbidden thing").await;
    assert_eq!(denied.status, RunStatus::Blocked);
    assert!(
        denied
            .failure
            .unwrap()
            .message
            .contains("a forbidden topic")
    );
    assert_eq!(
        llm.requests().len(),
        1,
        "the denied question reached no model"
    );
    assert_eq!(webhook.received()[1]["on"], "input");
}

#[tokio::test]
async fn a_webhook_that_never_answers_follows_fail() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    let (open, error) = status_with(&url, "open").await;
    assert_eq!(open, RunStatus::Completed);
    assert!(error.unwrap().contains("did not answer"));
    let (closed, _) = status_with(&url, "closed").await;
    assert_eq!(closed, RunStatus::Blocked);
    server.abort();
}

#[tokio::test]
async fn a_webhook_answering_500_follows_fail() {
    let webhook = RecordingWebhook::start(|_| (500, json!({"error": "down"}))).await;
    let (open, error) = status_with(webhook.url(), "open").await;
    assert_eq!(open, RunStatus::Completed);
    assert!(error.unwrap().contains("HTTP 500"));
    let (closed, _) = status_with(webhook.url(), "closed").await;
    assert_eq!(closed, RunStatus::Blocked);
}

fn llm_guardrail(fail: &str) -> String {
    format!(
        "[[guardrails]]\nname = \"on-topic\"\nkind = \"llm\"\non = \"input\"\nmodel = \"judge\"\n\
         prompt = \"The request is about cooking.\"\nfail = \"{fail}\"\n"
    )
}

#[tokio::test]
async fn an_llm_guardrail_verdict_decides_and_its_call_is_counted() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(r#"{"allow": false, "reason": "not about cooking"}"#).with_usage(40, 6),
    ])
    .await;
    let first = runtime(&llm, None, &llm_guardrail("closed")).await;
    let (events, outcome) = run(&first, "Fix my car").await;
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert!(
        outcome
            .failure
            .unwrap()
            .message
            .contains("not about cooking")
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 1, "only the guardrail's call");
    assert_eq!(requests[0]["model"], "judge");
    assert!(texts(&requests[0])[0].contains("The request is about cooking."));
    assert!(texts(&requests[0])[1].contains("Fix my car"));
    assert_eq!(outcome.usage.prompt_tokens, 40);
    assert!(matches!(
        find(&events, "llm_call")[0],
        EventKind::LlmCall {
            purpose: LlmCallPurpose::Guardrail,
            prompt_tokens: 40,
            ..
        }
    ));

    let llm = ScriptedLlm::start(vec![
        Reply::text("```json\n{\"allow\": true}\n```"),
        Reply::text("Boil the pasta."),
    ])
    .await;
    let second = runtime(&llm, None, &llm_guardrail("closed")).await;
    let (_, outcome) = run(&second, "How do I cook pasta?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Boil the pasta."));
}

#[tokio::test]
async fn an_unreadable_llm_verdict_is_an_error_that_follows_fail() {
    let llm = ScriptedLlm::start(vec![Reply::text("Sure, looks fine to me.")]).await;
    let first = runtime(&llm, None, &llm_guardrail("closed")).await;
    let (_, outcome) = run(&first, "How do I cook pasta?").await;
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert!(
        outcome
            .failure
            .unwrap()
            .message
            .contains("could not decide")
    );

    let llm = ScriptedLlm::start(vec![
        Reply::text(r#"{"allow": "maybe"}"#),
        Reply::text("Boil the pasta."),
    ])
    .await;
    let second = runtime(&llm, None, &llm_guardrail("open")).await;
    let (events, outcome) = run(&second, "How do I cook pasta?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(matches!(
        find(&events, "guardrail_checked")[0],
        EventKind::GuardrailChecked { allowed: true, error: Some(error), .. } if error.contains("allow")
    ));
}

#[tokio::test]
async fn a_run_resumed_in_another_process_does_not_check_its_question_again() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let webhook = RecordingWebhook::start(|_| (200, json!({"allow": true}))).await;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "write it"})),
        Reply::text("Recorded, no password involved."),
        Reply::text("Recorded."),
    ])
    .await;
    let extra = format!(
        "{}{NO_SECRETS}action = \"retry\"\n[tools.\"test.record\"]\nneeds_approval = true\n",
        webhook_guardrail(webhook.url(), "closed")
    );
    let config = config_with_store(&llm, None, &store_url, &extra);
    let first = Runtime::start(&config).await.unwrap();
    let (_, paused) = first
        .agent()
        .run(RunRequest::new("record it"))
        .collect()
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingInput);
    assert_eq!(webhook.received().len(), 1, "the question was checked once");
    let call_id = paused.input_required.clone().unwrap().calls[0]
        .call_id
        .clone();
    first.shutdown().await;

    // Another process: the same store.
    let second = Runtime::start(&config).await.unwrap();
    let answer = InputAnswer {
        approve: vec![call_id],
        ..Default::default()
    };
    let resumed = second.agent().resume(paused.run_id, &answer).await.unwrap();
    let (sink, _events) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let outcome = second
        .agent()
        .run_resumed(resumed, Arc::new(sink), Default::default())
        .await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Recorded."),
        "the output guardrail ran"
    );
    assert_eq!(
        webhook.received().len(),
        1,
        "not checked again after the restart"
    );
    second.shutdown().await;
}

/// A typed answer goes through the output guardrails like any answer: a refused value is
/// dropped (never in `done`, never streamed) and the model's next value, once it passes, is
/// the run's output.
#[tokio::test]
async fn a_typed_value_is_checked_by_the_output_guardrails_and_a_refused_one_is_dropped() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(r#"{"title": "reset the password hunter2", "priority": 1}"#),
        Reply::text(r#"{"title": "help with the account", "priority": 1}"#),
    ])
    .await;
    let extra = format!("{NO_SECRETS}action = \"retry\"\n");
    let runtime = runtime(&llm, None, &extra).await;
    let schema = json!({"type": "object", "properties": {"title": {"type": "string"},
        "priority": {"type": "integer"}}, "required": ["title", "priority"]});
    let request = RunRequest {
        output: Some(agentloop_core::OutputSpec {
            name: "ticket".into(),
            schema,
            strict: false,
        }),
        ..RunRequest::new("File a ticket about my account")
    };
    let (events, outcome) = runtime
        .agent()
        .run(request)
        .collect()
        .await
        .expect("run task does not crash");

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    let output = find(&events, "done")
        .into_iter()
        .find_map(|kind| match kind {
            EventKind::Done { output, .. } => output.clone(),
            _ => None,
        });
    assert_eq!(
        output,
        Some(json!({"title": "help with the account", "priority": 1}))
    );
    assert!(!serde_json::to_string(&events).unwrap().contains("hunter2"));
    assert_eq!(find(&events, "guardrail_tripped").len(), 1);
    assert_eq!(llm.requests().len(), 2);
}
