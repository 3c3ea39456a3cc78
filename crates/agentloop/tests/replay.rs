//! A run is its first state and its inputs: fed again to a fresh machine, the inputs a real run
//! received (LLM replies, tool results, a human's answer, each with its time) yield the same
//! events, byte for byte, and the same final state. Runs with tools, approvals, planning,
//! sub-agents and guardrails (their verdicts are inputs), over the real runtime (scripted LLM
//! over HTTP, the test MCP server, a store).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::sync::{Arc, Mutex};

use agentloop::{
    Event, EventKind, RunRequest, Runtime,
    core::{
        Agent, CallPurpose, EventSink, Handled, Input, InputAnswer, InputLog, RunMachine, RunState,
        Step,
    },
};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use chrono::{DateTime, Utc};
use serde_json::json;
use uuid::Uuid;

/// Every run's first state and inputs, as the driver fed them.
#[derive(Default)]
struct Recorder {
    starts: Mutex<Vec<RunState>>,
    inputs: Mutex<Vec<(Uuid, Input, DateTime<Utc>)>>,
}

impl InputLog for Recorder {
    fn started(&self, state: &RunState) {
        self.starts.lock().unwrap().push(state.clone());
    }

    fn record(&self, run_id: Uuid, input: &Input, at: DateTime<Utc>) {
        self.inputs
            .lock()
            .unwrap()
            .push((run_id, input.clone(), at));
    }
}

impl Recorder {
    fn start_of(&self, run_id: Uuid) -> RunState {
        self.starts
            .lock()
            .unwrap()
            .iter()
            .find(|state| state.run_id() == run_id)
            .cloned()
            .unwrap()
    }

    fn inputs_of(&self, run_id: Uuid) -> Vec<(Input, DateTime<Utc>)> {
        self.inputs
            .lock()
            .unwrap()
            .iter()
            .filter(|(id, _, _)| *id == run_id)
            .map(|(_, input, at)| (input.clone(), *at))
            .collect()
    }
}

/// Feeds `run_id`'s recorded inputs to a machine made from its recorded first state; returns
/// the events, with the text the driver streams from each model reply rendered as the driver
/// renders it (one event per reply here, merged the same way on both sides).
fn replay(agent: &Agent, recorder: &Recorder, run_id: Uuid) -> (Vec<EventKind>, RunState) {
    let state = recorder.start_of(run_id);
    // A run refused for its workflow runs under the default policy, as the agent gave it.
    let policy = agent.policy_for(state.context()).unwrap_or_default();
    let services = agent.services();
    let mut machine = RunMachine::restore(
        state,
        policy,
        services.settings.clone(),
        services.tools.catalog(),
        services.counter.clone(),
    );
    let mut events = Vec::new();
    let mut purpose = None;
    for (input, at) in recorder.inputs_of(run_id) {
        if let (
            Some(purpose),
            Input::ModelReply {
                reply: Ok(reply), ..
            },
        ) = (purpose, &input)
            && let Some(text) = reply.text()
            // Held while output guardrails check the answer: the machine sends it.
            && !machine.holds_answer()
        {
            match purpose {
                CallPurpose::Step => events.push(EventKind::AssistantDelta { text: text.into() }),
                CallPurpose::Finalize => {
                    events.push(EventKind::FinalResponse { delta: text.into() });
                }
                _ => {}
            }
        }
        let step = machine.handle(input, at);
        events.extend(machine.take_changes().events);
        purpose = match step {
            Handled::Next(Step::CallModel(request)) => Some(request.purpose),
            Handled::Next(_) => None,
            _ => purpose,
        };
    }
    (merge_text(events), machine.state().clone())
}

/// Adjacent pieces of streamed text as one event: how the text was cut into chunks is the
/// transport's business, not the run's.
fn merge_text(events: Vec<EventKind>) -> Vec<EventKind> {
    let mut merged: Vec<EventKind> = Vec::new();
    for event in events {
        match (merged.last_mut(), event) {
            (
                Some(EventKind::AssistantDelta { text }),
                EventKind::AssistantDelta { text: more },
            ) => {
                text.push_str(&more);
            }
            (
                Some(EventKind::FinalResponse { delta }),
                EventKind::FinalResponse { delta: more },
            ) => delta.push_str(&more),
            (_, event) => merged.push(event),
        }
    }
    merged
}

