//! Calls that need a human's approval pause the run; decisions resume it.

use super::*;
use crate::{settings::ToolSettings, tool::ToolInfo};
use agentloop_protocol::{InputKind, MessageKind};

/// `kb.search` (runs freely) and `kb.delete` (needs approval).
fn machine() -> RunMachine {
    let search = FnTool::from_info(
        ToolInfo::new("kb.search", "search", schema()).read_only(true),
        |_, _| async { Ok(ToolOutput::text("unused")) },
    );
    let delete = FnTool::new("kb.delete", "delete", schema(), |_, _| async {
        Ok(ToolOutput::text("unused"))
    });
    let mut settings = BTreeMap::new();
    settings.insert(
        "kb.delete".to_string(),
        ToolSettings {
            needs_approval: true,
            ..ToolSettings::default()
        },
    );
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(search), Arc::new(delete)];
    machine_on(Arc::new(ToolCatalog::new(tools, &settings)))
}

fn machine_on(catalog: Arc<ToolCatalog>) -> RunMachine {
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "clean up".into(),
        attachments: Vec::new(),
        history: Vec::new(),
        system_prompt: "S".into(),
        model: None,
        max_iterations: 8,
        context: RunContext::default(),
        started_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
        policy: crate::policy::RunPolicy::default(),
        client_tools: Vec::new(),
        budget: Default::default(),
    };
    RunMachine::new(
        input,
        Arc::new(AgentSettings::default()),
        catalog,
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

fn delete(id: &str, q: &str) -> (String, String, String) {
    (id.into(), "kb__delete".into(), json!({"q": q}).to_string())
}

fn paused(m: &mut RunMachine) -> RunOutcome {
    m.start();
    m.take_events();
    let step = m.on_model_reply(calls_owned(&[search("s1", "old"), delete("d1", "old")]));
    finished(step)
}

#[test]
fn a_call_that_needs_approval_pauses_the_whole_batch() {
    let mut m = machine();
    let outcome = paused(&mut m);
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    assert!(outcome.answer.is_none());
    assert!(m.is_paused());
    let events = m.take_events();
    assert_eq!(
        types(&events),
        ["tool_selected", "tool_selected", "input_required", "done"]
    );
    assert_eq!(
        events[0].type_name(),
        "llm_call",
        "the reply is reported first"
    );
    match &events[3] {
        EventKind::InputRequired { kind, calls, .. } => {
            assert_eq!(*kind, InputKind::Approval);
            assert_eq!(
                calls.len(),
                1,
                "only the call that needs approval is asked about"
            );
            assert_eq!(calls[0].call_id, "d1");
            assert_eq!(calls[0].tool, "kb.delete");
            assert_eq!(calls[0].arguments, json!({"q": "old"}));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        events[4],
        EventKind::Done {
            status: RunStatus::AwaitingInput,
            ..
        }
    ));
}

#[test]
fn approved_calls_run_with_their_batch() {
    let mut m = machine();
    paused(&mut m);
    let answer = InputAnswer {
        answer: None,
        approve: vec!["d1".into()],
        deny: vec![],
        results: Default::default(),
        elicitation: None,
    };
    let batch = tools(m.resume(&answer).unwrap());
    let ids: Vec<&str> = batch.iter().map(|i| i.call_id.as_str()).collect();
    assert_eq!(ids, ["s1", "d1"]);
    let request = model(succeed_all(&mut m, &batch));
    assert_eq!(
        request
            .messages
            .iter()
            .filter(|m| m.role == Role::Tool)
            .count(),
        2
    );
}

#[test]
fn denied_calls_never_run_and_the_model_reads_why() {
    let mut m = machine();
    paused(&mut m);
    let answer = InputAnswer {
        answer: None,
        approve: vec![],
        deny: vec!["d1".into()],
        results: Default::default(),
        elicitation: None,
    };
    let batch = tools(m.resume(&answer).unwrap());
    assert_eq!(batch.len(), 1, "only the search runs");
    let request = model(succeed_all(&mut m, &batch));
    let denial = request.messages.last().unwrap().text_content();
    assert!(
        denial.contains("denied") && denial.contains("blocked"),
        "{denial}"
    );
    let outcome = finished(m.on_model_reply(text("I did not delete it.")));
    assert_eq!(outcome.records[1].status, ToolStatus::Blocked);
}

#[test]
fn an_answer_that_does_not_fit_is_refused_and_the_run_stays_paused() {
    let mut m = machine();
    paused(&mut m);
    for (approve, deny, expected) in [
        (vec![], vec![], "undecided: d1"),
        (vec!["s1"], vec!["d1"], "s1 is not a call waiting"),
        (vec!["d1"], vec!["d1"], "more than one decision"),
    ] {
        let answer = InputAnswer {
            answer: None,
            approve: approve.into_iter().map(str::to_string).collect(),
            deny: deny.into_iter().map(str::to_string).collect(),
            results: Default::default(),
            elicitation: None,
        };
        let error = m.resume(&answer).unwrap_err().to_string();
        assert!(error.contains(expected), "{error}");
        assert!(m.is_paused());
    }
}

#[test]
fn a_paused_run_survives_a_round_trip_through_json() {
    let mut m = machine();
    paused(&mut m);
    m.take_changes();
    let mut restored = super::recovery::saved_and_restored(&mut m);
    assert!(restored.is_paused());
    assert!(
        restored.take_changes().messages.is_empty(),
        "nothing is saved twice"
    );
    let answer = InputAnswer {
        answer: None,
        approve: vec!["d1".into()],
        deny: vec![],
        results: Default::default(),
        elicitation: None,
    };
    let batch = tools(restored.resume(&answer).unwrap());
    let request = model(succeed_all(&mut restored, &batch));
    let roles: Vec<Role> = request.messages.iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        [
            Role::System,
            Role::User,
            Role::Assistant,
            Role::Tool,
            Role::Tool
        ]
    );
    let outcome = finished(restored.on_model_reply(text("Deleted.")));
    assert_eq!(outcome.iterations, 2);
    assert_eq!(outcome.tools_used, 2);
    // The same call asked again is still a repeat: the run remembers what it did.
    assert_eq!(outcome.records.len(), 2);
}

#[test]
fn cancelling_a_paused_run_leaves_no_call_without_a_result() {
    let mut m = machine();
    paused(&mut m);
    let outcome = finished(m.cancel());
    assert_eq!(outcome.status, RunStatus::Cancelled);
    let kinds: Vec<MessageKind> = outcome.messages.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MessageKind::Dialogue,
            MessageKind::ToolCall,
            MessageKind::ToolResult,
            MessageKind::ToolResult,
            MessageKind::Trace,
            MessageKind::Dialogue
        ]
    );
    assert!(
        outcome
            .records
            .iter()
            .all(|r| r.status == ToolStatus::Skipped)
    );
}
