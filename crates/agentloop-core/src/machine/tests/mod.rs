//! The loop's rules, exercised on the bare state machine: each test feeds replies and tool
//! results by hand and checks the steps, events and outcome.

use std::{collections::BTreeMap, sync::Arc};

use agentloop_protocol::{EventKind, FinalizeReason, Role, RunStatus, ToolCall, ToolStatus, Usage};
use serde_json::{Value, json};
use uuid::Uuid;

use super::*;
use crate::llm::CallPurpose;
use crate::{
    catalog::ToolCatalog,
    llm::{LlmError, ModelReply, ModelRequest, ToolChoice},
    settings::AgentSettings,
    tool::{FnTool, Tool, ToolError, ToolOutput},
};

fn schema() -> Value {
    json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]})
}

fn catalog(names: &[&str]) -> Arc<ToolCatalog> {
    let tools: Vec<Arc<dyn Tool>> = names
        .iter()
        .map(|name| {
            Arc::new(FnTool::new(*name, "test tool", schema(), |_, _| async {
                Ok(ToolOutput::text("unused"))
            })) as Arc<dyn Tool>
        })
        .collect();
    Arc::new(ToolCatalog::new(tools, &BTreeMap::new()))
}

fn machine_with(settings: AgentSettings, tools: &[&str]) -> RunMachine {
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "What is up?".into(),
        attachments: Vec::new(),
        history: Vec::new(),
        system_prompt: "SYSTEM".into(),
        model: None,
        max_iterations: settings.max_iterations,
        context: RunContext::default(),
        started_at: started_at(),
        policy: crate::policy::RunPolicy::default(),
        client_tools: Vec::new(),
        budget: Default::default(),
    };
    RunMachine::new(
        input,
        Arc::new(settings),
        catalog(tools),
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

/// When the test runs start; a tool call starts a second later.
fn started_at() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default()
}

fn call_started_at() -> chrono::DateTime<chrono::Utc> {
    started_at() + chrono::Duration::seconds(1)
}

fn machine() -> RunMachine {
    machine_with(AgentSettings::default(), &["kb.search", "kb.fetch"])
}

fn text(answer: &str) -> Result<ModelReply, LlmError> {
    Ok(ModelReply {
        content: Some(answer.into()),
        finish_reason: Some("stop".into()),
        usage: Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 2,
            ..Usage::default()
        }),
        ..ModelReply::default()
    })
}

/// A reply with tool calls `(id, provider name, raw arguments)`.
fn calls(list: &[(&str, &str, &str)]) -> Result<ModelReply, LlmError> {
    Ok(ModelReply {
        tool_calls: list
            .iter()
            .map(|(id, name, arguments)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: (*arguments).into(),
            })
            .collect(),
        finish_reason: Some("tool_calls".into()),
        ..ModelReply::default()
    })
}

fn search(id: &str, q: &str) -> (String, String, String) {
    (id.into(), "kb__search".into(), json!({"q": q}).to_string())
}

fn calls_owned(list: &[(String, String, String)]) -> Result<ModelReply, LlmError> {
    let borrowed: Vec<(&str, &str, &str)> = list
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.as_str()))
        .collect();
    calls(&borrowed)
}

fn done(call_id: &str, output: &str) -> ToolResult {
    ToolResult::new(
        call_id,
        call_started_at(),
        3,
        ToolOutcome::Success(ToolOutput::text(output)),
    )
}

fn failed(call_id: &str, error: &str) -> ToolResult {
    ToolResult::new(
        call_id,
        call_started_at(),
        3,
        ToolOutcome::Failed(ToolError::Failed(error.into())),
    )
}

fn model(step: Step) -> ModelRequest {
    match step {
        Step::CallModel(request) => request,
        other => panic!("expected an LLM call, got {other:?}"),
    }
}

fn tools(step: Step) -> Vec<ToolInvocation> {
    match step {
        Step::CallTools(invocations) => invocations,
        other => panic!("expected tool calls, got {other:?}"),
    }
}

fn finished(step: Step) -> RunOutcome {
    match step {
        Step::Finished(outcome) => *outcome,
        other => panic!("expected the end of the run, got {other:?}"),
    }
}