/// The events of the run itself (a sub-agent's, relayed into its stream, are its own run's).
fn own(events: &[Event], run_id: Uuid) -> Vec<EventKind> {
    merge_text(
        events
            .iter()
            .filter(|event| event.run_id == run_id && event.parent_run_id.is_none())
            .map(|event| event.kind.clone())
            .collect(),
    )
}

fn same(replayed: &[EventKind], original: &[EventKind]) {
    let text = |events: &[EventKind]| -> Vec<String> {
        events
            .iter()
            .map(|event| serde_json::to_string(event).unwrap())
            .collect()
    };
    assert_eq!(text(replayed), text(original));
}

async fn runtime(llm: &ScriptedLlm, extra: &str) -> (Runtime, Arc<Recorder>) {
    let recorder = Arc::new(Recorder::default());
    let log = recorder.clone();
    let config = common::config(llm, None, extra);
    let runtime = Runtime::start_with(&config, move |agent| agent.input_log(log))
        .await
        .unwrap();
    (runtime, recorder)
}

#[tokio::test]
async fn a_run_with_tools_replays_exactly() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__add", json!({"a": 2, "b": 40})),
            ("test__echo", json!({"text": "hi"})),
            ("test__fail", json!({"message": "boom"})),
        ])
        .with_text("Let me check."),
        // A duplicate, an unknown tool and bad arguments: refused by the pipeline.
        Reply::tool_calls(vec![
            ("test__add", json!({"a": 2, "b": 40})),
            ("nope__missing", json!({})),
            ("test__add", json!({"a": "two"})),
        ]),
        Reply::text("42, and hi."),
    ])
    .await;
    let (runtime, recorder) = runtime(&llm, "").await;
    let (events, outcome) = runtime
        .agent()
        .run(RunRequest::new("add and echo"))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("42, and hi."));

    let (replayed, state) = replay(runtime.agent(), &recorder, outcome.run_id);
    same(&replayed, &own(&events, outcome.run_id));
    let outcome_again = state_outcome(&state);
    assert_eq!(outcome_again, serde_json::to_value(&outcome).unwrap());
}

#[tokio::test]
async fn a_run_checked_by_guardrails_replays_exactly() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hi"})).with_text("Let me check."),
        Reply::text("The password is hunter2."),
        Reply::text("hi, and nothing secret."),
    ])
    .await;
    let guardrails = "[[guardrails]]\nname = \"short\"\nkind = \"regex\"\non = \"input\"\n\
                      deny = [\"(?s).{200}\"]\n\
                      [[guardrails]]\nname = \"no-secrets\"\nkind = \"regex\"\non = \"output\"\n\
                      action = \"retry\"\ndeny = [\"(?i)password\"]\n";
    let (runtime, recorder) = runtime(&llm, guardrails).await;
    let (events, outcome) = runtime
        .agent()
        .run(RunRequest::new("echo hi"))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.answer.as_deref(), Some("hi, and nothing secret."));
    let verdicts = recorder
        .inputs_of(outcome.run_id)
        .iter()
        .filter(|(input, _)| matches!(input, Input::GuardrailVerdicts(_)))
        .count();
    assert_eq!(
        verdicts, 3,
        "the question, the refused answer, the repaired one"
    );

    let (replayed, state) = replay(runtime.agent(), &recorder, outcome.run_id);
    same(&replayed, &own(&events, outcome.run_id));
    assert_eq!(
        state_outcome(&state),
        serde_json::to_value(&outcome).unwrap()
    );
}

fn state_outcome(state: &RunState) -> serde_json::Value {
    serde_json::to_value(state.finished_outcome()).unwrap()
}

