//! Planning, clarification and review, on the machine.

use agentloop_protocol::{InputKind, SubTaskStatus};

use super::*;
use crate::settings::ToolSettings;

const PLAN: &str = r#"{"goal": "Report Q4", "sub_tasks": [
    {"id": "1", "description": "Search the notes", "status": "pending", "depends_on": []},
    {"id": "2", "description": "Summarise", "status": "pending", "depends_on": ["1"]}],
    "needs_clarification": false, "clarification_question": null}"#;

const UNCLEAR_PLAN: &str = r#"{"goal": "Find what Alex said about Q4", "sub_tasks": [],
    "needs_clarification": true, "clarification_question": "Which Alex do you mean?"}"#;

/// `kb.search`, and `kb.fetch` which requires a clear request.
fn guided(configure: impl FnOnce(&mut AgentSettings)) -> RunMachine {
    let mut settings = AgentSettings::default();
    configure(&mut settings);
    let tools: Vec<Arc<dyn Tool>> = ["kb.search", "kb.fetch"]
        .iter()
        .map(|name| {
            Arc::new(FnTool::new(*name, "test tool", schema(), |_, _| async {
                Ok(ToolOutput::text("unused"))
            })) as Arc<dyn Tool>
        })
        .collect();
    let mut tool_settings = BTreeMap::new();
    tool_settings.insert(
        "kb.fetch".to_string(),
        ToolSettings {
            requires_clarity: true,
            ..ToolSettings::default()
        },
    );
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "What does Alex say about Q4?".into(),
        attachments: Vec::new(),
        history: Vec::new(),
        system_prompt: "SYSTEM".into(),
        model: None,
        max_iterations: settings.max_iterations,
        context: RunContext::default(),
        started_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
        policy: crate::policy::RunPolicy::default(),
        client_tools: Vec::new(),
        budget: Default::default(),
    };
    RunMachine::new(
        input,
        Arc::new(settings),
        Arc::new(ToolCatalog::new(tools, &tool_settings)),
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

fn planning() -> RunMachine {
    guided(|settings| settings.planning.enabled = true)
}

fn offered(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|tool| tool.name.clone()).collect()
}

fn contents(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .iter()
        .map(|message| message.content.clone().unwrap_or_default())
        .collect()
}

fn plans(events: &[EventKind]) -> Vec<agentloop_protocol::Plan> {
    events
        .iter()
        .filter_map(|event| match event {
            EventKind::PlanUpdated { plan } => Some(plan.clone()),
            _ => None,
        })
        .collect()
}

fn answer(text: &str) -> InputAnswer {
    InputAnswer {
        answer: Some(text.into()),
        ..InputAnswer::default()
    }
}

#[test]
fn the_plan_comes_first_then_rides_along_after_the_stable_system_prompt() {
    let mut m = planning();
    let request = model(m.start());
    assert_eq!(request.purpose, CallPurpose::Plan);
    assert!(request.tools.is_empty(), "the planner is offered no tools");
    let instruction = contents(&request).last().cloned().unwrap();
    assert!(
        instruction.contains("- kb__search: test tool"),
        "{instruction}"
    );
    assert!(instruction.contains("needs_clarification"), "{instruction}");

    let step = model(m.on_model_reply(text(PLAN)));
    assert_eq!(step.purpose, CallPurpose::Step);
    let events = m.take_events();
    assert_eq!(plans(&events)[0].sub_tasks.len(), 2);
    let messages = contents(&step);
    assert_eq!(messages[0], "SYSTEM");
    assert!(
        messages[1].starts_with("<Plan>\nGoal: Report Q4"),
        "{}",
        messages[1]
    );
    assert!(
        messages[1].contains("No tool calls yet."),
        "{}",
        messages[1]
    );
    assert_eq!(messages[2], "What does Alex say about Q4?");
    assert!(offered(&step).contains(&"write_plan".to_string()));
    // The plan said the request is clear: gated tools are offered.
    assert!(offered(&step).contains(&"kb__fetch".to_string()));

    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "Q4")])));
    let next = model(succeed_all(&mut m, &batch));
    let messages = contents(&next);
    assert_eq!(messages[0], "SYSTEM", "the system prompt never changes");
    assert!(
        messages[1].contains("1. kb.search (success, 3ms): result of c1"),
        "{}",
        messages[1]
    );
    let outcome = finished(m.on_model_reply(text("Alex is upbeat.")));
    assert_eq!(outcome.plan.unwrap().goal, "Report Q4");
    let trace = outcome
        .messages
        .iter()
        .find(|message| message.kind == MessageKind::Trace)
        .unwrap();
    assert_eq!(trace.metadata["plan"]["goal"], "Report Q4");
}

