//! MCP elicitation and sampling through the whole loop, with the Python SDK's server
//! (`crates/agentloop-mcp/tests/python/server.py`) over stdio: a tool's question becomes an
//! `input_required` event of kind `elicitation` while the run goes on, the answer (checked,
//! with the schema's defaults) goes back to the server; an unanswered one is declined when its
//! time is up; a sampling request is answered by the run's model and counted in its usage, and
//! refused over the budget.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{
    Event, EventKind, RunOutcome, RunRequest, RunStatus, Runtime,
    core::{AnswerError, protocol::LlmCallPurpose},
};
use agentloop_core::protocol::{
    Elicitation, ElicitationAction, ElicitationAnswer, ElicitationMode, ElicitationPurpose,
};
use agentloop_test_support::{
    requires,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use futures::StreamExt;
use serde_json::{Value, json};

/// The `[mcp_servers.py]` table of the Python SDK's server, plus `settings` in it; `None`
/// (the test is skipped, saying why) without the SDK.
fn python_server(settings: &str) -> Option<String> {
    let python = requires::mcp_python()?;
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../agentloop-mcp/tests/python/server.py"
    );
    Some(format!(
        "[mcp_servers.py]\ncommand = {python:?}\nargs = [{script:?}]\nstartup_timeout_s = 60\n{settings}\n"
    ))
}

/// Runs `query`, handing each question the run asks to `answer` (`None`: left unanswered).
async fn run_answering(
    runtime: &Runtime,
    query: &str,
    mut answer: impl FnMut(Asked<'_>) -> Option<ElicitationAnswer>,
) -> (Vec<Event>, RunOutcome) {
    let agent = runtime.agent().clone();
    let mut handle = agent.run(RunRequest::new(query));
    let run_id = handle.run_id();
    let mut events = Vec::new();
    while let Some(event) = handle.next().await {
        if let EventKind::InputRequired {
            elicitation: Some(question),
            ..
        } = &event.kind
            && let Some(reply) = answer(Asked {
                agent: &agent,
                run_id,
                question,
            })
        {
            agent.answer_question(run_id, reply).unwrap();
        }
        events.push(event);
    }
    (events, handle.outcome().await.unwrap())
}

/// A question, and the run that asks it.
struct Asked<'a> {
    agent: &'a agentloop::core::Agent,
    run_id: uuid::Uuid,
    question: &'a Elicitation,
}

fn accept(content: Value) -> ElicitationAnswer {
    ElicitationAnswer {
        id: None,
        action: ElicitationAction::Accept,
        content: Some(content),
    }
}

fn tool_output(outcome: &RunOutcome) -> String {
    outcome.records[0].result.clone().unwrap_or_default()
}

