//! The scripted provider as a user tests an agent with it: `examples/scripted_agent.rs` (a
//! custom tool, the scripted model answering from `examples/shop.script.toml`), run here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[allow(dead_code)]
#[path = "../../../examples/scripted_agent.rs"]
mod example;

use agentloop::{RunStatus, ToolStatus};

#[tokio::test]
async fn the_scripted_model_calls_the_agents_tool_and_answers() {
    let report = example::run_agent("How much are 3 apples?").await.unwrap();
    assert_eq!(report.status, Some(RunStatus::Completed), "{report:?}");
    assert_eq!(
        report.calls,
        [("shop.price".to_string(), ToolStatus::Success)]
    );
    assert_eq!(report.answer, "Three apples cost 1.50 EUR.");
}

#[tokio::test]
async fn arguments_that_do_not_fit_the_schema_are_refused_before_the_tool_runs() {
    let report = example::run_agent("And a pear?").await.unwrap();
    assert_eq!(report.status, Some(RunStatus::Completed), "{report:?}");
    assert_eq!(report.calls.len(), 1, "{report:?}");
    assert_ne!(report.calls[0].1, ToolStatus::Success, "{report:?}");
    assert_eq!(report.answer, "Sorry, I could not get the price of pears.");
}

#[tokio::test]
async fn a_run_that_asks_more_steps_than_the_script_has_fails_clearly() {
    let report = example::run_agent("One cherry, please").await.unwrap();
    assert_eq!(report.status, Some(RunStatus::Failed), "{report:?}");
    assert_eq!(
        report.calls,
        [("shop.price".to_string(), ToolStatus::Success)]
    );
    let error = report.error.unwrap();
    assert!(error.contains("ran out of steps"), "{error}");
    assert!(
        error.contains("scenario \"a script that ends too early\""),
        "{error}"
    );
    assert!(
        error.contains("has 1 step(s), and this run asks for step 2"),
        "{error}"
    );
}