#[test]
fn write_plan_changes_the_plan_without_reaching_the_driver() {
    let mut m = planning();
    m.start();
    m.on_model_reply(text(PLAN));
    m.take_events();
    let update = json!({"sub_tasks": [
        {"id": "1", "status": "done"},
        {"id": "3", "description": "Check the figures", "depends_on": ["1"]}]});
    let step = m.on_model_reply(calls(&[("w1", "write_plan", &update.to_string())]));
    // Nothing for the driver to run: the next step is the model again.
    let request = model(step);
    let events = m.take_events();
    let plan = plans(&events).pop().unwrap();
    assert_eq!(plan.sub_tasks[0].status, SubTaskStatus::Done);
    assert_eq!(plan.sub_tasks[2].id, "3");
    assert_eq!(
        tool_events(&events),
        [("w1".to_string(), ToolStatus::Success)]
    );
    assert!(contents(&request)[1].contains("- [done] 1: Search the notes"));
    assert!(contents(&request)[1].contains("- [pending] 3: Check the figures (after 1)"));

    // A change that breaks the plan is a tool error the model can repair; the plan stays.
    let broken = json!({"sub_tasks": [{"id": "9", "status": "done"}]});
    model(m.on_model_reply(calls(&[("w2", "write_plan", &broken.to_string())])));
    let events = m.take_events();
    assert!(plans(&events).is_empty());
    assert_eq!(
        tool_events(&events),
        [("w2".to_string(), ToolStatus::Error)]
    );
    let outcome = finished(m.on_model_reply(text("done")));
    assert_eq!(outcome.tools_used, 1);
    assert!(
        outcome.records[1]
            .error
            .as_deref()
            .unwrap()
            .contains("no sub-task \"9\"")
    );
}

#[test]
fn an_invalid_plan_is_sent_back_once_then_the_run_goes_on_without_one() {
    let mut m = planning();
    m.start();
    let retry = model(m.on_model_reply(text("{\"goal\": \"x\"}")));
    assert_eq!(retry.purpose, CallPurpose::Plan);
    let messages = contents(&retry);
    assert_eq!(messages[messages.len() - 2], "{\"goal\": \"x\"}");
    let correction = messages.last().unwrap();
    assert!(
        correction.contains("That reply was not valid"),
        "{correction}"
    );
    assert!(correction.contains("sub_tasks"), "{correction}");

    // A valid second answer is taken.
    let mut fixed = planning();
    fixed.start();
    fixed.on_model_reply(text("not json at all"));
    let step = model(fixed.on_model_reply(text(PLAN)));
    assert_eq!(step.purpose, CallPurpose::Step);
    assert_eq!(plans(&fixed.take_events()).len(), 1);

    // A second invalid one: no plan, and the trace says so.
    let step = model(m.on_model_reply(text("still no plan")));
    assert_eq!(step.purpose, CallPurpose::Step);
    assert!(!contents(&step)[1].starts_with("<Plan>"));
    assert!(plans(&m.take_events()).is_empty());
    // Without a plan, the request was never declared clear.
    assert!(!offered(&step).contains(&"kb__fetch".to_string()));
    let outcome = finished(m.on_model_reply(text("answer")));
    assert!(outcome.plan.is_none());
    let trace = outcome
        .messages
        .iter()
        .find(|message| message.kind == MessageKind::Trace)
        .unwrap();
    let notes = trace.metadata["notes"][0].as_str().unwrap();
    assert!(notes.contains("went on without a plan"), "{notes}");
}