#[tokio::test]
async fn a_form_question_is_answered_with_the_defaults_of_its_schema() {
    let Some(server) = python_server("") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__book", json!({"day": "Friday"})),
        Reply::text("Booked."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "book a table", |asked| {
        let question = asked.question;
        assert_eq!(question.server, "py");
        assert_eq!(question.tool, "py.book");
        assert_eq!(question.mode, ElicitationMode::Form);
        assert_eq!(question.purpose, ElicitationPurpose::Question);
        assert_eq!(question.message, "Who is the table on Friday for?");
        let schema = question.requested_schema.as_ref().unwrap();
        assert_eq!(schema["properties"]["guests"]["default"], json!(2));
        // The answer is checked against the schema: a name is required.
        let refused = asked
            .agent
            .answer_question(asked.run_id, accept(json!({"guests": 4})));
        assert!(
            matches!(&refused, Err(AnswerError::Invalid(why)) if why.contains("name")),
            "{refused:?}"
        );
        Some(accept(json!({"name": "Ada"})))
    })
    .await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        tool_output(&outcome),
        "booked Friday for Ada, 2 guests, inside"
    );
    // Live, between the call's selection and its result.
    let kinds = types(&events);
    let asked = kinds.iter().position(|kind| *kind == "input_required");
    let executed = kinds.iter().position(|kind| *kind == "tool_executed");
    assert!(asked.is_some() && asked < executed, "{kinds:?}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_url_question_is_answered_by_its_action() {
    let Some(server) = python_server("") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__pay", json!({"amount": 12})),
        Reply::text("Paid."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (_, outcome) = run_answering(&runtime, "pay", |Asked { question, .. }| {
        assert_eq!(question.mode, ElicitationMode::Url);
        assert_eq!(question.url.as_deref(), Some("https://pay.example/12"));
        Some(ElicitationAnswer {
            id: Some(question.id.clone()),
            action: ElicitationAction::Accept,
            content: None,
        })
    })
    .await;
    assert_eq!(tool_output(&outcome), "payment: accept");
    runtime.shutdown().await;
}

#[tokio::test]
async fn an_unanswered_question_is_declined_when_its_time_is_up_and_holds_the_calls_timeout() {
    // The call's own time limit is shorter than the question's: it waits while the question
    // is open.
    let settings = "elicitation_timeout_s = 1\n\n[tools.\"py.book\"]\ntimeout_s = 0.3\n";
    let Some(server) = python_server(settings) else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__book", json!({"day": "Friday"})),
        Reply::text("Not booked."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "book a table", |_| None).await;
    assert_eq!(find(&events, "input_required").len(), 1);
    assert_eq!(statuses(&outcome.records), [("py.book", "success")]);
    assert_eq!(tool_output(&outcome), "not booked: decline");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_server_whose_questions_are_declined_asks_nobody() {
    let Some(server) = python_server("elicitation = \"decline\"") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__book", json!({"day": "Friday"})),
        Reply::text("Not booked."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "book a table", |_| {
        panic!("a declined server's question was shown")
    })
    .await;
    assert!(find(&events, "input_required").is_empty());
    assert_eq!(tool_output(&outcome), "not booked: decline");
    runtime.shutdown().await;
}

#[tokio::test]
async fn sampling_is_answered_by_the_runs_model_and_counted_in_its_usage() {
    let Some(server) = python_server("sampling = \"allow\"") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__haiku", json!({"topic": "autumn"})),
        Reply::text("an old silent pond").with_usage(100, 20),
        Reply::text("Here is a haiku."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "a haiku please", |_| None).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let output = tool_output(&outcome);
    assert!(output.starts_with("haiku by "), "{output}");
    assert!(output.ends_with(": an old silent pond"), "{output}");
    // The server's messages, behind its system prompt, reached the model.
    let sampled = &llm.requests()[1];
    assert_eq!(sampled["messages"][0]["content"], "You write haiku.");
    assert_eq!(sampled["messages"][1]["content"], "A haiku about autumn");
    let purposes: Vec<LlmCallPurpose> = events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::LlmCall { purpose, .. } => Some(*purpose),
            _ => None,
        })
        .collect();
    assert_eq!(
        purposes,
        [
            LlmCallPurpose::Step,
            LlmCallPurpose::Sampling,
            LlmCallPurpose::Step
        ]
    );
    // Two steps of 10 + 5 tokens and the sampling call's 100 + 20.
    assert_eq!(outcome.usage.prompt_tokens, 120);
    assert_eq!(outcome.usage.completion_tokens, 30);
    runtime.shutdown().await;
}

#[tokio::test]
async fn sampling_over_the_runs_budget_is_refused() {
    let settings = "sampling = \"allow\"\n\n[agent.budget]\nmax_tokens = 100000\n";
    let Some(server) = python_server(settings) else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        // More than the budget has left.
        Reply::tool_call(
            "py__haiku",
            json!({"topic": "autumn", "max_tokens": 200000}),
        ),
        Reply::text("No haiku."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "a haiku please", |_| None).await;
    let output = tool_output(&outcome);
    assert!(output.contains("budget"), "{output}");
    // No LLM call was made for it.
    assert_eq!(llm.requests().len(), 2);
    assert!(!events.iter().any(|event| matches!(
        &event.kind,
        EventKind::LlmCall {
            purpose: LlmCallPurpose::Sampling,
            ..
        }
    )));
    runtime.shutdown().await;
}

