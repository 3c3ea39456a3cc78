//! `examples/typed_answer.rs` (`Agent::run_typed` with a type's schema, the scripted model
//! answering from `examples/triage.script.toml`), run here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[allow(dead_code)]
#[path = "../../../examples/typed_answer.rs"]
mod example;

use agentloop::{ErrorCode, RunStatus, TypedRunError};
use example::{Priority, Triage};

#[tokio::test]
async fn the_answer_is_a_value_of_the_type_after_the_tool_call() {
    let (triage, outcome) = example::triage("The checkout page is down").await.unwrap();
    assert_eq!(
        triage,
        Triage {
            title: "Checkout page down".into(),
            priority: Priority::Urgent,
            team: "payments".into(),
        }
    );
    assert_eq!(outcome.tools_used, 1);
}

#[tokio::test]
async fn a_missing_field_is_named_to_the_model_and_repaired() {
    let (triage, _) = example::triage("Search is slow").await.unwrap();
    assert_eq!(triage.team, "platform");
}

#[tokio::test]
async fn an_answer_never_valid_ends_the_run_output_invalid() {
    let error = example::triage("Everything is broken").await.unwrap_err();
    let error = error.downcast::<TypedRunError>().unwrap();
    match *error {
        TypedRunError::NoValue {
            status, failure, ..
        } => {
            assert_eq!(status, RunStatus::Failed);
            let failure = failure.unwrap();
            assert_eq!(failure.code, ErrorCode::OutputInvalid);
            assert!(failure.message.contains("/priority"), "{}", failure.message);
        }
        other => panic!("{other:?}"),
    }
}
