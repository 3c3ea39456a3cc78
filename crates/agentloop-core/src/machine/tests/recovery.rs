//! The state as the store keeps it (a checkpoint with every step) and a run that goes on from
//! it in another process: what runs again, what the model is told, what a human is asked.

use super::*;
use crate::{
    machine::batch::SlotState,
    settings::{ToolSettings, UnknownOutcome},
    tool::ToolInfo,
};
use agentloop_protocol::{InputKind, ResumeReason};

/// The head of `m`'s state as the store keeps it, read back.
fn head_of(m: &mut RunMachine) -> serde_json::Value {
    let text = m.checkpoint_head().unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The machine as the store gives it back: its state saved in parts (input once, head, the
/// messages and the records as they were saved) and put together again. The state restored is
/// the state saved, field for field.
pub(super) fn saved_and_restored(m: &mut RunMachine) -> RunMachine {
    let head = head_of(m);
    let input = m.state.fixed_input(None);
    // The store has every record saved so far: those of finished batches, and those of the
    // batch under way that ended.
    let mut records = m.state.records.clone();
    for slot in m.state.phase.batch().into_iter().flat_map(|b| &b.slots) {
        if let SlotState::Resolved { record, .. } = &slot.state
            && slot.recorded
        {
            records.push((**record).clone());
        }
    }
    let state = RunState::from_parts(input, head, m.state.turn.clone(), records).unwrap();
    let original = serde_json::to_value(&m.state).unwrap();
    let restored = serde_json::to_value(&state).unwrap();
    assert_eq!(restored, original, "the restored state is the saved one");
    RunMachine::restore(
        state,
        crate::policy::RunPolicy::default(),
        m.settings.clone(),
        m.catalog.clone(),
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

/// `kb.search` (read-only), `kb.put` (mutating, idempotent by its annotation) and `kb.send`
/// (mutating, not idempotent; `on_unknown_outcome` as given).
fn machine(on_unknown: UnknownOutcome) -> RunMachine {
    let tool = |info: ToolInfo| -> Arc<dyn Tool> {
        Arc::new(FnTool::from_info(info, |_, _| async {
            Ok(ToolOutput::text("unused"))
        }))
    };
    let tools = vec![
        tool(ToolInfo::new("kb.search", "search", schema()).read_only(true)),
        tool(ToolInfo::new("kb.put", "put", schema()).idempotent(true)),
        tool(ToolInfo::new("kb.send", "send", schema())),
    ];
    let mut settings = BTreeMap::new();
    settings.insert(
        "kb.send".to_string(),
        ToolSettings {
            on_unknown_outcome: on_unknown,
            ..ToolSettings::default()
        },
    );
    let agent = AgentSettings {
        max_iterations: 30,
        ..AgentSettings::default()
    };
    let mut m = machine_with(agent, &[]);
    m.catalog = Arc::new(ToolCatalog::new(tools, &settings));
    m
}

fn call(id: &str, tool: &str) -> (String, String, String) {
    (id.into(), tool.into(), json!({"q": id}).to_string())
}

fn resume(m: &mut RunMachine) -> Step {
    let input = Input::Resume {
        reason: ResumeReason::Adopted,
        instance: "i-2".into(),
    };
    m.handle(input, m.state.now).step().unwrap()
}

/// Three calls under way: `s1` (read-only) and `p1` (idempotent) and `x1` (neither); `x0`, of
/// the same batch, ended and was saved.
fn crashed_mid_batch(on_unknown: UnknownOutcome) -> RunMachine {
    let mut m = machine(on_unknown);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[
        call("x0", "kb__send"),
        call("s1", "kb__search"),
        call("p1", "kb__put"),
        call("x1", "kb__send"),
    ])));
    assert_eq!(batch.len(), 4);
    assert!(m.on_tool_result(done("x0", "sent x0")).is_none());
    m.take_changes();
    saved_and_restored(&mut m)
}

#[test]
fn the_head_leaves_out_the_outputs_of_calls_that_ended_and_the_state_keeps_them() {
    let mut m = machine(UnknownOutcome::TellModel);
    m.start();
    tools(m.on_model_reply(calls_owned(&[
        call("x0", "kb__send"),
        call("s1", "kb__search"),
    ])));
    let output = "the whole output of x0, kept once as its record";
    assert!(m.on_tool_result(done("x0", output)).is_none());
    let before = serde_json::to_value(&m.state).unwrap();

    let text = m.checkpoint_head().unwrap();
    assert!(!text.contains(output), "the output is left out: {text}");
    let head: serde_json::Value = serde_json::from_str(&text).unwrap();
    let resolved = &head["batch"]["slots"][0]["state"]["Resolved"];
    assert_eq!(resolved["output_saved"], true, "{resolved}");
    assert!(resolved["message"].is_null(), "{resolved}");
    assert!(resolved["record"].get("result").is_none(), "{resolved}");
    // The call still under way has nothing left out.
    assert!(head["batch"]["slots"][1]["state"].get("Resolved").is_none());
    assert_eq!(
        serde_json::to_value(&m.state).unwrap(),
        before,
        "writing the head leaves the state as it was"
    );
    // And the store's parts make the same state again (asserted inside).
    saved_and_restored(&mut m);
}

#[test]
fn a_crash_mid_batch_runs_again_only_what_may_run_twice_and_tells_the_model_the_rest() {
    let mut m = crashed_mid_batch(UnknownOutcome::TellModel);
    let again = tools(resume(&mut m));
    let ids: Vec<&str> = again.iter().map(|call| call.call_id.as_str()).collect();
    assert_eq!(
        ids,
        ["s1", "p1"],
        "read-only and idempotent calls run again"
    );
    let changes = m.take_changes();
    assert_eq!(types(&changes.events)[0], "run_resumed");
    assert!(matches!(
        &changes.events[0],
        EventKind::RunResumed { reason: ResumeReason::Adopted, instance } if instance == "i-2"
    ));
    let unknown: Vec<_> = changes
        .records
        .iter()
        .map(|r| (&r.call_id, r.status))
        .collect();
    assert_eq!(unknown, [(&"x1".to_string(), ToolStatus::Error)]);
    assert!(
        changes.records[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with("outcome_unknown")
    );

    let request = model(succeed_all(&mut m, &again));
    let results: Vec<(&str, &str)> = request
        .messages
        .iter()
        .filter(|message| message.role == Role::Tool)
        .map(|message| {
            (
                message.tool_call_id.as_deref().unwrap(),
                message.content.as_deref().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        results.len(),
        4,
        "one result per call, in the model's order"
    );
    assert_eq!(
        results[0],
        ("x0", "sent x0"),
        "the saved result is not run again"
    );
    assert_eq!(results[1].1, "result of s1");
    let told: Value = serde_json::from_str(results[3].1).unwrap();
    assert_eq!(results[3].0, "x1");
    assert_eq!(told["code"], "outcome_unknown");
    assert_eq!(told["status"], "error");
}

#[test]
fn with_on_unknown_outcome_ask_a_human_decides_whether_the_call_runs_again() {
    let mut m = crashed_mid_batch(UnknownOutcome::Ask);
    let outcome = finished(resume(&mut m));
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    let request = outcome.input_required.unwrap();
    assert_eq!(request.kind, InputKind::Approval);
    let asked: Vec<&str> = request.calls.iter().map(|c| c.call_id.as_str()).collect();
    assert_eq!(asked, ["x1"]);
    assert!(
        request
            .question
            .unwrap()
            .contains("may or may not have taken effect")
    );

    // Approved after a restart of its own: it runs, with the calls that may run again.
    let mut m = saved_and_restored(&mut m);
    let answer = InputAnswer {
        answer: None,
        approve: vec!["x1".into()],
        deny: vec![],
        results: Default::default(),
        elicitation: None,
    };
    let again = tools(m.resume(&answer).unwrap());
    let ids: Vec<&str> = again.iter().map(|call| call.call_id.as_str()).collect();
    assert_eq!(ids, ["s1", "p1", "x1"]);
}

#[test]
fn a_crash_while_the_model_was_asked_asks_it_again_with_the_same_request() {
    let mut m = machine(UnknownOutcome::TellModel);
    let before = model(m.start());
    m.take_changes();
    let mut m = saved_and_restored(&mut m);
    let again = model(resume(&mut m));
    assert_eq!(again.messages, before.messages);
    assert_eq!(again.tools, before.tools);
    assert_eq!(types(&m.take_changes().events), ["run_resumed"]);
}

#[test]
fn the_saved_head_does_not_grow_with_the_run() {
    let mut m = machine(UnknownOutcome::TellModel);
    m.start();
    let mut sizes = Vec::new();
    for round in 0..12 {
        let id = format!("s{round}");
        let batch = tools(m.on_model_reply(calls_owned(&[call(&id, "kb__search")])));
        model(succeed_all(&mut m, &batch));
        let head = head_of(&mut m);
        for field in ["turn", "records", "documents", "outcome"] {
            assert!(head.get(field).is_none(), "{field} is saved apart");
        }
        assert!(head["input"].get("history").is_none());
        sizes.push(head.to_string().len());
    }
    // One short duplicate-check key per call is all that grows: far less than a message.
    let growth = sizes[11] - sizes[1];
    assert!(
        growth < 10 * 60,
        "the head grew by {growth} bytes in 10 rounds: {sizes:?}"
    );
    let turn: usize = m
        .state
        .turn
        .iter()
        .map(|m| serde_json::to_string(m).unwrap().len())
        .sum();
    assert!(turn > growth * 3, "messages ({turn} bytes) are saved apart");
}

#[test]
fn a_state_saved_by_another_version_is_refused_with_both_versions_named() {
    let mut m = machine(UnknownOutcome::TellModel);
    m.start();
    let mut head = head_of(&mut m);
    head["version"] = json!(3);
    let error = RunState::from_parts(m.state.fixed_input(None), head, Vec::new(), Vec::new())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("state version 3") && error.contains("reads 4"),
        "{error}"
    );
}

#[test]
fn a_run_that_ended_is_saved_with_its_outcome_but_not_its_messages_and_restored_whole() {
    let mut m = machine(UnknownOutcome::TellModel);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[call("s1", "kb__search")])));
    model(succeed_all(&mut m, &batch));
    let outcome = finished(m.on_model_reply(text("found it")));
    m.take_changes();
    let head = head_of(&mut m);
    assert_eq!(head["phase"], "finished");
    assert_eq!(head["outcome"]["answer"], "found it");
    for field in ["messages", "records"] {
        assert!(
            head["outcome"].get(field).is_none(),
            "{field} is saved apart"
        );
    }
    // Field for field, the outcome too: its messages and records are the run's.
    let mut m = saved_and_restored(&mut m);
    let again = finished(m.cancel());
    assert_eq!(
        serde_json::to_value(&again).unwrap(),
        serde_json::to_value(&outcome).unwrap()
    );
}

#[test]
fn the_finalize_reason_comes_with_the_phase_and_stays_with_the_outcome() {
    let agent = AgentSettings {
        max_iterations: 1,
        ..AgentSettings::default()
    };
    let mut m = machine_with(agent, &["kb.search"]);
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("c1", "a")])));
    model(succeed_all(&mut m, &batch));
    let head = head_of(&mut m);
    assert_eq!(head["phase"], "awaiting_finalize");
    assert_eq!(head["reason"], "max_iterations");
    let mut m = saved_and_restored(&mut m);
    let outcome = finished(m.fail(ErrorCode::InternalError, "down".into()));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    // An ending that could not be saved is replaced by the failure, with the same reason.
    let failed = finished(m.fail_unsaved("disk full", true));
    assert_eq!(failed.finalize_reason, Some(FinalizeReason::MaxIterations));
}
