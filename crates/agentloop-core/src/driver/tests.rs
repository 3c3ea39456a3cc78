//! The driver with an LLM and tools in this process, on tokio's paused clock: timeouts,
//! cancellation, the serial-tool gate and dropped runs, without waiting for a wall clock. Tests
//! wait for "the tool has started" on a signal from the tool, never on a sleep.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{
    collections::VecDeque,
    sync::{
        Arc, Mutex,
        atomic::{AtomicBool, AtomicUsize, Ordering},
    },
    time::Duration,
};

use agentloop_protocol::{EventKind, RunStatus, ToolCall, ToolStatus};
use async_trait::async_trait;
use serde_json::json;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

use crate::{
    Agent, AgentSettings, BeforeCall, FnTool, RunRequest, ToolContext, ToolHook, ToolOutput,
    llm::{Llm, LlmError, ModelReply, ModelRequest, TextSink},
};

/// Answers from a script, in order.
struct ScriptLlm {
    replies: Mutex<VecDeque<ModelReply>>,
    calls: AtomicUsize,
}

impl ScriptLlm {
    fn new(replies: Vec<ModelReply>) -> Arc<ScriptLlm> {
        Arc::new(ScriptLlm {
            replies: Mutex::new(replies.into()),
            calls: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Llm for ScriptLlm {
    async fn complete(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let next = self.replies.lock().unwrap().pop_front();
        next.ok_or_else(|| LlmError::Protocol("the script is over".to_string()))
    }
}

fn calls(calls: &[(&str, &str)]) -> ModelReply {
    ModelReply {
        tool_calls: calls
            .iter()
            .enumerate()
            .map(|(index, (name, arguments))| ToolCall {
                id: format!("c{index}"),
                name: (*name).to_string(),
                arguments: (*arguments).to_string(),
            })
            .collect(),
        ..ModelReply::default()
    }
}

fn text(answer: &str) -> ModelReply {
    ModelReply {
        content: Some(answer.to_string()),
        ..ModelReply::default()
    }
}

/// Set when the value is dropped: a call's future that was aborted drops what it held.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// A tool that signals when it starts, then sleeps `duration` (on tokio's clock); `dropped` is
/// set if its call is abandoned before the end.
struct SlowTool {
    started: Arc<Notify>,
    dropped: Arc<AtomicBool>,
}

fn slow_tool(name: &str, duration: Duration) -> (FnTool, SlowTool) {
    let probe = SlowTool {
        started: Arc::new(Notify::new()),
        dropped: Arc::new(AtomicBool::new(false)),
    };
    let (started, dropped) = (probe.started.clone(), probe.dropped.clone());
    let tool = FnTool::new(name, "sleeps", json!({"type": "object"}), move |_, _| {
        let (started, dropped) = (started.clone(), dropped.clone());
        async move {
            let guard = DropFlag(dropped);
            started.notify_one();
            tokio::time::sleep(duration).await;
            std::mem::forget(guard);
            Ok(ToolOutput::text("slept"))
        }
    });
    (tool, probe)
}

async fn agent(llm: Arc<ScriptLlm>, tools: Vec<FnTool>, settings: AgentSettings) -> Agent {
    let mut builder = Agent::builder().llm(llm).settings(settings);
    for tool in tools {
        builder = builder.tool(tool);
    }
    builder.build().await.unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_run_that_is_dropped_aborts_its_tool_calls() {
    let llm = ScriptLlm::new(vec![calls(&[("slow", "{}")]), text("never")]);
    let (tool, probe) = slow_tool("slow", Duration::from_secs(3600));
    let agent = agent(llm, vec![tool], AgentSettings::default()).await;
    let (sender, _events) = tokio::sync::mpsc::unbounded_channel();
    let run = agent.run_with_sink(
        RunRequest::new("sleep"),
        Arc::new(sender),
        CancellationToken::new(),
    );
    // As a sub-agent's time limit does: the run's future is dropped mid-call.
    let started = probe.started.clone();
    tokio::select! {
        _ = run => panic!("the run cannot end while its tool sleeps"),
        () = started.notified() => {}
    }
    tokio::task::yield_now().await;
    assert!(
        probe.dropped.load(Ordering::SeqCst),
        "the tool call was aborted with its run"
    );
}

#[tokio::test(start_paused = true)]
async fn a_call_past_its_time_limit_is_aborted_and_the_model_told_what_to_change() {
    let llm = ScriptLlm::new(vec![calls(&[("slow", "{}")]), text("done")]);
    let (tool, probe) = slow_tool("slow", Duration::from_secs(3600));
    let settings = AgentSettings {
        tool_timeout_s: 2.0,
        ..AgentSettings::default()
    };
    let agent = agent(llm, vec![tool], settings).await;
    let (_, outcome) = agent.run(RunRequest::new("sleep")).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    let record = &outcome.records[0];
    assert_eq!(record.status, ToolStatus::Error);
    let error = record.error.as_deref().unwrap();
    assert!(error.contains("timed out after 2 s"), "{error}");
    assert!(error.contains("[tools.\"slow\"] timeout_s"), "{error}");
    assert!(probe.dropped.load(Ordering::SeqCst));
}

#[tokio::test]
async fn a_tool_that_panics_fails_its_call_and_the_run_goes_on() {
    let llm = ScriptLlm::new(vec![
        calls(&[("fragile", "{}"), ("slow", "{}")]),
        text("done anyway"),
    ]);
    let fragile = FnTool::new(
        "fragile",
        "panics",
        json!({"type": "object"}),
        |arguments, _| async move {
            if arguments.is_object() {
                panic!("the tool's own bug");
            }
            Ok(ToolOutput::text("not reached"))
        },
    );
    let (slow, probe) = slow_tool("slow", Duration::from_millis(20));
    let agent = agent(llm.clone(), vec![fragile, slow], AgentSettings::default()).await;
    let (_, outcome) = agent.run(RunRequest::new("go")).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("done anyway"));
    let record = |tool: &str| {
        outcome
            .records
            .iter()
            .find(|record| record.tool == tool)
            .unwrap()
    };
    assert_eq!(record("fragile").status, ToolStatus::Error);
    let error = record("fragile").error.as_deref().unwrap();
    assert!(
        error.contains("crashed") && error.contains("the tool's own bug"),
        "{error}"
    );
    // The call beside it, in the same batch, ran to its end.
    assert_eq!(record("slow").status, ToolStatus::Success);
    assert!(!probe.dropped.load(Ordering::SeqCst));
    assert_eq!(llm.calls.load(Ordering::SeqCst), 2, "the model was told");
}

#[tokio::test(start_paused = true)]
async fn a_cancel_abandons_the_calls_in_flight_records_them_and_stops() {
    let llm = ScriptLlm::new(vec![calls(&[("slow", "{}")]), text("never")]);
    let (tool, probe) = slow_tool("slow", Duration::from_secs(5));
    let agent = agent(llm.clone(), vec![tool], AgentSettings::default()).await;
    let handle = agent.run(RunRequest::new("sleep"));
    probe.started.notified().await;
    handle.cancel();
    let (events, outcome) = handle.collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Cancelled);
    // Cut off (an MCP call is told so) and recorded, its outcome unknown.
    assert!(probe.dropped.load(Ordering::SeqCst), "the call was cut");
    assert_eq!(outcome.records[0].status, ToolStatus::Error);
    let error = outcome.records[0].error.as_deref().unwrap_or_default();
    assert!(error.contains("cancelled"), "{error}");
    assert_eq!(
        llm.calls.load(Ordering::SeqCst),
        1,
        "no LLM call after the cancel"
    );
    assert!(matches!(
        events.last().map(|e| &e.kind),
        Some(EventKind::Done {
            status: RunStatus::Cancelled,
            ..
        })
    ));
}

#[tokio::test(start_paused = true)]
async fn a_serial_tool_never_runs_beside_another_call() {
    let running = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(Mutex::new(Vec::new()));
    let make = |name: &'static str, serial: bool| {
        let (running, overlaps) = (running.clone(), overlaps.clone());
        let tool = FnTool::new(
            name,
            "works a while",
            json!({"type": "object"}),
            move |_, _| {
                let (running, overlaps) = (running.clone(), overlaps.clone());
                async move {
                    let others = running.fetch_add(1, Ordering::SeqCst);
                    if serial && others > 0 {
                        overlaps.lock().unwrap().push(name);
                    }
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    if serial && running.load(Ordering::SeqCst) > 1 {
                        overlaps.lock().unwrap().push(name);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                    Ok(ToolOutput::text(name))
                }
            },
        );
        if serial { tool.serial() } else { tool }
    };
    let llm = ScriptLlm::new(vec![
        calls(&[
            ("fast", r#"{"n": 1}"#),
            ("alone", r#"{"n": 2}"#),
            ("fast", r#"{"n": 3}"#),
            ("alone", r#"{"n": 4}"#),
            ("fast", r#"{"n": 5}"#),
        ]),
        text("done"),
    ]);
    let agent = agent(
        llm,
        vec![make("fast", false), make("alone", true)],
        AgentSettings::default(),
    )
    .await;
    let (_, outcome) = agent.run(RunRequest::new("work")).collect().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.records.len(), 5);
    assert!(
        outcome
            .records
            .iter()
            .all(|r| r.status == ToolStatus::Success),
        "{:?}",
        outcome.records
    );
    assert_eq!(*overlaps.lock().unwrap(), Vec::<&str>::new());
}

/// Rewrites every call's arguments to `arguments`.
struct Rewrite(serde_json::Value);

#[async_trait]
impl ToolHook for Rewrite {
    async fn before_call(
        &self,
        _tool: &str,
        arguments: &mut serde_json::Value,
        _context: &ToolContext,
    ) -> BeforeCall {
        *arguments = self.0.clone();
        BeforeCall::Proceed
    }
}

#[tokio::test(start_paused = true)]
async fn arguments_a_hook_rewrote_are_checked_again_before_the_tool_runs() {
    let runs = Arc::new(AtomicUsize::new(0));
    let hook_for = |arguments| {
        let llm = ScriptLlm::new(vec![calls(&[("kb.search", r#"{"q": "x"}"#)]), text("done")]);
        let schema =
            json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
        let runs = runs.clone();
        let tool = FnTool::new("kb.search", "searches", schema, move |_, _| {
            runs.fetch_add(1, Ordering::SeqCst);
            async { Ok(ToolOutput::text("found")) }
        });
        Agent::builder()
            .llm(llm)
            .tool(tool)
            .hook(Arc::new(Rewrite(arguments)))
    };

    // A rewrite that still fits the schema runs, with the new arguments on the record.
    let agent = hook_for(json!({"q": "y"})).build().await.unwrap();
    let (_, outcome) = agent.run(RunRequest::new("find")).collect().await.unwrap();
    assert_eq!(outcome.records[0].status, ToolStatus::Success);
    assert_eq!(outcome.records[0].arguments, json!({"q": "y"}));
    assert_eq!(runs.load(Ordering::SeqCst), 1);

    // One that does not never reaches the tool; the model reads why.
    let agent = hook_for(json!({"q": 5})).build().await.unwrap();
    let (_, outcome) = agent.run(RunRequest::new("find")).collect().await.unwrap();
    let record = &outcome.records[0];
    assert_eq!(record.status, ToolStatus::Error);
    assert_eq!(record.arguments, json!({"q": 5}));
    let error = record.error.as_deref().unwrap();
    assert!(
        error.contains("do not match the schema of kb.search"),
        "{error}"
    );
    assert_eq!(
        runs.load(Ordering::SeqCst),
        1,
        "the refused call did not run"
    );
    let tool_message = outcome
        .messages
        .iter()
        .find(|m| m.message.role == agentloop_protocol::Role::Tool)
        .unwrap();
    assert!(
        tool_message
            .message
            .text_content()
            .contains("Fix the arguments"),
        "{tool_message:?}"
    );
}
