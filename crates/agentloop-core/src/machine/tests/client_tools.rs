//! Client tools (AG-UI frontend tools): offered to the model, never run by the driver; a call
//! pauses the run, and the client's result is the tool's output.

use super::*;
use crate::client_tool::ClientTool;
use agentloop_protocol::{InputKind, MessageKind};

/// `kb.search` (the agent's) and the client's `show_card`.
fn machine() -> RunMachine {
    machine_with_policy(crate::policy::RunPolicy::default())
}

fn machine_with_policy(policy: crate::policy::RunPolicy) -> RunMachine {
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "show it".into(),
        attachments: Vec::new(),
        history: Vec::new(),
        system_prompt: "S".into(),
        model: None,
        max_iterations: 8,
        context: RunContext::default(),
        started_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
        policy,
        budget: Default::default(),
        client_tools: vec![
            ClientTool::new(
                "show_card",
                "Shows a card in the page",
                json!({"type": "object", "properties": {"title": {"type": "string"}}, "required": ["title"]}),
            ),
            // Left out: no name, a built-in's name (offered or not).
            ClientTool::new(" ", "", json!({})),
            ClientTool::new("ask_user", "", json!({})),
            ClientTool::new("write_plan", "", json!({})),
        ],
    };
    RunMachine::new(
        input,
        Arc::new(AgentSettings::default()),
        catalog(&["kb.search"]),
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

fn show(id: &str, title: &str) -> (String, String, String) {
    (
        id.into(),
        "show_card".into(),
        json!({"title": title}).to_string(),
    )
}

fn results(pairs: &[(&str, &str)]) -> InputAnswer {
    InputAnswer {
        results: pairs
            .iter()
            .map(|(id, text)| (id.to_string(), text.to_string()))
            .collect(),
        ..InputAnswer::default()
    }
}

/// Started, and paused on a reply that calls the agent's tool and the client's.
fn paused(m: &mut RunMachine) -> RunOutcome {
    let request = model(m.start());
    let offered: Vec<&str> = request
        .tools
        .iter()
        .map(|spec| spec.name.as_str())
        .collect();
    assert_eq!(offered, ["kb__search", "show_card"]);
    m.take_events();
    finished(m.on_model_reply(calls_owned(&[search("s1", "x"), show("c1", "Hello")])))
}

#[test]
fn a_client_tool_is_offered_and_its_call_pauses_the_run_for_its_result() {
    let mut m = machine();
    let outcome = paused(&mut m);
    assert_eq!(outcome.status, RunStatus::AwaitingInput);
    let events = m.take_events();
    let asked = events
        .iter()
        .find(|event| matches!(event, EventKind::InputRequired { .. }));
    let calls = match asked {
        Some(EventKind::InputRequired { kind, calls, .. }) => {
            assert_eq!(*kind, InputKind::Approval);
            calls.clone()
        }
        other => panic!("{other:?}"),
    };
    assert_eq!(calls.len(), 1, "the agent's own tool does not wait");
    assert_eq!(calls[0].call_id, "c1");
    assert_eq!(calls[0].tool, "show_card");
    assert!(calls[0].client);
    assert_eq!(calls[0].arguments, json!({"title": "Hello"}));
}

#[test]
fn the_clients_result_is_the_tools_output_and_the_rest_of_the_batch_runs() {
    let mut m = machine();
    paused(&mut m);
    m.take_changes();
    // Through the store and back, as a paused run is resumed.
    let mut m = super::recovery::saved_and_restored(&mut m);
    let batch = tools(m.resume(&results(&[("c1", "{\"shown\":true}")])).unwrap());
    let ids: Vec<&str> = batch.iter().map(|call| call.call_id.as_str()).collect();
    assert_eq!(ids, ["s1"], "the client's call is not run here");
    let events = m.take_events();
    assert!(events.iter().any(|event| matches!(
        event,
        EventKind::ToolExecuted { call_id, status: ToolStatus::Success, result: Some(result), .. }
            if call_id == "c1" && result == "{\"shown\":true}"
    )));
    let request = model(succeed_all(&mut m, &batch));
    let tool_messages: Vec<String> = request
        .messages
        .iter()
        .filter(|message| message.role == Role::Tool)
        .map(|message| message.text_content().to_string())
        .collect();
    assert_eq!(tool_messages, ["result of s1", "{\"shown\":true}"]);
    let outcome = finished(m.on_model_reply(text("Shown.")));
    assert_eq!(outcome.tools_used, 2);
    let record = outcome.records.iter().find(|r| r.call_id == "c1").unwrap();
    assert_eq!(record.status, ToolStatus::Success);
    assert_eq!(record.structured_result, Some(json!({"shown": true})));
    assert!(
        outcome
            .messages
            .iter()
            .any(|message| message.kind == MessageKind::ToolResult)
    );
}

#[test]
fn a_client_call_takes_a_result_or_a_denial_never_an_approval() {
    let mut m = machine();
    paused(&mut m);
    let approve = InputAnswer {
        approve: vec!["c1".into()],
        ..InputAnswer::default()
    };
    let error = m.resume(&approve).unwrap_err().to_string();
    assert!(error.contains("answer it with its result"), "{error}");
    let error = m.resume(&InputAnswer::default()).unwrap_err().to_string();
    assert!(error.contains("undecided: c1"), "{error}");
    let error = m.resume(&results(&[("s1", "x")])).unwrap_err().to_string();
    assert!(error.contains("s1 is not a call waiting"), "{error}");
    assert!(m.is_paused());
    // A denial: the model reads that the user did not allow it.
    let denied = InputAnswer {
        deny: vec!["c1".into()],
        ..InputAnswer::default()
    };
    let batch = tools(m.resume(&denied).unwrap());
    let request = model(succeed_all(&mut m, &batch));
    let last = request.messages.last().unwrap().text_content().to_string();
    assert!(last.contains("denied"), "{last}");
}

#[test]
fn a_client_tool_named_like_an_agent_tool_is_left_out() {
    let base = catalog(&["kb.search"]);
    let extended = base.with_client_tools(&[
        ClientTool::new("kb.search", "", json!({})),
        ClientTool::new("pick", "", Value::Null),
    ]);
    assert_eq!(extended.len(), 2);
    assert!(!extended.get("kb.search").unwrap().client);
    assert!(extended.get("pick").unwrap().client);
    assert!(extended.warnings().join(" ").contains("offered twice"));
    assert_eq!(base.len(), 1, "the agent's catalog is not changed");
}

#[test]
fn the_policies_guard_the_agents_tools_not_the_clients() {
    let workflows = BTreeMap::from([(
        "support".to_string(),
        crate::policy::WorkflowSettings {
            tools: vec!["kb.other".into()],
        },
    )]);
    let policy =
        crate::policy::RunPolicy::for_run(true, Some("support"), &workflows, None, String::new())
            .unwrap();
    let mut m = machine_with_policy(policy);
    let request = model(m.start());
    let offered: Vec<&str> = request
        .tools
        .iter()
        .map(|spec| spec.name.as_str())
        .collect();
    assert_eq!(
        offered,
        ["show_card"],
        "kb.search is mutating and not allowed"
    );
}
