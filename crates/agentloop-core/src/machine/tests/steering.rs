//! Messages the user sends while the run works: they join the conversation before the next
//! LLM call, never in the middle of a batch, and a run that would end answers them first.

use super::*;
use crate::llm::CallPurpose;

fn send(m: &mut RunMachine, text: &str) -> Result<(), SteerError> {
    let input = Input::Steer {
        text: text.to_string(),
    };
    match m.handle(input, m.state.now) {
        Handled::Steered(answer) => answer,
        other => panic!("a message changes no step, got {other:?}"),
    }
}

fn steer(m: &mut RunMachine, text: &str) {
    assert_eq!(send(m, text), Ok(()), "the run takes {text:?}");
}

fn one_iteration() -> RunMachine {
    let settings = AgentSettings {
        max_iterations: 1,
        ..AgentSettings::default()
    };
    machine_with(settings, &["kb.search"])
}

fn user_messages(events: &[EventKind]) -> Vec<&str> {
    events
        .iter()
        .filter_map(|event| match event {
            EventKind::UserMessage { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn user_texts(request: &ModelRequest) -> Vec<&str> {
    request
        .messages
        .iter()
        .filter(|message| message.role == Role::User)
        .map(|message| message.text_content())
        .collect()
}

#[test]
fn a_message_sent_during_a_batch_joins_before_the_next_llm_call() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("s1", "q")])));
    m.take_events();
    steer(&mut m, "  only invoices from 2026, please  ");
    assert!(
        m.take_events().is_empty(),
        "nothing is said before it joins the conversation"
    );
    let request = model(succeed_all(&mut m, &batch));
    assert_eq!(
        user_texts(&request),
        ["What is up?", "only invoices from 2026, please"]
    );
    let last = request.messages.last().unwrap();
    assert_eq!(last.role, Role::User, "after the tool results of the batch");
    let events = m.take_events();
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::UserMessage { text } if text == "only invoices from 2026, please"
    )));
}

#[test]
fn a_run_whose_model_answers_while_a_message_waits_answers_it_too() {
    let mut m = machine();
    m.start();
    steer(&mut m, "and in euros");
    let request = model(m.on_model_reply(text("The total is 100 dollars.")));
    let texts: Vec<(Role, &str)> = request
        .messages
        .iter()
        .skip(1)
        .map(|message| (message.role, message.text_content()))
        .collect();
    assert_eq!(
        texts,
        [
            (Role::User, "What is up?"),
            (Role::Assistant, "The total is 100 dollars."),
            (Role::User, "and in euros"),
        ]
    );
    let outcome = finished(m.on_model_reply(text("That is 92 euros.")));
    assert_eq!(outcome.answer.as_deref(), Some("That is 92 euros."));
    assert_eq!(outcome.iterations, 2);
}

#[test]
fn empty_messages_and_messages_to_an_ended_run_are_refused() {
    let mut m = machine();
    m.start();
    assert_eq!(send(&mut m, "   "), Err(SteerError::Empty));
    finished(m.on_model_reply(text("Done.")));
    assert_eq!(
        send(&mut m, "too late"),
        Err(SteerError::NotRunning(m.run_id()))
    );
    assert!(!m.has_steering());
}

#[test]
fn a_message_during_the_last_allowed_step_is_refused_not_lost() {
    let mut m = one_iteration();
    model(m.start());
    m.take_events();
    assert_eq!(
        send(&mut m, "and in euros"),
        Err(SteerError::TooLate(m.run_id())),
        "the model may answer now, and the run has no further call to read it"
    );
    let outcome = finished(m.on_model_reply(text("The total is 100 dollars.")));
    assert_eq!(outcome.answer.as_deref(), Some("The total is 100 dollars."));
    assert!(user_messages(&m.take_events()).is_empty());
    assert!(!m.has_steering());
}

#[test]
fn a_message_during_the_forced_summary_is_refused() {
    let mut m = one_iteration();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("s1", "q")])));
    let summary = model(succeed_all(&mut m, &batch));
    assert_eq!(summary.purpose, CallPurpose::Finalize);
    assert_eq!(
        send(&mut m, "and in euros"),
        Err(SteerError::TooLate(m.run_id()))
    );
}

#[test]
fn a_message_during_the_last_batch_is_read_by_the_summary() {
    let mut m = one_iteration();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("s1", "q")])));
    steer(&mut m, "only 2026");
    let summary = model(succeed_all(&mut m, &batch));
    assert_eq!(summary.purpose, CallPurpose::Finalize);
    assert!(user_texts(&summary).contains(&"only 2026"));
    assert_eq!(user_messages(&m.take_events()), ["only 2026"]);
}

#[test]
fn a_message_taken_that_no_llm_call_read_stays_in_the_session() {
    let mut m = machine();
    m.start();
    steer(&mut m, "and in euros");
    let outcome = finished(m.on_model_reply(Err(LlmError::Timeout { seconds: 1.0 })));
    assert_eq!(outcome.status, RunStatus::Failed);
    let last = outcome.messages.last().unwrap();
    assert_eq!(last.message.role, Role::User);
    assert_eq!(last.message.text_content(), "and in euros");
    assert_eq!(user_messages(&m.take_events()), ["and in euros"]);
}
