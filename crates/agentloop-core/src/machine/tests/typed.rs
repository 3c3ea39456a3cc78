//! Typed answers on the bare machine: each mode asks for the value where it should (never a
//! native format on a turn that may call tools), validates it, sends an invalid one back with
//! the paths that are wrong, and fails `output_invalid` when no valid value comes.

use agentloop_protocol::{ErrorCode, MessageKind, OutputMode, OutputSpec, ResumeReason};

use super::*;
use crate::output::{FINAL_ANSWER_TOOL, TypedOutput};

fn ticket() -> OutputSpec {
    OutputSpec {
        name: "ticket".into(),
        schema: json!({
            "type": "object",
            "properties": {
                "title": {"type": "string"},
                "priority": {"type": "integer", "minimum": 1, "maximum": 3}
            },
            "required": ["title", "priority"],
            "additionalProperties": false
        }),
        strict: true,
    }
}

fn typed_machine(mode: OutputMode, retries: u32, max_iterations: u32) -> RunMachine {
    let settings = AgentSettings {
        max_iterations,
        ..AgentSettings::default()
    };
    let mut m = machine_with(settings, &["kb.search"]);
    let mut state = (*m.state).clone();
    state.input.output = Some(TypedOutput {
        spec: ticket(),
        mode,
        retries,
    });
    m = RunMachine::from_state(
        state,
        m.settings.clone(),
        m.catalog.clone(),
        m.counter.clone(),
    );
    m
}

fn final_answer(id: &str, arguments: Value) -> Result<ModelReply, LlmError> {
    calls(&[(id, FINAL_ANSWER_TOOL, &arguments.to_string())])
}

fn output_of(events: &[EventKind]) -> Option<Value> {
    events.iter().find_map(|event| match event {
        EventKind::Done { output, .. } => output.clone(),
        _ => None,
    })
}

fn no_native_format_with_tools(request: &ModelRequest) {
    assert!(
        request.native_output().is_none() || request.tools.is_empty(),
        "a call that offers tools carries a native format"
    );
    if !request.tools.is_empty() {
        assert!(!request.output.as_ref().is_some_and(|output| output.native));
    }
}

#[test]
fn tool_mode_offers_final_answer_beside_the_tools_and_its_arguments_are_the_value() {
    let mut m = typed_machine(OutputMode::Tool, 2, 8);
    let first = model(m.start());
    let names: Vec<&str> = first.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["kb__search", FINAL_ANSWER_TOOL]);
    assert!(first.output.is_none(), "a tool turn asks for no format");
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "disk")])));
    let second = model(succeed_all(&mut m, &batch));
    no_native_format_with_tools(&second);
    let value = json!({"title": "Disk full", "priority": 1});
    let outcome = finished(m.on_model_reply(final_answer("c2", value.clone())));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.output, Some(value.clone()));
    assert_eq!(outcome.answer.as_deref(), Some(value.to_string().as_str()));
    let events = m.take_events();
    assert_eq!(output_of(&events), Some(value.clone()));
    let answer = outcome.messages.last().unwrap();
    assert_eq!(answer.kind, MessageKind::Dialogue);
    assert_eq!(answer.metadata, json!({"output": {"name": "ticket"}}));
    assert_eq!(
        serde_json::from_str::<Value>(answer.message.text_content()).unwrap(),
        value
    );
}

#[test]
fn an_invalid_final_answer_goes_back_as_a_tool_error_naming_the_paths() {
    let mut m = typed_machine(OutputMode::Tool, 2, 8);
    m.start();
    let bad = json!({"title": "Disk full", "priority": 7});
    let retry = model(m.on_model_reply(final_answer("c1", bad)));
    let error = retry.messages.last().unwrap();
    assert_eq!(error.role, Role::Tool);
    assert!(
        error.text_content().contains("at /priority"),
        "{}",
        error.text_content()
    );
    assert_eq!(retry.tools.len(), 2, "the tools are still offered");
    let good = json!({"title": "Disk full", "priority": 3});
    let outcome = finished(m.on_model_reply(final_answer("c2", good.clone())));
    assert_eq!(outcome.output, Some(good));
}

#[test]
fn final_answer_beside_other_calls_is_set_aside_and_the_others_run() {
    let mut m = typed_machine(OutputMode::Tool, 2, 8);
    m.start();
    let reply = calls(&[
        ("c1", "kb__search", r#"{"q": "x"}"#),
        ("c2", FINAL_ANSWER_TOOL, r#"{"title": "t", "priority": 1}"#),
    ]);
    let batch = tools(m.on_model_reply(reply));
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].call_id, "c1");
}

