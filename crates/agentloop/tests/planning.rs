//! Planning and review end to end: a plan made before the loop (tolerant of fenced JSON with
//! prose, retried once when invalid), carried after the stable system prompt and kept current
//! with `write_plan`, or pausing the run with its question; a reviewer every few tool calls that
//! can stop the run or replace its plan.
//! The real LLM client talks to a scripted OpenAI-compatible server, the tools come from the test
//! MCP server, and everything is saved in an in-memory SQLite store.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{
    Event, EventKind, FinalizeReason, MessageKind, RunOutcome, RunStatus, Runtime, Store,
    core::protocol::{InputKind, Plan, SubTaskStatus},
};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use common::*;
use serde_json::{Value, json};

const SYSTEM_PROMPT: &str = "You are the planning test agent.";

/// A valid plan for "Report Q4": search the notes, then summarise.
fn q4_plan() -> Value {
    json!({
        "goal": "Report Q4",
        "sub_tasks": [
            {"id": "1", "description": "Search the notes", "status": "pending", "depends_on": []},
            {"id": "2", "description": "Summarise", "status": "pending", "depends_on": ["1"]}
        ],
        "needs_clarification": false,
        "clarification_question": null
    })
}

/// The plans of the run's `plan_updated` events, in order.
fn plans(events: &[Event]) -> Vec<Plan> {
    events
        .iter()
        .filter_map(|event| match &event.kind {
            EventKind::PlanUpdated { plan } => Some(plan.clone()),
            _ => None,
        })
        .collect()
}