#[tokio::test]
async fn a_run_that_pauses_for_approval_and_resumes_replays_exactly() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__record", json!({"note": "write it"})),
            ("test__echo", json!({"text": "read it"})),
        ]),
        Reply::text("Recorded."),
    ])
    .await;
    let extra = "[tools.\"test.record\"]\nneeds_approval = true\n";
    let (runtime, recorder) = runtime(&llm, extra).await;
    let agent = runtime.agent();
    let (mut events, paused) = agent
        .run(RunRequest::new("record it"))
        .collect()
        .await
        .unwrap();
    assert_eq!(paused.status.as_str(), "awaiting_input");
    let call_id = paused.input_required.clone().unwrap().calls[0]
        .call_id
        .clone();

    let answer = InputAnswer {
        approve: vec![call_id],
        ..InputAnswer::default()
    };
    let resumed = agent.resume(paused.run_id, &answer).await.unwrap();
    let sink = Arc::new(Collect::default());
    let outcome = agent
        .run_resumed(resumed, sink.clone(), Default::default())
        .await;
    assert_eq!(outcome.answer.as_deref(), Some("Recorded."));
    events.extend(sink.events.lock().unwrap().drain(..));

    let (replayed, state) = replay(agent, &recorder, outcome.run_id);
    same(&replayed, &own(&events, outcome.run_id));
    assert_eq!(
        state_outcome(&state),
        serde_json::to_value(&outcome).unwrap()
    );
}

#[tokio::test]
async fn a_planned_run_with_a_sub_agent_replays_exactly() {
    let plan = json!({
        "goal": "Find X",
        "sub_tasks": [
            {"id": "1", "description": "Ask the researcher", "status": "pending", "depends_on": []}
        ],
        "needs_clarification": false,
        "clarification_question": null
    });
    let llm = ScriptedLlm::start(vec![
        Reply::text(plan.to_string()),
        Reply::tool_calls(vec![
            ("agent__researcher", json!({"task": "Find X"})),
            (
                "write_plan",
                json!({"sub_tasks": [{"id": "1", "status": "in_progress"}]}),
            ),
        ]),
        // The researcher.
        Reply::tool_call("test__echo", json!({"text": "X is 42"})),
        Reply::text("X is 42."),
        Reply::text("The researcher says X is 42."),
    ])
    .await;
    let extra = "[agent.planning]\nenabled = true\n\n[agents.researcher]\ndescription = \"Finds facts.\"\nsystem_prompt = \"You research.\"\ntools = [\"test.echo\"]\n";
    let (runtime, recorder) = runtime(&llm, extra).await;
    let (events, outcome) = runtime
        .agent()
        .run(RunRequest::new("find X"))
        .collect()
        .await
        .unwrap();
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The researcher says X is 42.")
    );
    assert!(
        events.iter().any(|e| e.parent_run_id.is_some()),
        "the sub-agent ran"
    );

    let (replayed, _) = replay(runtime.agent(), &recorder, outcome.run_id);
    same(&replayed, &own(&events, outcome.run_id));
}

/// Collects the events of a resumed run.
#[derive(Default)]
struct Collect {
    events: Mutex<Vec<Event>>,
}

impl EventSink for Collect {
    fn emit(&self, event: Event) {
        self.events.lock().unwrap().push(event);
    }
}

#[tokio::test]
async fn a_run_that_cannot_start_replays_exactly() {
    let llm = ScriptedLlm::start(vec![]).await;
    let (runtime, recorder) = runtime(&llm, "").await;
    let context = agentloop::core::RunContext {
        workflow: Some("nowhere".into()),
        ..Default::default()
    };
    let (events, outcome) = runtime
        .agent()
        .run(RunRequest::new("go").context(context))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status.as_str(), "failed");
    assert_eq!(
        outcome.failure.as_ref().unwrap().code.as_str(),
        "unknown_workflow"
    );

    let (replayed, state) = replay(runtime.agent(), &recorder, outcome.run_id);
    same(&replayed, &own(&events, outcome.run_id));
    assert_eq!(
        state_outcome(&state),
        serde_json::to_value(&outcome).unwrap()
    );
}