/// The types of `events`, without the `llm_call` reports (their place is tested in
/// `spending.rs`).
fn types(events: &[EventKind]) -> Vec<&'static str> {
    events
        .iter()
        .map(EventKind::type_name)
        .filter(|kind| *kind != "llm_call")
        .collect()
}

/// Feeds every invocation a success and returns the step after the batch.
fn succeed_all(m: &mut RunMachine, invocations: &[ToolInvocation]) -> Step {
    let mut next = None;
    for invocation in invocations {
        next = m.on_tool_result(done(
            &invocation.call_id,
            &format!("result of {}", invocation.call_id),
        ));
    }
    next.expect("the batch should end after its last result")
}

fn tool_events(events: &[EventKind]) -> Vec<(String, ToolStatus)> {
    events
        .iter()
        .filter_map(|event| match event {
            EventKind::ToolExecuted {
                call_id, status, ..
            } => Some((call_id.clone(), *status)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_text_reply_ends_the_run_with_that_answer() {
    let mut m = machine();
    let request = model(m.start());
    assert_eq!(request.tool_choice, ToolChoice::Auto);
    assert_eq!(request.messages[0].role, Role::System);
    assert_eq!(request.messages[0].text_content(), "SYSTEM");
    assert_eq!(request.messages[1].text_content(), "What is up?");
    assert_eq!(request.tools.len(), 2);

    let outcome = finished(m.on_model_reply(text("All good.")));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("All good."));
    assert_eq!(outcome.iterations, 1);
    assert_eq!(outcome.usage.prompt_tokens, 10);
    assert_eq!(
        outcome.messages.last().unwrap().message.text_content(),
        "All good."
    );
    let events = m.take_events();
    assert_eq!(
        events.iter().map(EventKind::type_name).collect::<Vec<_>>(),
        [
            "run_started",
            "thinking",
            "llm_call",
            "final_response",
            "done"
        ]
    );
}

#[test]
fn tool_calls_chain_across_iterations_with_a_stable_system_prompt() {
    let mut m = machine();
    let first = model(m.start());
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "rust")])));
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].tool, "kb.search");
    assert_eq!(batch[0].arguments, json!({"q": "rust"}));

    let second = model(succeed_all(&mut m, &batch));
    let batch = tools(m.on_model_reply(calls(&[("c2", "kb__fetch", r#"{"q":"doc-1"}"#)])));
    let third = model(succeed_all(&mut m, &batch));
    let outcome = finished(m.on_model_reply(text("Done: doc-1 explains it.")));

    for request in [&second, &third] {
        assert_eq!(
            request.messages[0], first.messages[0],
            "system prompt must not change"
        );
    }
    // The third call sees both results, each after the assistant message that asked for it.
    let roles: Vec<Role> = third.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Assistant,
            Role::Tool
        ]
    );
    assert_eq!(
        third.messages[2].tool_calls[0].name, "kb__search",
        "provider-safe name in the view"
    );
    assert_eq!(third.messages[3].tool_call_id.as_deref(), Some("c1"));
    assert_eq!(third.messages[3].text_content(), "result of c1");
    assert_eq!(outcome.iterations, 3);
    assert_eq!(outcome.tools_used, 2);
    assert_eq!(outcome.records.len(), 2);
    assert_eq!(outcome.records[0].tool, "kb.search");
    assert!(
        outcome
            .records
            .iter()
            .all(|r| r.status == ToolStatus::Success)
    );
}

#[test]
fn results_go_back_in_the_order_the_model_issued_the_calls() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[
        search("a", "one"),
        search("b", "two"),
        search("c", "three"),
    ])));
    assert_eq!(batch.len(), 3);
    // They finish in reverse order.
    assert!(m.on_tool_result(done("c", "C")).is_none());
    assert!(m.on_tool_result(done("a", "A")).is_none());
    let request = model(m.on_tool_result(done("b", "B")).unwrap());
    let tool_messages: Vec<(&str, &str)> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::Tool)
        .map(|m| (m.tool_call_id.as_deref().unwrap(), m.text_content()))
        .collect();
    assert_eq!(tool_messages, [("a", "A"), ("b", "B"), ("c", "C")]);
    // The events tell the completion order, live.
    let executed: Vec<String> = tool_events(&m.take_events())
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    assert_eq!(executed, ["c", "a", "b"]);
}