/// The contents of a recorded request's messages, in order (empty for a message without text).
fn contents(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// The last message of a recorded request, as (role, content).
fn last_message(request: &Value) -> (String, String) {
    let message = request["messages"].as_array().unwrap().last().unwrap();
    (
        message["role"].as_str().unwrap().to_string(),
        message["content"].as_str().unwrap_or_default().to_string(),
    )
}

/// A call without tools: no `tools` key (or an empty list) and no `tool_choice`.
fn assert_no_tools(request: &Value, what: &str) {
    assert!(
        offered(request).is_empty(),
        "{what} is offered no tools: {}",
        request["tools"]
    );
    assert!(request.get("tool_choice").is_none(), "{what}: {request}");
}

/// The whole answer, from the `final_response` chunks.
fn final_text(events: &[Event]) -> String {
    find(events, "final_response")
        .into_iter()
        .map(|kind| match kind {
            EventKind::FinalResponse { delta } => delta.clone(),
            _ => String::new(),
        })
        .collect()
}

/// The run ends with exactly one `done` event, last, whose status is the outcome's.
fn assert_done(events: &[Event], outcome: &RunOutcome) {
    let done = find(events, "done");
    assert_eq!(done.len(), 1, "{:?}", types(events));
    assert_eq!(events.last().unwrap().kind.type_name(), "done");
    match done[0] {
        EventKind::Done {
            status,
            iterations,
            tools_used,
            message_id,
            ..
        } => {
            assert_eq!(*status, outcome.status);
            assert_eq!(*iterations, outcome.iterations);
            assert_eq!(*tools_used, outcome.tools_used);
            assert_eq!(*message_id, outcome.message_id);
        }
        other => panic!("not a done event: {other:?}"),
    }
}

/// The trace message of the run, as saved in the store.
async fn stored_trace(runtime: &Runtime, outcome: &RunOutcome) -> Value {
    let messages = runtime.store().messages(outcome.session_id).await.unwrap();
    let traces: Vec<_> = messages
        .iter()
        .filter(|message| message.kind == MessageKind::Trace)
        .collect();
    assert_eq!(traces.len(), 1, "one trace per run");
    traces[0].metadata.clone()
}

#[tokio::test]
async fn a_plan_is_made_first_rides_after_the_system_prompt_and_is_kept_current() {
    let fenced = format!(
        "Sure! Here is my plan:\n```json\n{}\n```\nI will start with the notes.",
        serde_json::to_string_pretty(&q4_plan()).unwrap()
    );
    let llm = ScriptedLlm::start(vec![
        Reply::text(fenced),
        Reply::tool_calls(vec![
            (
                "write_plan",
                json!({"sub_tasks": [{"id": "1", "status": "done"}]}),
            ),
            ("test__echo", json!({"text": "Q4 notes: revenue up 12%"})),
        ]),
        Reply::text("Q4 revenue grew 12%."),
    ])
    .await;
    let extra = format!(
        "[agent]\nsystem_prompt = \"{SYSTEM_PROMPT}\"\n\n[agent.planning]\nenabled = true\nmodel = \
         \"planner-model\"\n\n[tools.\"test.add\"]\nrequires_clarity = true\n"
    );
    let runtime = runtime(&llm, None, &extra).await;
    let (events, outcome) = run(&runtime, "Report on Q4").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Q4 revenue grew 12%."));
    assert_eq!(final_text(&events), "Q4 revenue grew 12%.");
    assert_eq!(outcome.finalize_reason, None);
    assert_done(&events, &outcome);
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "plan, step with the calls, answer");

    // 1. The planning call: the planner model, no tools, the instruction last.
    let planning = &requests[0];
    assert_eq!(planning["model"], "planner-model");
    assert_no_tools(planning, "the planner");
    assert_eq!(
        planning["messages"][0],
        json!({"role": "system", "content": SYSTEM_PROMPT})
    );
    let (role, instruction) = last_message(planning);
    assert_eq!(role, "system");
    assert!(
        instruction.starts_with("Before doing anything, make a plan"),
        "{instruction}"
    );
    assert!(
        instruction.contains("- test__echo: Returns its text unchanged\n"),
        "{instruction}"
    );
    assert!(
        !instruction.contains("- write_plan:"),
        "the plan instruction does not list write_plan: {instruction}"
    );
    assert!(
        instruction.contains("- test__add: Adds two numbers (only once the request is clear)\n"),
        "a tool that requires a clear request is listed, marked: {instruction}"
    );
    assert!(instruction.contains("needs_clarification"), "{instruction}");
    assert_eq!(contents(planning)[1], "Report on Q4");

    // 2. The plan was read out of the fence and the prose, and reported.
    let plans = plans(&events);
    assert_eq!(plans.len(), 2, "{:?}", types(&events));
    assert_eq!(plans[0].goal, "Report Q4");
    let initial: Vec<(&str, SubTaskStatus)> = plans[0]
        .sub_tasks
        .iter()
        .map(|task| (task.id.as_str(), task.status))
        .collect();
    assert_eq!(
        initial,
        [("1", SubTaskStatus::Pending), ("2", SubTaskStatus::Pending)]
    );
    assert_eq!(plans[0].sub_tasks[1].depends_on, ["1"]);

    // 3. The first step: the system prompt unchanged, then the plan block, then the question.
    let step = &requests[1];
    assert_eq!(step["model"], "scripted", "steps use the run's model");
    assert_eq!(step["messages"][0], requests[0]["messages"][0]);
    assert_eq!(step["messages"][1]["role"], "system");
    let block = contents(step)[1].clone();
    assert!(
        block.starts_with("<Plan>\nGoal: Report Q4\n- [pending] 1: Search the notes\n- [pending] 2: Summarise (after 1)\n</Plan>"),
        "{block}"
    );
    assert!(block.contains("No tool calls yet."), "{block}");
    assert!(block.ends_with("Keep the plan current with write_plan as you progress."));
    assert_eq!(contents(step)[2], "Report on Q4");
    assert_eq!(step["tool_choice"], "auto");
    let tools = offered(step);
    assert!(tools.contains(&"write_plan".to_string()), "{tools:?}");
    assert!(tools.contains(&"test__echo".to_string()), "{tools:?}");
    assert!(
        tools.contains(&"test__add".to_string()),
        "the plan said the request is clear, so gated tools are offered: {tools:?}"
    );

    // 4. write_plan changed the plan; the echo ran on the test MCP server.
    assert_eq!(plans[1].goal, "Report Q4");
    assert_eq!(plans[1].sub_tasks.len(), 2);
    assert_eq!(plans[1].sub_tasks[0].status, SubTaskStatus::Done);
    assert_eq!(plans[1].sub_tasks[1].status, SubTaskStatus::Pending);
    assert_eq!(outcome.tools_used, 2, "write_plan counts as a call");
    let mut ran = statuses(&outcome.records);
    ran.sort_unstable();
    assert_eq!(ran, [("test.echo", "success"), ("write_plan", "success")]);
    // Each result answers its call, in the order of the calls.
    let results = tool_messages(&requests[2]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0].0, "call_1");
    assert!(
        results[0]
            .1
            .starts_with("Plan updated.\nGoal: Report Q4\n- [done] 1: Search the notes\n"),
        "{}",
        results[0].1
    );
    assert_eq!(
        results[1],
        ("call_2".to_string(), "Q4 notes: revenue up 12%".to_string())
    );

    // 5. The next step sees the updated plan and the tool history, with the catalog's names.
    let after = &requests[2];
    assert_eq!(after["messages"][0], requests[0]["messages"][0]);
    let block = contents(after)[1].clone();
    assert!(
        block.starts_with("<Plan>\nGoal: Report Q4\n- [done] 1: Search the notes\n"),
        "{block}"
    );
    assert!(block.contains("<ToolCallHistory>\n"), "{block}");
    assert!(
        block.contains(". test.echo (success, ") && block.contains("): Q4 notes: revenue up 12%\n"),
        "{block}"
    );
    assert!(block.contains(". write_plan (success, "), "{block}");
    assert!(!block.contains("No tool calls yet."), "{block}");
    assert!(offered(after).contains(&"write_plan".to_string()));

    // 6. The outcome, the event log and the trace keep the final plan.
    let plan = outcome.plan.clone().expect("the outcome has the plan");
    assert_eq!(plan, plans[1]);
    let stored = runtime.store().events(outcome.run_id, 0).await.unwrap();
    assert_eq!(stored, events, "the event log is what the client received");
    assert_eq!(
        types(&stored)
            .iter()
            .filter(|kind| **kind == "plan_updated")
            .count(),
        2
    );
    let trace = stored_trace(&runtime, &outcome).await;
    assert_eq!(trace["plan"], json!(plan));
    assert_eq!(trace["plan"]["sub_tasks"][0]["status"], "done");
    assert_eq!(trace["plan"]["sub_tasks"][1]["status"], "pending");
    assert!(trace.get("notes").is_none(), "{trace}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn an_invalid_plan_is_sent_back_once_then_the_run_goes_on_without_one() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("I will search the notes first."),
        Reply::text("{\"goal\": \"Report Q4\"}"),
        Reply::text("I answer without a plan."),
    ])
    .await;
    let extra = "[agent]\nmax_iterations = 4\n\n[agent.planning]\nenabled = true\n\n\
                 [tools.\"test.echo\"]\nrequires_clarity = true\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "Report on Q4").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I answer without a plan."));
    assert_done(&events, &outcome);
    assert!(plans(&events).is_empty(), "{:?}", types(&events));
    assert!(outcome.plan.is_none());
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "plan, plan again, step");

    // Without planning.model, the planner uses the run's model.
    assert_eq!(requests[0]["model"], "scripted");
    assert_no_tools(&requests[0], "the planner");
    assert!(
        last_message(&requests[0])
            .1
            .contains("(only once the request is clear)"),
        "a gated tool is listed to the planner, marked"
    );

    // The retry: the same instruction, the rejected reply, and what was wrong with it.
    let retry = &requests[1];
    assert_no_tools(retry, "the planner's retry");
    let messages = retry["messages"].as_array().unwrap();
    let n = messages.len();
    assert_eq!(
        messages[n - 3],
        requests[0]["messages"]
            .as_array()
            .unwrap()
            .last()
            .unwrap()
            .clone()
    );
    assert_eq!(
        messages[n - 2],
        json!({"role": "assistant", "content": "I will search the notes first."})
    );
    assert_eq!(messages[n - 1]["role"], "user");
    let correction = messages[n - 1]["content"].as_str().unwrap();
    assert!(
        correction.starts_with("That reply was not valid: the reply holds no JSON object"),
        "{correction}"
    );
    assert!(
        correction.ends_with("Answer again with only the corrected JSON object."),
        "{correction}"
    );

    // The step after two invalid plans: no plan block, and the request was never clarified.
    let step = &requests[2];
    assert_eq!(contents(step)[1], "Report on Q4", "no <Plan> block");
    assert!(
        !contents(step)
            .iter()
            .any(|content| content.contains("<Plan>"))
    );
    assert!(
        !contents(step)
            .iter()
            .any(|content| content.contains("That reply was not valid")),
        "the retry is not part of the conversation"
    );
    let tools = offered(step);
    assert!(tools.contains(&"write_plan".to_string()), "{tools:?}");
    assert!(
        !tools.contains(&"test__echo".to_string()),
        "without a plan the request was never declared clear: {tools:?}"
    );

    // The trace says why there is no plan.
    let trace = stored_trace(&runtime, &outcome).await;
    assert!(trace.get("plan").is_none(), "{trace}");
    let notes = trace["notes"].as_array().unwrap();
    assert_eq!(notes.len(), 1, "{notes:?}");
    let note = notes[0].as_str().unwrap();
    assert!(note.contains("went on without a plan"), "{note}");
    assert!(
        note.contains("sub_tasks"),
        "the note says what was wrong with the second reply: {note}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_reviewer_stop_ends_the_run_with_a_summary_that_says_why() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "no Q4 rows"})),
        Reply::text(
            "Verdict:\n```json\n{\"action\":\"stop\",\"reason\":\"the data is not there\"}\n```",
        ),
        Reply::text("I could not find any Q4 data, so I stopped."),
    ])
    .await;
    let extra = "[agent]\nmax_iterations = 4\n\n[agent.review]\nevery_n_tool_calls = 1\n\
                 model = \"review-model\"\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "Report on Q4").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("I could not find any Q4 data, so I stopped.")
    );
    assert_eq!(
        final_text(&events),
        "I could not find any Q4 data, so I stopped."
    );
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::ReviewStop));
    assert_eq!((outcome.iterations, outcome.tools_used), (1, 1));
    assert_done(&events, &outcome);
    assert!(plans(&events).is_empty());
    let forced: Vec<_> = find(&events, "forced_finalize");
    assert_eq!(
        forced,
        [&EventKind::ForcedFinalize {
            reason: FinalizeReason::ReviewStop
        }]
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 3, "step, review, summary");
    assert_eq!(requests[0]["model"], "scripted");

    // The review: its own model, no tools, the verdict asked for last, the tool history in it.
    let review = &requests[1];
    assert_eq!(review["model"], "review-model");
    assert_no_tools(review, "the reviewer");
    assert_eq!(review["messages"][0], requests[0]["messages"][0]);
    let (role, instruction) = last_message(review);
    assert_eq!(role, "system");
    assert!(
        instruction.starts_with("Stop working on the request for a moment and review"),
        "{instruction}"
    );
    assert!(
        instruction.contains("The plan:\n(no plan)\n"),
        "{instruction}"
    );
    assert!(
        instruction.contains("- test.echo (success, ") && instruction.contains("): no Q4 rows\n"),
        "{instruction}"
    );
    assert!(
        instruction.contains("Step 1 of at most 4."),
        "{instruction}"
    );
    assert!(
        instruction.contains("{\"action\": \"stop\""),
        "{instruction}"
    );
    assert_eq!(
        tool_messages(review),
        [(String::from("call_1"), String::from("no Q4 rows"))]
    );

    // The summary: the run's model, tools refused, the reviewer's reason in the instruction.
    let summary = &requests[2];
    assert_eq!(summary["model"], "scripted");
    assert_eq!(summary["tool_choice"], "none");
    let (role, closing) = last_message(summary);
    assert_eq!(role, "system");
    assert!(
        closing.starts_with("Stop calling tools now: a review of the progress decided to stop."),
        "{closing}"
    );
    assert!(
        closing.ends_with("The reviewer stopped the work: the data is not there"),
        "{closing}"
    );

    // Saved: the run row's reason, and the review in the trace.
    let row = runtime.store().run(outcome.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Completed);
    assert_eq!(row.finalize_reason, Some(FinalizeReason::ReviewStop));
    let trace = stored_trace(&runtime, &outcome).await;
    assert_eq!(
        trace["reviews"],
        json!([{"iteration": 1, "after_tool_calls": 1, "action": "stop",
                "reason": "the data is not there"}])
    );
    assert!(trace.get("plan").is_none(), "{trace}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_reviewer_replan_replaces_the_plan_and_the_run_goes_on() {
    let new_plan = json!({
        "goal": "Ask finance for the Q4 ledger",
        "sub_tasks": [{"id": "1", "description": "Fetch the ledger"}],
        "needs_clarification": false
    });
    let verdict = json!({"action": "replan", "reason": "the notes hold nothing", "plan": new_plan});
    let llm = ScriptedLlm::start(vec![
        Reply::text(q4_plan().to_string()),
        Reply::tool_call("test__echo", json!({"text": "no notes"})),
        Reply::text(verdict.to_string()),
        Reply::text("Finance keeps the Q4 ledger."),
    ])
    .await;
    let extra = "[agent]\nmax_iterations = 4\n\n[agent.planning]\nenabled = true\n\n\
                 [agent.review]\nevery_n_tool_calls = 1\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "Report on Q4").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Finance keeps the Q4 ledger.")
    );
    assert_eq!(outcome.finalize_reason, None);
    assert!(find(&events, "forced_finalize").is_empty());
    assert_done(&events, &outcome);
    let requests = llm.requests();
    assert_eq!(requests.len(), 4, "plan, step, review, step");

    // The review (on the run's model, as review.model is unset) reads the current plan; it is
    // given no <Plan> block of its own.
    let review = &requests[2];
    assert_eq!(review["model"], "scripted");
    assert_no_tools(review, "the reviewer");
    let (_, instruction) = last_message(review);
    assert!(
        instruction.contains("The plan:\nGoal: Report Q4\n- [pending] 1: Search the notes\n"),
        "{instruction}"
    );
    assert!(!contents(review).iter().any(|c| c.starts_with("<Plan>")));

    // The new plan is reported and carried by the next step.
    let plans = plans(&events);
    let goals: Vec<&str> = plans.iter().map(|plan| plan.goal.as_str()).collect();
    assert_eq!(goals, ["Report Q4", "Ask finance for the Q4 ledger"]);
    assert_eq!(plans[1].sub_tasks[0].status, SubTaskStatus::Pending);
    let step = &requests[3];
    assert_eq!(step["messages"][0], requests[0]["messages"][0]);
    let block = contents(step)[1].clone();
    assert!(
        block.starts_with(
            "<Plan>\nGoal: Ask finance for the Q4 ledger\n- [pending] 1: Fetch the ledger\n</Plan>"
        ),
        "{block}"
    );
    assert!(block.contains(". test.echo (success, "), "{block}");
    assert!(!block.contains("Report Q4"), "{block}");
    assert_eq!(
        outcome.plan.as_ref().unwrap().goal,
        "Ask finance for the Q4 ledger"
    );

    let trace = stored_trace(&runtime, &outcome).await;
    assert_eq!(trace["plan"]["goal"], "Ask finance for the Q4 ledger");
    assert_eq!(trace["reviews"][0]["action"], "replan");
    assert_eq!(trace["reviews"][0]["reason"], "the notes hold nothing");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_plan_that_needs_clarification_pauses_the_run_with_its_question() {
    let plan = json!({
        "goal": "Find what Alex said about Q4",
        "sub_tasks": [],
        "needs_clarification": true,
        "clarification_question": "Which Alex do you mean?"
    });
    let llm = ScriptedLlm::start(vec![Reply::text(plan.to_string())]).await;
    let extra = "[agent]\nask_user = true\n\n[agent.planning]\nenabled = true\n\n\
                 [tools.\"test.echo\"]\nrequires_clarity = true\n";
    let runtime = runtime(&llm, None, extra).await;
    let (events, outcome) = run(&runtime, "What did Alex say about Q4?").await;

    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    assert_eq!(outcome.answer, None);
    assert_done(&events, &outcome);
    assert_eq!(
        types(&events),
        [
            "run_started",
            "llm_call",
            "plan_updated",
            "input_required",
            "done"
        ]
    );
    let request = outcome.input_required.clone().unwrap();
    assert_eq!(request.kind, InputKind::Clarification);
    assert_eq!(request.question.as_deref(), Some("Which Alex do you mean?"));
    assert!(request.calls.is_empty());
    assert_eq!(llm.requests().len(), 1, "no step before the answer");
    let instruction = last_message(&llm.requests()[0]).1;
    assert!(
        instruction.contains("- ask_user: Ask the user one short question"),
        "{instruction}"
    );
    assert!(
        instruction
            .contains("- test__echo: Returns its text unchanged (only once the request is clear)"),
        "{instruction}"
    );

    // Saved: the paused run and the question, as part of the conversation.
    let row = runtime.store().run(outcome.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::AwaitingInput);
    let messages = runtime.store().messages(outcome.session_id).await.unwrap();
    let question = messages
        .iter()
        .find(|message| message.metadata["clarification_question"] == "plan")
        .expect("the question is saved");
    assert_eq!(question.message.text_content(), "Which Alex do you mean?");
    runtime.shutdown().await;
}
