//! Guardrails in the machine: the question checked before the first LLM call, the answer
//! before it is shown; retries, blocks, `fail`, the modes, and a resumed run that does not
//! check again what passed.

use agentloop_protocol::{GuardrailAction, GuardrailSide, MessageKind};

use super::*;
use crate::guardrail::{
    FailMode, GuardrailLlmCall, GuardrailMode, GuardrailOutcome, GuardrailRule, GuardrailVerdict,
    RegexGuardrail,
};

fn guarded(rules: &[GuardrailRule], mode: GuardrailMode) -> RunMachine {
    let mut settings = AgentSettings {
        guardrail_mode: mode,
        ..AgentSettings::default()
    };
    for rule in rules {
        let check = RegexGuardrail::new(&[], &[]).unwrap();
        settings.guardrails.push(rule.clone(), Arc::new(check));
    }
    machine_with(settings, &["kb.search"])
}

fn verdict(name: &str, outcome: GuardrailOutcome) -> GuardrailVerdict {
    GuardrailVerdict {
        name: name.into(),
        outcome,
        duration_ms: 4,
        llm_calls: Vec::new(),
    }
}

fn trip(reason: &str) -> GuardrailOutcome {
    GuardrailOutcome::Tripped {
        reason: reason.into(),
    }
}

fn feed(m: &mut RunMachine, verdicts: Vec<GuardrailVerdict>) -> Step {
    m.handle(Input::GuardrailVerdicts(verdicts), started_at())
        .step()
        .unwrap()
}

fn check(step: Step) -> crate::guardrail::GuardrailCheck {
    match step {
        Step::CheckGuardrails(check) => check,
        other => panic!("expected a guardrail check, got {other:?}"),
    }
}

fn input_rule(name: &str) -> GuardrailRule {
    GuardrailRule::new(name, GuardrailSide::Input)
}

fn output_rule(name: &str) -> GuardrailRule {
    GuardrailRule::new(name, GuardrailSide::Output)
}

#[test]
fn a_tripped_input_guardrail_blocks_the_run_before_any_model_call() {
    let mut m = guarded(
        &[input_rule("pii"), input_rule("topics")],
        GuardrailMode::Hold,
    );
    let asked = check(m.start());
    assert_eq!(asked.on, GuardrailSide::Input);
    assert_eq!(asked.text, "What is up?");
    assert_eq!(asked.names, ["pii", "topics"]);
    let outcome = finished(feed(
        &mut m,
        vec![
            verdict("pii", GuardrailOutcome::Allowed),
            verdict("topics", trip("off topic")),
        ],
    ));
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert_eq!(outcome.answer, None);
    assert_eq!(outcome.iterations, 0);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, ErrorCode::Blocked);
    assert!(failure.message.contains("`topics`"), "{}", failure.message);
    assert!(failure.message.contains("off topic"), "{}", failure.message);
    let events = m.take_events();
    assert_eq!(
        types(&events),
        [
            "run_started",
            "guardrail_checked",
            "guardrail_checked",
            "guardrail_tripped",
            "error",
            "done"
        ]
    );
    assert!(matches!(
        &events[3],
        EventKind::GuardrailTripped { name, on: GuardrailSide::Input, action: GuardrailAction::Block, .. }
            if name == "topics"
    ));
    assert!(matches!(
        events.last(),
        Some(EventKind::Done {
            status: RunStatus::Blocked,
            ..
        })
    ));
}