#[test]
fn the_iteration_cap_forces_a_summary_without_tools() {
    let settings = AgentSettings {
        max_iterations: 2,
        ..AgentSettings::default()
    };
    let mut m = machine_with(settings, &["kb.search"]);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let batch = tools(m.on_model_reply(calls_owned(&[search("c2", "b")])));
    let summary = model(succeed_all(&mut m, &batch));
    assert_eq!(summary.tool_choice, ToolChoice::None);
    assert_eq!(summary.purpose, CallPurpose::Finalize);
    let last = summary.messages.last().unwrap();
    assert_eq!(last.role, Role::System);
    assert!(
        last.text_content().contains("step budget"),
        "{}",
        last.text_content()
    );

    let events = m.take_events();
    assert!(events.contains(&EventKind::ForcedFinalize {
        reason: FinalizeReason::MaxIterations
    }));
    let outcome = finished(m.on_model_reply(text("Here is what I found.")));
    assert_eq!(outcome.answer.as_deref(), Some("Here is what I found."));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    assert_eq!(outcome.iterations, 2);
    // The driver streams the forced answer; the machine must not send it a second time.
    assert!(!types(&m.take_events()).contains(&"final_response"));
}

#[test]
fn a_degenerate_reply_forces_the_summary_and_an_empty_summary_falls_back_to_the_records() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let summary = model(m.on_model_reply(Ok(ModelReply::default())));
    assert_eq!(summary.tool_choice, ToolChoice::None);
    let outcome = finished(m.on_model_reply(Ok(ModelReply {
        content: Some("   ".into()),
        ..ModelReply::default()
    })));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DegenerateResponse)
    );
    let answer = outcome.answer.unwrap();
    assert!(answer.contains("kb.search (success"), "{answer}");
    assert!(answer.contains("result of c1"), "{answer}");
    let events = m.take_events();
    assert!(events.contains(&EventKind::FinalResponse {
        delta: answer.clone()
    }));
}

