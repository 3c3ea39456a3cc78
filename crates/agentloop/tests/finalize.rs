//! Finalize tools end the run with their result, documents are kept with the trace, and the
//! tool descriptions file extends what the model reads about each tool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{EventKind, MessageKind, RunStatus, Runtime, Store};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_finalize_tools_summary_is_the_answer_without_another_llm_call() {
    let result = json!({
        "summary": "Q4 revenue grew 12%, per the two reports.",
        "documents": [{"id": "rep-1", "title": "Q4 report"}, {"id": "rep-2", "title": "Board memo"}]
    });
    let llm = ScriptedLlm::start(vec![Reply::tool_call(
        "test__echo",
        json!({"text": result.to_string()}),
    )])
    .await;
    let runtime = runtime(&llm, None, "[tools.\"test.echo\"]\nfinalize = true\n").await;
    let (events, outcome) = run(&runtime, "What happened in Q4?").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Q4 revenue grew 12%, per the two reports.")
    );
    assert_eq!(
        llm.requests().len(),
        1,
        "no LLM call after the finalize tool"
    );
    let answer: String = find(&events, "final_response")
        .into_iter()
        .map(|kind| match kind {
            EventKind::FinalResponse { delta } => delta.clone(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(answer, "Q4 revenue grew 12%, per the two reports.");

    let messages = runtime.store().messages(outcome.session_id).await.unwrap();
    let trace = messages
        .iter()
        .find(|m| m.kind == MessageKind::Trace)
        .unwrap();
    assert_eq!(
        trace.metadata["documents"], result["documents"],
        "documents kept with the trace"
    );
    assert_eq!(
        messages.last().unwrap().message.text_content(),
        "Q4 revenue grew 12%, per the two reports."
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_finalize_tool_without_a_summary_answers_with_its_text() {
    let llm = ScriptedLlm::start(vec![Reply::tool_call(
        "test__echo",
        json!({"text": "Plain answer from the tool."}),
    )])
    .await;
    let runtime = runtime(&llm, None, "[tools.\"test.echo\"]\nfinalize = true\n").await;
    let (_, outcome) = run(&runtime, "q").await;
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Plain answer from the tool.")
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failed_finalize_tool_lets_the_loop_go_on() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__fail", json!({"message": "search index down"})),
        Reply::text("The search failed; try later."),
    ])
    .await;
    let runtime = runtime(&llm, None, "[tools.\"test.fail\"]\nfinalize = true\n").await;
    let (_, outcome) = run(&runtime, "q").await;
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The search failed; try later.")
    );
    assert_eq!(llm.requests().len(), 2);
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_descriptions_file_extends_tool_descriptions_and_reports_unknown_sections() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tools.md"),
        "# Tool notes\n\n## test.echo\nUse it to greet people by name.\n\n## test.nope\nNo such tool.\n",
    )
    .unwrap();
    let llm = ScriptedLlm::start(vec![Reply::text("hi")]).await;
    let extra = format!(
        "[agent]\ntool_descriptions = \"{}\"\n",
        dir.path().join("tools.md").display()
    );
    let runtime = Runtime::start(&config(&llm, None, &extra)).await.unwrap();
    let warnings = runtime.warnings().join("\n");
    assert!(warnings.contains("## test.nope"), "{warnings}");
    run(&runtime, "hi").await;
    let tools = llm.requests()[0]["tools"].clone();
    let echo = tools
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["function"]["name"] == "test__echo")
        .unwrap();
    let description = echo["function"]["description"].as_str().unwrap();
    assert!(
        description.ends_with("\n\nUse it to greet people by name."),
        "{description}"
    );

    let missing = format!(
        "[agent]\ntool_descriptions = \"{}/absent.md\"\n",
        dir.path().display()
    );
    let error = Runtime::start(&config(&llm, None, &missing))
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(
        error.contains("agent.tool_descriptions") && error.contains("absent.md"),
        "{error}"
    );
    runtime.shutdown().await;
}