#[test]
fn a_passed_question_is_not_checked_again_when_the_run_resumes() {
    let mut m = guarded(&[input_rule("pii")], GuardrailMode::Hold);
    check(m.start());
    let request = model(feed(
        &mut m,
        vec![verdict("pii", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(request.messages[1].text_content(), "What is up?");
    // Saved, restored elsewhere, resumed: the step under way (the LLM call) is made again.
    let saved = serde_json::to_string(m.state()).unwrap();
    let state: RunState = serde_json::from_str(&saved).unwrap();
    let mut restored = RunMachine::from_state(
        state,
        m.settings.clone(),
        m.catalog().clone(),
        Arc::new(crate::tokens::EstimatedTokens),
    );
    let resumed = Input::Resume {
        reason: agentloop_protocol::ResumeReason::Adopted,
        instance: "b".into(),
    };
    model(restored.handle(resumed, started_at()).step().unwrap());
}

#[test]
fn a_run_resumed_in_the_middle_of_a_check_asks_for_it_again() {
    let mut m = guarded(&[output_rule("tone")], GuardrailMode::Hold);
    model(m.start());
    let asked = check(m.on_model_reply(text("An answer.")));
    let saved = serde_json::to_string(m.state()).unwrap();
    let state: RunState = serde_json::from_str(&saved).unwrap();
    let mut restored = RunMachine::from_state(
        state,
        m.settings.clone(),
        m.catalog().clone(),
        Arc::new(crate::tokens::EstimatedTokens),
    );
    let resumed = Input::Resume {
        reason: agentloop_protocol::ResumeReason::Restarted,
        instance: "b".into(),
    };
    let again = check(restored.handle(resumed, started_at()).step().unwrap());
    assert_eq!(again, asked);
    let outcome = finished(feed(
        &mut restored,
        vec![verdict("tone", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(outcome.answer.as_deref(), Some("An answer."));
}

#[test]
fn a_held_answer_is_shown_only_once_the_output_guardrails_pass_it() {
    let mut m = guarded(&[output_rule("tone")], GuardrailMode::Hold);
    assert!(m.holds_answer());
    model(m.start());
    let asked = check(m.on_model_reply(text("All good.")));
    assert_eq!(
        (asked.on, asked.text.as_str()),
        (GuardrailSide::Output, "All good.")
    );
    assert_eq!(types(&m.take_events()), ["run_started", "thinking"]);
    let outcome = finished(feed(
        &mut m,
        vec![verdict("tone", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("All good."));
    let events = m.take_events();
    assert_eq!(
        types(&events),
        ["guardrail_checked", "final_response", "done"]
    );
}

#[test]
fn with_held_answers_the_text_of_a_reply_that_calls_tools_is_sent_by_the_machine() {
    let mut m = guarded(&[output_rule("tone")], GuardrailMode::Hold);
    model(m.start());
    let mut reply = calls_owned(&[search("c1", "x")]).unwrap();
    reply.content = Some("Let me look.".into());
    tools(m.on_model_reply(Ok(reply)));
    let events = m.take_events();
    assert!(events.contains(&EventKind::AssistantDelta {
        text: "Let me look.".into()
    }));
    // Without output guardrails the driver streamed it: the machine does not send it again.
    let plain = guarded(&[input_rule("pii")], GuardrailMode::Hold);
    assert!(!plain.holds_answer());
}

#[test]
fn a_refused_answer_goes_back_to_the_model_and_a_repaired_one_completes_the_run() {
    let rule = output_rule("no-secrets")
        .action(GuardrailAction::Retry)
        .retries(2);
    let mut m = guarded(&[rule], GuardrailMode::Hold);
    model(m.start());
    check(m.on_model_reply(text("The secret is 42.")));
    let retry = model(feed(
        &mut m,
        vec![verdict("no-secrets", trip("mentions a secret"))],
    ));
    let seen: Vec<&str> = retry.messages.iter().map(|m| m.text_content()).collect();
    assert!(seen.contains(&"The secret is 42."), "{seen:?}");
    let note = seen.last().unwrap();
    assert!(
        note.contains("no-secrets") && note.contains("mentions a secret"),
        "{note}"
    );
    check(m.on_model_reply(text("I cannot say.")));
    let outcome = finished(feed(
        &mut m,
        vec![verdict("no-secrets", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I cannot say."));
    assert_eq!(outcome.iterations, 2);
    let blocked: Vec<&SessionMessage> = outcome
        .messages
        .iter()
        .filter(|m| m.kind == MessageKind::Blocked)
        .collect();
    assert_eq!(blocked.len(), 2, "the refused answer and the note");
    assert_eq!(blocked[0].message.text_content(), "The secret is 42.");
    assert_eq!(blocked[0].metadata["guardrail"], "no-secrets");
    let events = m.take_events();
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::GuardrailTripped {
            action: GuardrailAction::Retry,
            ..
        }
    )));
    let shown: String = events
        .iter()
        .filter_map(|event| match event {
            EventKind::FinalResponse { delta } => Some(delta.as_str()),
            EventKind::AssistantDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(shown, "I cannot say.");
}

#[test]
fn an_answer_refused_after_its_retries_blocks_the_run_and_is_saved_as_blocked() {
    let rule = output_rule("no-secrets")
        .action(GuardrailAction::Retry)
        .retries(1);
    let mut m = guarded(&[rule], GuardrailMode::Hold);
    model(m.start());
    check(m.on_model_reply(text("secret one")));
    model(feed(&mut m, vec![verdict("no-secrets", trip("a secret"))]));
    check(m.on_model_reply(text("secret two")));
    let outcome = finished(feed(&mut m, vec![verdict("no-secrets", trip("a secret"))]));
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert_eq!((outcome.answer, outcome.message_id), (None, None));
    assert_eq!(outcome.failure.unwrap().code, ErrorCode::Blocked);
    let last_answer = outcome
        .messages
        .iter()
        .rfind(|m| m.message.role == Role::Assistant)
        .unwrap();
    assert_eq!(last_answer.kind, MessageKind::Blocked);
    assert_eq!(last_answer.message.text_content(), "secret two");
    assert!(
        !outcome
            .messages
            .iter()
            .any(|m| m.kind == MessageKind::Dialogue && m.message.role == Role::Assistant)
    );
    let events = m.take_events();
    let texts = serde_json::to_string(&events).unwrap();
    assert!(
        !texts.contains("secret one") && !texts.contains("secret two"),
        "{texts}"
    );
    let actions: Vec<GuardrailAction> = events
        .iter()
        .filter_map(|event| match event {
            EventKind::GuardrailTripped { action, .. } => Some(*action),
            _ => None,
        })
        .collect();
    assert_eq!(actions, [GuardrailAction::Retry, GuardrailAction::Block]);
}

#[test]
fn a_guardrail_that_cannot_decide_follows_its_fail_setting() {
    let open = output_rule("hook").fail(FailMode::Open);
    let mut m = guarded(&[open], GuardrailMode::Hold);
    model(m.start());
    check(m.on_model_reply(text("Fine.")));
    let failed = GuardrailOutcome::Failed {
        error: "timed out after 1s".into(),
    };
    let outcome = finished(feed(&mut m, vec![verdict("hook", failed.clone())]));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert!(m.take_events().iter().any(|event| matches!(
        event,
        EventKind::GuardrailChecked { allowed: true, error: Some(error), .. } if error.contains("timed out")
    )));

    // Closed, and with `retry`: an error is not something the model can repair.
    let closed = output_rule("hook").action(GuardrailAction::Retry);
    let mut m = guarded(&[closed], GuardrailMode::Hold);
    model(m.start());
    check(m.on_model_reply(text("Fine.")));
    let outcome = finished(feed(&mut m, vec![verdict("hook", failed)]));
    assert_eq!(outcome.status, RunStatus::Blocked);
    assert!(
        outcome
            .failure
            .unwrap()
            .message
            .contains("could not decide")
    );
}

#[test]
fn in_after_mode_the_answer_streams_and_a_trip_retracts_it() {
    let mut m = guarded(&[output_rule("tone")], GuardrailMode::After);
    assert!(!m.holds_answer());
    model(m.start());
    check(m.on_model_reply(text("Rude.")));
    let outcome = finished(feed(&mut m, vec![verdict("tone", trip("rude"))]));
    assert_eq!(outcome.status, RunStatus::Blocked);
    let events = m.take_events();
    assert_eq!(
        types(&events),
        [
            "run_started",
            "thinking",
            "guardrail_checked",
            "guardrail_tripped",
            "answer_retracted",
            "error",
            "done"
        ]
    );
}

#[test]
fn a_forced_summary_refused_is_forced_again_and_keeps_its_reason() {
    let rule = output_rule("tone").action(GuardrailAction::Retry);
    let settings_rules = [rule];
    let mut m = guarded(&settings_rules, GuardrailMode::Hold);
    model(m.start());
    // A reply with neither text nor calls forces the summary.
    let summary = model(m.on_model_reply(Ok(ModelReply::default())));
    assert_eq!(summary.tool_choice, ToolChoice::None);
    check(m.on_model_reply(text("bad summary")));
    let again = model(feed(&mut m, vec![verdict("tone", trip("rude"))]));
    assert_eq!(again.tool_choice, ToolChoice::None);
    check(m.on_model_reply(text("good summary")));
    let outcome = finished(feed(
        &mut m,
        vec![verdict("tone", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(outcome.answer.as_deref(), Some("good summary"));
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DegenerateResponse)
    );
}

#[test]
fn an_llm_guardrail_call_is_counted_in_the_run_usage() {
    let mut m = guarded(&[input_rule("judge")], GuardrailMode::Hold);
    check(m.start());
    let mut judged = verdict("judge", GuardrailOutcome::Allowed);
    judged.llm_calls.push(GuardrailLlmCall {
        model: Some("judge-model".into()),
        usage: Usage {
            prompt_tokens: 30,
            completion_tokens: 5,
            ..Usage::default()
        },
        duration_ms: 7,
    });
    model(feed(&mut m, vec![judged]));
    assert_eq!(m.progress().usage.prompt_tokens, 30);
    assert!(m.take_events().iter().any(|event| matches!(
        event,
        EventKind::LlmCall {
            purpose: agentloop_protocol::LlmCallPurpose::Guardrail,
            prompt_tokens: 30,
            ..
        }
    )));
}

#[test]
fn verdicts_nobody_asked_for_fail_the_run_cleanly() {
    let mut m = guarded(&[output_rule("tone")], GuardrailMode::Hold);
    model(m.start());
    let outcome = finished(feed(
        &mut m,
        vec![verdict("tone", GuardrailOutcome::Allowed)],
    ));
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.failure.unwrap().code, ErrorCode::InternalError);
}