#[test]
fn native_mode_formats_prose_with_one_call_that_offers_no_tools() {
    let mut m = typed_machine(OutputMode::Native, 2, 8);
    let first = model(m.start());
    assert_eq!(first.tools.len(), 1, "no final_answer tool in native mode");
    assert!(first.output.is_none());
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "disk")])));
    let second = model(succeed_all(&mut m, &batch));
    no_native_format_with_tools(&second);
    assert!(second.output.is_none());
    let format = model(m.on_model_reply(text("The disk is full; urgent.")));
    assert!(format.tools.is_empty());
    assert_eq!(format.tool_choice, ToolChoice::None);
    assert_eq!(
        format.native_output().map(|spec| spec.name.as_str()),
        Some("ticket")
    );
    let value = json!({"title": "Disk full", "priority": 1});
    let outcome = finished(m.on_model_reply(text(&value.to_string())));
    assert_eq!(outcome.output, Some(value));
    // The prose stays in the run, the value is its answer.
    let kinds: Vec<_> = outcome.messages.iter().map(|m| m.kind).collect();
    assert!(kinds.contains(&MessageKind::Note));
}

#[test]
fn native_mode_takes_a_valid_value_written_on_a_step_as_it_is() {
    let mut m = typed_machine(OutputMode::Native, 2, 8);
    m.start();
    let value = json!({"title": "x", "priority": 2});
    let outcome = finished(m.on_model_reply(text(&format!("```json\n{value}\n```"))));
    assert_eq!(outcome.output, Some(value));
}

#[test]
fn prompted_mode_puts_the_schema_in_the_instructions_and_repairs_by_a_user_message() {
    let mut m = typed_machine(OutputMode::Prompted, 2, 8);
    let first = model(m.start());
    let last = first.messages.last().unwrap();
    assert_eq!(last.role, Role::System);
    assert!(
        last.text_content().contains("\"priority\""),
        "{}",
        last.text_content()
    );
    assert!(first.output.as_ref().is_some_and(|output| !output.native));
    let repair = model(m.on_model_reply(text(r#"{"title": "x"}"#)));
    assert!(repair.tools.is_empty());
    let asked = &repair.messages[repair.messages.len() - 2];
    assert_eq!(asked.role, Role::User);
    assert!(
        asked.text_content().contains("priority"),
        "{}",
        asked.text_content()
    );
    let value = json!({"title": "x", "priority": 2});
    let outcome = finished(m.on_model_reply(text(&value.to_string())));
    assert_eq!(outcome.output, Some(value));
}

#[test]
fn no_valid_value_after_the_retries_fails_output_invalid_keeping_the_last_answer() {
    let mut m = typed_machine(OutputMode::Prompted, 1, 8);
    m.start();
    model(m.on_model_reply(text(r#"{"title": "x"}"#)));
    let outcome = finished(m.on_model_reply(text(r#"{"title": "y", "priority": 9}"#)));
    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, ErrorCode::OutputInvalid);
    assert!(
        failure.message.contains("at /priority"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains(r#""title": "y""#),
        "{}",
        failure.message
    );
    assert!(outcome.output.is_none());
    let events = m.take_events();
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::Error {
            code: ErrorCode::OutputInvalid,
            ..
        }
    )));
}

#[test]
fn a_forced_finish_asks_for_the_typed_value_in_every_mode() {
    for mode in [OutputMode::Tool, OutputMode::Native, OutputMode::Prompted] {
        let mut m = typed_machine(mode, 2, 1);
        m.start();
        let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "disk")])));
        let summary = model(succeed_all(&mut m, &batch));
        assert_eq!(summary.tool_choice, ToolChoice::None, "{mode:?}");
        assert!(summary.tools.is_empty(), "{mode:?}");
        let output = summary.output.clone().unwrap();
        assert_eq!(output.native, mode == OutputMode::Native, "{mode:?}");
        let value = json!({"title": "t", "priority": 1});
        let outcome = finished(m.on_model_reply(text(&value.to_string())));
        assert_eq!(outcome.output, Some(value), "{mode:?}");
        assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    }
}

#[test]
fn a_run_restored_while_it_waits_for_its_value_asks_for_it_again() {
    let mut m = typed_machine(OutputMode::Native, 2, 8);
    m.start();
    model(m.on_model_reply(text("prose")));
    m.take_changes();
    let mut restored = super::recovery::saved_and_restored(&mut m);
    let step = restored
        .handle(
            Input::Resume {
                reason: ResumeReason::Adopted,
                instance: "b".into(),
            },
            started_at(),
        )
        .step()
        .unwrap();
    let again = model(step);
    assert!(again.native_output().is_some());
    let value = json!({"title": "t", "priority": 1});
    let outcome = finished(restored.on_model_reply(text(&value.to_string())));
    assert_eq!(outcome.output, Some(value));
}
