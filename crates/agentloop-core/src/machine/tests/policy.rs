//! Read-only contexts, workflow allowlists and the mutation rate limit, on the machine.

use super::*;
use crate::{
    policy::{RunPolicy, WorkflowSettings},
    tool::ToolInfo,
};

/// `kb.search` (read-only) and `kb.write` (mutating), under `policy`.
fn machine_with_policy(policy: RunPolicy) -> RunMachine {
    let read = FnTool::from_info(
        ToolInfo::new("kb.search", "search", schema()).read_only(true),
        |_, _| async { Ok(ToolOutput::text("unused")) },
    );
    let write = FnTool::new("kb.write", "write", schema(), |_, _| async {
        Ok(ToolOutput::text("unused"))
    });
    let tools: Vec<Arc<dyn Tool>> = vec![Arc::new(read), Arc::new(write)];
    let settings = AgentSettings::default();
    let input = RunInput {
        refused: None,
        output: None,
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "q".into(),
        attachments: Vec::new(),
        history: Vec::new(),
        system_prompt: "S".into(),
        model: None,
        max_iterations: 8,
        context: RunContext::default(),
        started_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
        policy,
        client_tools: Vec::new(),
        budget: Default::default(),
    };
    RunMachine::new(
        input,
        Arc::new(settings),
        Arc::new(ToolCatalog::new(tools, &BTreeMap::new())),
        Arc::new(crate::tokens::EstimatedTokens),
    )
}

fn offered(request: &ModelRequest) -> Vec<&str> {
    request
        .tools
        .iter()
        .map(|tool| tool.name.as_str())
        .collect()
}

fn write(id: &str) -> (String, String, String) {
    (id.into(), "kb__write".into(), json!({"q": "x"}).to_string())
}

#[test]
fn a_read_only_run_offers_no_mutating_tool_and_blocks_one_called_anyway() {
    let mut m = machine_with_policy(RunPolicy {
        read_only: true,
        ..RunPolicy::default()
    });
    let request = model(m.start());
    assert_eq!(offered(&request), ["kb__search"]);
    let request = model(m.on_model_reply(calls_owned(&[write("c1")])));
    assert_eq!(offered(&request), ["kb__search"], "on every iteration");
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert_eq!(payload["status"], "blocked");
    assert!(
        payload["error"].as_str().unwrap().contains("read-only"),
        "{payload}"
    );
    let outcome = finished(m.on_model_reply(text("The project is read-only.")));
    assert_eq!(outcome.records[0].status, ToolStatus::Blocked);
    assert_eq!(outcome.tools_used, 0);
}

#[test]
fn a_workflow_offers_only_its_allowlist() {
    let mut m = machine_with_policy(RunPolicy {
        workflow: Some((
            "triage".into(),
            WorkflowSettings {
                tools: vec!["kb.s*".into()],
            },
        )),
        ..RunPolicy::default()
    });
    assert_eq!(offered(&model(m.start())), ["kb__search"]);
    let request = model(m.on_model_reply(calls_owned(&[write("c1")])));
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert_eq!(payload["status"], "blocked");
    assert!(
        payload["error"]
            .as_str()
            .unwrap()
            .contains("workflow \"triage\""),
        "{payload}"
    );
}

#[test]
fn a_call_refused_when_it_was_to_run_can_be_asked_again_without_being_a_repeat() {
    // The rate limit is taken by the driver when a call is about to run; the machine reads
    // its refusal like any result, and a refused call did not run.
    let mut m = machine_with_policy(RunPolicy::default());
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[write("c1")])));
    let refusal = CallRefusal {
        status: ToolStatus::Blocked,
        error: "rate limit reached: try again in 60 s".into(),
        hint: "wait".into(),
    };
    let step = m.on_tool_result(ToolResult::new(
        &batch[0].call_id,
        call_started_at(),
        0,
        ToolOutcome::Refused(refusal),
    ));
    let request = model(step.unwrap());
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert_eq!(payload["status"], "blocked");
    assert!(payload["error"].as_str().unwrap().contains("try again in"));
    m.take_changes();
    let again = tools(m.on_model_reply(calls_owned(&[write("c2")])));
    assert_eq!(again.len(), 1, "asked again, it runs");
    let events = m.take_events();
    assert!(!types(&events).contains(&"duplicate_detected"));
    assert_eq!(
        m.progress().tools_used,
        0,
        "a refused call is not a call that ran"
    );
}