#[test]
fn an_unclear_request_pauses_with_the_question_and_goes_on_with_the_answer() {
    let mut m = planning();
    m.start();
    let outcome = finished(m.on_model_reply(text(UNCLEAR_PLAN)));
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    let events = m.take_events();
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::InputRequired { kind: InputKind::Clarification, question: Some(q), calls, .. }
            if q == "Which Alex do you mean?" && calls.is_empty()
    )));
    assert_eq!(m.question().as_deref(), Some("Which Alex do you mean?"));

    // Approvals and empty answers do not fit; the run stays paused.
    let refused = m.resume(&InputAnswer {
        approve: vec!["x".into()],
        ..InputAnswer::default()
    });
    assert!(refused.unwrap_err().to_string().contains("Which Alex"));
    assert!(m.resume(&answer("  ")).is_err());
    assert!(m.is_paused());

    // The answer resumes it; the question and the answer are in the conversation.
    let request = model(m.resume(&answer("Alex Kim from sales")).unwrap());
    assert_eq!(request.purpose, CallPurpose::Step);
    let messages = contents(&request);
    let n = messages.len();
    assert_eq!(messages[n - 3], "What does Alex say about Q4?");
    assert_eq!(messages[n - 2], "Which Alex do you mean?");
    assert_eq!(messages[n - 1], "Alex Kim from sales");
    assert_eq!(request.messages[n - 1].role, Role::User);
    assert!(offered(&request).contains(&"kb__fetch".to_string()));
    let outcome = finished(m.on_model_reply(text("Alex Kim says Q4 was strong.")));
    let trace = outcome
        .messages
        .iter()
        .find(|message| message.kind == MessageKind::Trace)
        .unwrap();
    assert_eq!(
        trace.metadata["clarifications"][0]["answer"],
        "Alex Kim from sales"
    );
    assert_eq!(trace.metadata["clarifications"][0]["source"], "plan");
}

#[test]
fn gated_tools_wait_for_an_answer_to_ask_user() {
    let mut m = guided(|settings| settings.ask_user = true);
    let request = model(m.start());
    assert_eq!(offered(&request), ["kb__search", "ask_user"]);

    // Called anyway, a gated tool is blocked with a way forward.
    m.on_model_reply(calls(&[("f1", "kb__fetch", "{\"q\": \"Q4\"}")]));
    let events = m.take_events();
    assert_eq!(
        tool_events(&events),
        [("f1".to_string(), ToolStatus::Blocked)]
    );

    let question = json!({"question": "Which Alex?"}).to_string();
    let outcome = finished(m.on_model_reply(calls(&[
        ("a1", "ask_user", question.as_str()),
        ("s1", "kb__search", "{\"q\": \"Alex\"}"),
    ])));
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    assert!(m.take_events().iter().any(|event| matches!(
        event,
        EventKind::InputRequired { kind: InputKind::Clarification, question: Some(q), .. }
            if q == "Which Alex?"
    )));

    // The snapshot keeps the question across a restart.
    let mut m = super::recovery::saved_and_restored(&mut m);
    assert_eq!(m.question().as_deref(), Some("Which Alex?"));

    // The answer resolves the question; the rest of the batch runs.
    let batch = tools(m.resume(&answer("Alex Kim")).unwrap());
    assert_eq!(batch.len(), 1);
    assert_eq!(batch[0].call_id, "s1");
    let request = model(succeed_all(&mut m, &batch));
    let ask_result = request
        .messages
        .iter()
        .find(|message| message.tool_call_id.as_deref() == Some("a1"))
        .unwrap();
    assert_eq!(
        ask_result.content.as_deref(),
        Some(json!({"answer": "Alex Kim"}).to_string().as_str())
    );
    assert!(offered(&request).contains(&"kb__fetch".to_string()));
}

#[test]
fn without_ask_user_the_tool_does_not_exist() {
    let mut m = guided(|_| {});
    let request = model(m.start());
    assert_eq!(offered(&request), ["kb__search"]);
    m.on_model_reply(calls(&[("a1", "ask_user", "{\"question\": \"?\"}")]));
    let events = m.take_events();
    assert_eq!(
        tool_events(&events),
        [("a1".to_string(), ToolStatus::Error)]
    );
}

fn reviewed(every: u32) -> RunMachine {
    guided(|settings| {
        settings.review.every_n_tool_calls = Some(every);
        settings.review.model = Some("reviewer-model".into());
        settings.max_iterations = 4;
    })
}

#[test]
fn a_reviewer_stop_ends_the_run_with_a_summary_of_what_is_missing() {
    let mut m = reviewed(2);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    // One call: not yet time for a review.
    assert_eq!(
        model(succeed_all(&mut m, &batch)).purpose,
        CallPurpose::Step
    );
    let batch = tools(m.on_model_reply(calls_owned(&[search("c2", "b")])));
    let review = model(succeed_all(&mut m, &batch));
    assert_eq!(review.purpose, CallPurpose::Review);
    assert_eq!(review.model.as_deref(), Some("reviewer-model"));
    assert!(review.tools.is_empty());
    let instruction = contents(&review).last().cloned().unwrap();
    assert!(
        instruction.contains("- kb.search (success"),
        "{instruction}"
    );

    let verdict = json!({"action": "stop", "reason": "the Q4 notes do not exist"}).to_string();
    let summary = model(m.on_model_reply(text(&verdict)));
    assert_eq!(summary.purpose, CallPurpose::Finalize);
    assert!(summary.tools.is_empty() || summary.tool_choice == ToolChoice::None);
    let last = contents(&summary).last().cloned().unwrap();
    assert!(last.contains("the Q4 notes do not exist"), "{last}");
    assert!(m.take_events().contains(&EventKind::ForcedFinalize {
        reason: FinalizeReason::ReviewStop
    }));
    let outcome = finished(m.on_model_reply(text("I found no Q4 notes.")));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::ReviewStop));
    let trace = outcome
        .messages
        .iter()
        .find(|message| message.kind == MessageKind::Trace)
        .unwrap();
    assert_eq!(trace.metadata["reviews"][0]["action"], "stop");
}