#[test]
fn a_repeated_call_is_not_executed_again_and_a_second_repeat_forces_the_summary() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls(&[("c1", "kb__search", r#"{"q":"x"}"#)])));
    let next = model(succeed_all(&mut m, &batch));
    assert_eq!(next.tool_choice, ToolChoice::Auto);
    m.take_events();

    // Same call, keys formatted differently: a duplicate, answered without running anything.
    let step = m.on_model_reply(calls(&[("c2", "kb__search", r#"{ "q" : "x" }"#)]));
    let request = model(step);
    let events = m.take_events();
    assert!(events.contains(&EventKind::DuplicateDetected {
        call_id: "c2".into(),
        tool: "kb.search".into(),
        arguments: json!({"q": "x"}),
    }));
    assert_eq!(
        tool_events(&events),
        [("c2".to_string(), ToolStatus::Skipped)]
    );
    let note = request.messages.last().unwrap().text_content();
    assert!(
        note.contains("c1") && note.contains("result of c1"),
        "{note}"
    );
    assert_eq!(
        request.tool_choice,
        ToolChoice::Auto,
        "one duplicate does not stop the loop"
    );

    let summary = model(m.on_model_reply(calls(&[("c3", "kb__search", r#"{"q":"x"}"#)])));
    assert_eq!(summary.tool_choice, ToolChoice::None);
    let outcome = finished(m.on_model_reply(text("Summary.")));
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DuplicateCalls)
    );
    assert_eq!(outcome.tools_used, 1, "only the first call ran");
}

#[test]
fn a_repeat_inside_one_reply_reuses_the_first_result() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("a", "x"), search("b", "x")])));
    assert_eq!(batch.len(), 1, "the repeat is not executed");
    let request = model(succeed_all(&mut m, &batch));
    let repeat = request
        .messages
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some("b"))
        .unwrap();
    assert!(
        repeat.text_content().contains("result of a"),
        "{}",
        repeat.text_content()
    );
}

#[test]
fn consecutive_failures_stop_the_tool_calls() {
    let mut m = machine(); // max_consecutive_failures = 2
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    let next = model(m.on_tool_result(failed("c1", "backend down")).unwrap());
    assert_eq!(next.tool_choice, ToolChoice::Auto);
    let error = next.messages.last().unwrap().text_content();
    let payload: Value = serde_json::from_str(error).unwrap();
    assert_eq!(payload["status"], "error");
    assert_eq!(payload["error"], "backend down");
    drop(batch);

    let _ = tools(m.on_model_reply(calls_owned(&[search("c2", "b")])));
    let summary = model(m.on_tool_result(failed("c2", "backend down")).unwrap());
    assert_eq!(summary.tool_choice, ToolChoice::None);
    let outcome = finished(m.on_model_reply(text("The knowledge base is down.")));
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::ConsecutiveFailures)
    );
}

#[test]
fn a_success_resets_the_consecutive_failure_count() {
    let mut m = machine();
    m.start();
    for (i, fail) in [true, false, true, false].into_iter().enumerate() {
        let id = format!("c{i}");
        let _ = tools(m.on_model_reply(calls_owned(&[search(&id, &id)])));
        let result = if fail {
            failed(&id, "flaky")
        } else {
            done(&id, "ok")
        };
        let request = model(m.on_tool_result(result).unwrap());
        assert_eq!(request.tool_choice, ToolChoice::Auto, "iteration {i}");
    }
}

#[test]
fn a_tool_that_keeps_failing_is_withdrawn() {
    let settings = AgentSettings {
        tool_failure_limit: 2,
        max_consecutive_failures: 10,
        ..AgentSettings::default()
    };
    let mut m = machine_with(settings, &["kb.search", "kb.fetch"]);
    m.start();
    let _ = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    let request = model(m.on_tool_result(failed("c1", "boom")).unwrap());
    assert_eq!(request.tools.len(), 2);
    let _ = tools(m.on_model_reply(calls_owned(&[search("c2", "b")])));
    let request = model(m.on_tool_result(failed("c2", "boom")).unwrap());
    let offered: Vec<&str> = request.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(offered, ["kb__fetch"], "kb.search is no longer offered");
    assert_eq!(m.withdrawn_tools().collect::<Vec<_>>(), ["kb.search"]);

    // Calling it anyway is blocked, without running it.
    let request = model(m.on_model_reply(calls_owned(&[search("c3", "c")])));
    assert_eq!(
        tool_events(&m.take_events()).last().unwrap(),
        &("c3".to_string(), ToolStatus::Blocked)
    );
    assert!(
        request
            .messages
            .last()
            .unwrap()
            .text_content()
            .contains("withdrawn")
    );
}

#[test]
fn an_unknown_tool_gets_an_error_listing_the_tools_that_exist() {
    let mut m = machine();
    m.start();
    let request = model(m.on_model_reply(calls(&[("c1", "kb__delete", "{}")])));
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    let error = payload["error"].as_str().unwrap();
    assert!(error.contains("unknown tool 'kb__delete'"), "{error}");
    assert!(
        error.contains("kb__search") && error.contains("kb__fetch"),
        "{error}"
    );
    let outcome_events = m.take_events();
    assert_eq!(
        tool_events(&outcome_events),
        [("c1".to_string(), ToolStatus::Error)]
    );
}

#[test]
fn arguments_that_are_not_json_go_back_to_the_model_as_a_repairable_error() {
    let mut m = machine();
    m.start();
    let request = model(m.on_model_reply(calls(&[("c1", "kb__search", "{\"q\": \"unterminated")])));
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert!(
        payload["error"]
            .as_str()
            .unwrap()
            .contains("not valid JSON")
    );
    assert!(payload["hint"].as_str().unwrap().contains("kb__search"));
    // The model repairs the call and it runs.
    let batch = tools(m.on_model_reply(calls_owned(&[search("c2", "fixed")])));
    assert_eq!(batch[0].arguments, json!({"q": "fixed"}));
}

#[test]
fn arguments_that_break_the_schema_are_refused_with_the_problem_named() {
    let mut m = machine();
    m.start();
    let request = model(m.on_model_reply(calls(&[("c1", "kb__search", r#"{"q": 42}"#)])));
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    let error = payload["error"].as_str().unwrap();
    assert!(error.contains("schema of kb.search"), "{error}");
    assert!(error.contains("/q"), "{error}");
    let outcome = finished(m.on_model_reply(text("ok")));
    assert_eq!(outcome.records[0].status, ToolStatus::Error);
    assert_eq!(outcome.tools_used, 0, "nothing ran");
}

#[test]
fn long_results_are_bounded_for_the_model_but_kept_whole_in_the_record() {
    let settings = AgentSettings {
        tool_output_max_chars: 100,
        ..AgentSettings::default()
    };
    let mut m = machine_with(settings, &["kb.search"]);
    m.start();
    let _ = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    let long = "x".repeat(1000);
    let request = model(m.on_tool_result(done("c1", &long)).unwrap());
    let seen = request.messages.last().unwrap().text_content();
    assert!(seen.starts_with(&"x".repeat(100)) && !seen.starts_with(&"x".repeat(101)));
    assert!(
        seen.contains("truncated: showing 100 of 1000 characters"),
        "{seen}"
    );
    let event_result = m.take_events().into_iter().find_map(|e| match e {
        EventKind::ToolExecuted { result, .. } => result,
        _ => None,
    });
    assert_eq!(event_result.as_deref(), Some(seen));
    let outcome = finished(m.on_model_reply(text("ok")));
    assert_eq!(outcome.records[0].result.as_deref(), Some(long.as_str()));
}

#[test]
fn text_beside_tool_calls_is_kept_in_the_conversation() {
    let mut m = machine();
    m.start();
    let mut reply = calls_owned(&[search("c1", "a")]).unwrap();
    reply.content = Some("Let me look.".into());
    let batch = tools(m.on_model_reply(Ok(reply)));
    let request = model(succeed_all(&mut m, &batch));
    assert_eq!(request.messages[2].text_content(), "Let me look.");
    assert_eq!(request.messages[2].tool_calls.len(), 1);
}

#[test]
fn missing_or_repeated_call_ids_are_made_unique() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[
        ("".into(), "kb__search".into(), r#"{"q":"a"}"#.into()),
        ("".into(), "kb__search".into(), r#"{"q":"b"}"#.into()),
    ])));
    assert_ne!(batch[0].call_id, batch[1].call_id);
    assert!(batch.iter().all(|b| !b.call_id.is_empty()));
}

#[test]
fn an_llm_error_fails_the_run_with_its_code() {
    let mut m = machine();
    m.start();
    let outcome = finished(m.on_model_reply(Err(LlmError::TruncatedStream)));
    assert_eq!(outcome.status, RunStatus::Failed);
    assert!(outcome.answer.is_none());
    assert_eq!(outcome.failure.unwrap().code, "llm_truncated_stream");
    let events = m.take_events();
    assert_eq!(types(&events)[2..], ["error", "done"]);
    assert_eq!(outcome.messages.len(), 1, "the user message is kept");
    assert_eq!(
        outcome.messages[0].kind,
        agentloop_protocol::MessageKind::Dialogue
    );
}

#[test]
fn cancelling_ends_the_run_with_an_answer_that_says_so() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let outcome = finished(m.cancel());
    assert_eq!(outcome.status, RunStatus::Cancelled);
    let answer = outcome.answer.unwrap();
    assert!(
        answer.contains("cancelled") && answer.contains("kb.search"),
        "{answer}"
    );
}

#[test]
fn feeding_the_wrong_thing_fails_cleanly_instead_of_panicking() {
    let mut m = machine();
    let outcome = finished(m.on_model_reply(text("too early")));
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.failure.unwrap().code, "internal_error");
    // Once finished, it stays finished.
    let again = finished(m.start());
    assert_eq!(again.status, RunStatus::Failed);
}

#[test]
fn history_comes_between_the_system_prompt_and_the_new_question() {
    let settings = AgentSettings::default();
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "What is up?".into(),
        attachments: Vec::new(),
        history: vec![
            ChatMessage::user("Show me my accounts"),
            ChatMessage::assistant("You have: My Website (123456)"),
        ],
        system_prompt: "SYSTEM".into(),
        model: None,
        max_iterations: 3,
        context: RunContext::default(),
        started_at: started_at(),
        policy: crate::policy::RunPolicy::default(),
        client_tools: Vec::new(),
        budget: Default::default(),
    };
    let mut with_history = RunMachine::new(
        input,
        Arc::new(settings),
        catalog(&[]),
        Arc::new(crate::tokens::EstimatedTokens),
    );
    let request = model(with_history.start());
    let texts: Vec<&str> = request.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(
        texts,
        [
            "SYSTEM",
            "Show me my accounts",
            "You have: My Website (123456)",
            "What is up?"
        ]
    );
}

#[test]
fn no_tools_means_none_are_offered() {
    let mut m = machine_with(AgentSettings::default(), &[]);
    let request = model(m.start());
    assert!(request.tools.is_empty());
    let request = model(m.on_model_reply(calls(&[("c1", "anything", "{}")])));
    let error = request.messages.last().unwrap().text_content();
    assert!(error.contains("Available tools: none"), "{error}");
}

#[test]
fn changes_hold_each_message_once_with_its_kind_and_the_records_as_they_end() {
    use agentloop_protocol::MessageKind;
    let mut m = machine();
    m.start();
    let first = m.take_changes();
    assert_eq!(first.messages.len(), 1);
    assert_eq!(first.messages[0].kind, MessageKind::Dialogue);
    assert_eq!(first.messages[0].message.role, Role::User);
    assert_eq!(types(&first.events), ["run_started", "thinking"]);

    let batch = tools(m.on_model_reply(calls_owned(&[search("a", "1"), search("b", "2")])));
    let selected = m.take_changes();
    assert_eq!(selected.messages.len(), 1);
    assert_eq!(selected.messages[0].kind, MessageKind::ToolCall);
    assert!(selected.records.is_empty());

    assert!(m.on_tool_result(done(&batch[1].call_id, "B")).is_none());
    let partial = m.take_changes();
    assert_eq!(
        partial.records.len(),
        1,
        "an executed call is handed over as it ends"
    );
    assert_eq!(partial.records[0].call_id, "b");
    assert!(
        partial.messages.is_empty(),
        "results join the conversation when the batch ends"
    );

    m.on_tool_result(done(&batch[0].call_id, "A")).unwrap();
    let resolved = m.take_changes();
    let kinds: Vec<MessageKind> = resolved.messages.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, [MessageKind::ToolResult, MessageKind::ToolResult]);
    assert_eq!(resolved.records.len(), 1);
    assert_eq!(resolved.progress.tools_used, 2);

    let outcome = finished(m.on_model_reply(text("done")));
    let last = m.take_changes();
    let kinds: Vec<MessageKind> = last.messages.iter().map(|m| m.kind).collect();
    assert_eq!(kinds, [MessageKind::Trace, MessageKind::Dialogue]);
    assert!(
        last.messages[0]
            .message
            .text_content()
            .contains("kb.search (success")
    );
    assert_eq!(
        last.messages[0].metadata["execution_trace"]
            .as_array()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(Some(last.messages[1].id), outcome.message_id);
    assert_eq!(
        outcome.messages.len(),
        6,
        "question, call, 2 results, trace, answer"
    );
}

#[test]
fn a_small_context_keeps_the_question_and_the_latest_results() {
    let settings = AgentSettings {
        context_tokens: 300,
        ..AgentSettings::default()
    };
    let mut m = machine_with(settings, &["kb.search"]);
    m.start();
    let mut last = None;
    for i in 0..6 {
        let id = format!("c{i}");
        let _ = tools(m.on_model_reply(calls_owned(&[search(&id, &id)])));
        last = Some(model(
            m.on_tool_result(done(&id, &"r".repeat(200))).unwrap(),
        ));
    }
    let request = last.unwrap();
    let texts: Vec<&str> = request.messages.iter().map(|m| m.text_content()).collect();
    assert_eq!(texts[1], "What is up?", "the question stays");
    let tool_ids: Vec<&str> = request
        .messages
        .iter()
        .filter_map(|m| m.tool_call_id.as_deref())
        .collect();
    assert_eq!(tool_ids.last(), Some(&"c5"), "the latest result stays");
    assert!(tool_ids.len() < 6, "older results left: {tool_ids:?}");
    let sent: usize = request
        .messages
        .iter()
        .map(|m| crate::tokens::message_tokens(&crate::tokens::EstimatedTokens, m))
        .sum();
    assert!(sent <= 300 + 60, "{sent} tokens sent");
}

mod policy;

mod approvals;
mod client_tools;
mod guardrails;
mod guidance;
mod hooks;
mod recovery;
mod spending;
mod steering;
mod typed;
