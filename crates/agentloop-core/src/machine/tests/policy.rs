//! Read-only contexts, workflow allowlists and the mutation rate limit, on the machine.

use super::*;
use crate::{
    policy::{MutationLimiter, RunPolicy, WorkflowSettings},
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
        run_id: Uuid::nil(),
        session_id: Uuid::nil(),
        query: "q".into(),
        history: Vec::new(),
        system_prompt: "S".into(),
        model: None,
        max_iterations: 8,
        context: RunContext::default(),
        started_at: chrono::DateTime::from_timestamp_millis(1_700_000_000_000).unwrap_or_default(),
        policy,
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
fn the_rate_limit_blocks_with_a_retry_time_and_a_later_retry_is_not_a_duplicate() {
    let limiter = Arc::new(MutationLimiter::new("1/hour".parse().unwrap()));
    let mut m = machine_with_policy(RunPolicy {
        limiter: Some(limiter.clone()),
        limit_key: "project-7".into(),
        ..RunPolicy::default()
    });
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[write("c1")])));
    assert_eq!(batch.len(), 1, "the first change runs");
    model(succeed_all(&mut m, &batch));
    let request = model(m.on_model_reply(calls(&[("c2", "kb__write", r#"{"q":"y"}"#)])));
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert_eq!(payload["status"], "blocked");
    let error = payload["error"].as_str().unwrap();
    assert!(
        error.contains("project-7") && error.contains("try again in"),
        "{error}"
    );
    // Read-only tools are not limited.
    let batch = tools(m.on_model_reply(calls_owned(&[search("c3", "z")])));
    assert_eq!(batch.len(), 1);
    model(succeed_all(&mut m, &batch));
    // The same refused change, asked again: refused by the limit again, not as a repeat.
    m.take_events();
    model(m.on_model_reply(calls(&[("c4", "kb__write", r#"{"q":"y"}"#)])));
    let events = m.take_events();
    assert!(!types(&events).contains(&"duplicate_detected"));
    assert_eq!(
        tool_events(&events),
        [("c4".to_string(), ToolStatus::Blocked)]
    );
}