#[test]
fn a_replan_replaces_the_plan_and_the_run_goes_on() {
    let mut m = reviewed(1);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    m.take_events();
    let verdict = json!({"action": "replan", "reason": "search found nothing", "plan":
        {"goal": "Ask finance", "sub_tasks": [{"id": "1", "description": "Fetch the ledger"}],
         "needs_clarification": false}});
    let step = model(m.on_model_reply(text(&verdict.to_string())));
    assert_eq!(step.purpose, CallPurpose::Step);
    assert_eq!(plans(&m.take_events())[0].goal, "Ask finance");
    assert!(contents(&step)[1].contains("Goal: Ask finance"));
}

#[test]
fn an_invalid_verdict_is_retried_once_then_ignored() {
    let mut m = reviewed(1);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let retry = model(m.on_model_reply(text("{\"action\": \"ask_user\"}")));
    assert_eq!(retry.purpose, CallPurpose::Review);
    assert!(contents(&retry).last().unwrap().contains("question"));
    let step = model(m.on_model_reply(text("no idea")));
    assert_eq!(step.purpose, CallPurpose::Step);
}

#[test]
fn a_reviewer_question_pauses_the_run() {
    let mut m = reviewed(1);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let verdict = json!({"action": "ask_user", "question": "Which quarter of which year?"});
    let outcome = finished(m.on_model_reply(text(&verdict.to_string())));
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    let step = model(m.resume(&answer("Q4 2025")).unwrap());
    assert_eq!(contents(&step).last().unwrap(), "Q4 2025");
}

#[test]
fn the_step_limit_gets_one_review_before_the_summary() {
    let mut m = reviewed(100);
    m.start();
    let mut step = m.on_model_reply(calls_owned(&[search("c0", "x")]));
    for round in 1..4 {
        let batch = tools(step);
        model(succeed_all(&mut m, &batch));
        step = m.on_model_reply(calls_owned(&[search(
            &format!("c{round}"),
            &round.to_string(),
        )]));
    }
    let batch = tools(step);
    let review = model(succeed_all(&mut m, &batch));
    assert_eq!(review.purpose, CallPurpose::Review);
    let summary = model(m.on_model_reply(text("{\"action\": \"continue\"}")));
    assert_eq!(summary.purpose, CallPurpose::Finalize);
    assert!(m.take_events().contains(&EventKind::ForcedFinalize {
        reason: FinalizeReason::MaxIterations
    }));
}

#[test]
fn a_replan_that_needs_the_user_asks_first() {
    let mut m = reviewed(1);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let verdict = json!({"action": "replan", "reason": "two Alexes", "plan":
        {"goal": "g", "sub_tasks": [], "needs_clarification": true,
         "clarification_question": "Alex Kim or Alex Roe?"}});
    let outcome = finished(m.on_model_reply(text(&verdict.to_string())));
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    assert_eq!(m.question().as_deref(), Some("Alex Kim or Alex Roe?"));
    assert_eq!(outcome.plan.unwrap().goal, "g");
}

#[test]
fn plan_updates_and_questions_do_not_count_toward_a_review() {
    let mut m = guided(|settings| {
        settings.planning.enabled = true;
        settings.review.every_n_tool_calls = Some(1);
    });
    m.start();
    m.on_model_reply(text(PLAN));
    let update = json!({"sub_tasks": [{"id": "1", "status": "done"}]}).to_string();
    let step = model(m.on_model_reply(calls(&[("w1", "write_plan", &update)])));
    assert_eq!(
        step.purpose,
        CallPurpose::Step,
        "no review after a plan update"
    );
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    let review = model(succeed_all(&mut m, &batch));
    assert_eq!(
        review.purpose,
        CallPurpose::Review,
        "a real tool call is progress"
    );
}