#[tokio::test]
async fn sampling_to_approve_asks_first_and_a_refusal_reaches_the_server() {
    let Some(server) = python_server("sampling = \"approve\"") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("py__haiku", json!({"topic": "autumn"})),
        Reply::text("No haiku."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (_, outcome) = run_answering(&runtime, "a haiku please", |Asked { question, .. }| {
        assert_eq!(question.purpose, ElicitationPurpose::Sampling);
        assert!(
            question.message.contains("A haiku about autumn"),
            "{}",
            question.message
        );
        Some(ElicitationAnswer {
            id: Some(question.id.clone()),
            action: ElicitationAction::Decline,
            content: None,
        })
    })
    .await;
    let output = tool_output(&outcome);
    assert!(output.starts_with("no haiku:"), "{output}");
    assert_eq!(llm.requests().len(), 2);
    runtime.shutdown().await;
}

/// The `[mcp_servers.everything]` table of the reference server from npm, plus `settings`;
/// `None` (skipped, saying why) without Node.js and the package.
fn everything_server(settings: &str) -> Option<String> {
    if !requires::mcp_reference_servers() {
        return None;
    }
    let (command, args) = agentloop_test_support::mcp::reference_server_everything();
    Some(format!(
        "[mcp_servers.everything]\ncommand = {command:?}\nargs = {}\nstartup_timeout_s = 60\n{settings}\n",
        json!(args)
    ))
}

#[tokio::test]
async fn the_reference_servers_question_takes_the_answer_and_its_defaults() {
    let Some(server) = everything_server("") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("everything__trigger-elicitation-request", json!({})),
        Reply::text("Thanks."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (_, outcome) = run_answering(&runtime, "ask me", |Asked { question, .. }| {
        assert_eq!(question.tool, "everything.trigger-elicitation-request");
        Some(accept(json!({"name": "Ada", "check": true})))
    })
    .await;
    let output = tool_output(&outcome);
    assert!(output.contains("- Name: Ada"), "{output}");
    // Left out of the answer, filled in from the schema's defaults.
    assert!(output.contains("- Favorite Integer: 42"), "{output}");
    assert!(output.contains("- Favorite Number: 3.14"), "{output}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_reference_server_offers_its_sampling_and_question_tools_only_when_enabled() {
    let Some(server) = everything_server("elicitation = \"decline\"\nsampling = \"allow\"") else {
        return;
    };
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "everything__trigger-sampling-request",
            json!({"prompt": "a word for blue", "maxTokens": 10}),
        ),
        Reply::text("azure").with_usage(30, 2),
        Reply::text("It said azure."),
    ])
    .await;
    let runtime = runtime(&llm, None, &server).await;
    let (events, outcome) = run_answering(&runtime, "sample", |_| None).await;
    let offered = ScriptedLlm::offered_tools(&llm.requests()[0]);
    assert!(
        offered.contains(&"everything__trigger-sampling-request".to_string()),
        "{offered:?}"
    );
    assert!(
        !offered.contains(&"everything__trigger-elicitation-request".to_string()),
        "declared without elicitation: {offered:?}"
    );
    let output = tool_output(&outcome);
    assert!(output.contains("azure"), "{output}");
    let sampled = &llm.requests()[1];
    assert_eq!(
        sampled["messages"][0]["content"],
        "You are a helpful test server."
    );
    assert!(events.iter().any(|event| matches!(
        &event.kind,
        EventKind::LlmCall {
            purpose: LlmCallPurpose::Sampling,
            prompt_tokens: 30,
            ..
        }
    )));
    runtime.shutdown().await;
}
