//! Messages the user sends while the run works: they join the conversation before the next
//! LLM call, never in the middle of a batch, and a run that would end answers them first.

use super::*;

fn steer(m: &mut RunMachine, text: &str) {
    let step = m.handle(
        Input::Steer {
            text: text.to_string(),
        },
        m.state.now,
    );
    assert!(step.is_none(), "a message changes no step");
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
fn empty_messages_and_messages_to_an_ended_run_change_nothing() {
    let mut m = machine();
    m.start();
    steer(&mut m, "   ");
    finished(m.on_model_reply(text("Done.")));
    steer(&mut m, "too late");
    assert!(!m.has_steering());
}
