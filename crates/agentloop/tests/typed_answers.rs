//! Typed answers over each provider's wire (Chat Completions, Responses, Anthropic), real HTTP
//! to a scripted server of that format, with the test MCP server's tools: the value comes
//! after tool calls, no request of a tool turn carries the structured-output format, an
//! invalid value is repaired, one never repaired fails `output_invalid`, and a forced finish
//! asks for the value too. Every behaviour runs once per provider.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{ErrorCode, EventKind, FinalizeReason, RunRequest, RunStatus};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm, Wire};
use common::*;
use serde_json::{Value, json};

macro_rules! per_provider {
    ($($name:ident),* $(,)?) => {
        mod chat_completions {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Wire::ChatCompletions).await
            })*
        }
        mod anthropic {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Wire::Anthropic).await
            })*
        }
        mod responses {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Wire::Responses).await
            })*
        }
    };
}

per_provider!(
    native_tools_then_a_valid_value_and_no_tool_turn_carries_the_format,
    tool_mode_takes_the_final_answer_calls_arguments,
    an_invalid_value_is_repaired_on_retry,
    a_value_never_repaired_fails_output_invalid,
    a_forced_finish_asks_for_the_value,
    prompted_mode_reads_the_value_from_the_text,
);

const SCHEMA: &str = r#"output_schema = { type = "object", properties = { title = { type = "string" }, priority = { type = "integer", minimum = 1, maximum = 3 } }, required = ["title", "priority"], additionalProperties = false }
output_name = "ticket"
"#;

fn agent(extra: &str) -> String {
    format!("[agent]\n{SCHEMA}{extra}")
}

/// The structured-output format of a recorded request, under the wire's own key.
fn format_of(request: &Value, wire: Wire) -> Option<Value> {
    let value = match wire {
        Wire::ChatCompletions => request.get("response_format"),
        Wire::Responses => request.get("text").map(|text| &text["format"]),
        Wire::Anthropic => request.get("output_config").map(|config| &config["format"]),
    };
    value.cloned()
}

fn offers_tools(request: &Value) -> bool {
    request
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|tools| !tools.is_empty())
}

/// No request that offers tools carries a format.
fn assert_no_format_on_tool_turns(requests: &[Value], wire: Wire) {
    for request in requests {
        if offers_tools(request) {
            assert_eq!(format_of(request, wire), None, "{request}");
        }
    }
}

fn done_output(events: &[agentloop::Event]) -> Option<Value> {
    find(events, "done")
        .into_iter()
        .find_map(|kind| match kind {
            EventKind::Done { output, .. } => output.clone(),
            _ => None,
        })
}

async fn native_tools_then_a_valid_value_and_no_tool_turn_carries_the_format(wire: Wire) {
    let value = json!({"title": "Disk full", "priority": 1});
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "disk"})),
            Reply::text("The disk is full; that is urgent."),
            Reply::text(value.to_string()),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, &agent("output_mode = \"native\"\n")).await;
    let (events, outcome) = run(&runtime, "File a ticket about the disk").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.output, Some(value.clone()));
    assert_eq!(done_output(&events), Some(value.clone()));
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_no_format_on_tool_turns(&requests, wire);
    assert!(offers_tools(&requests[0]) && offers_tools(&requests[1]));
    let last = &requests[2];
    assert!(!offers_tools(last), "{last}");
    let format = format_of(last, wire).expect("the answer call carries the format");
    assert_eq!(format["type"], "json_schema", "{format}");
    let schema = match wire {
        Wire::ChatCompletions => &format["json_schema"]["schema"],
        _ => &format["schema"],
    };
    assert_eq!(schema["required"], json!(["title", "priority"]));
    // The answer's text is the value's JSON, streamed once it was valid.
    let answer: String = find(&events, "final_response")
        .into_iter()
        .map(|kind| match kind {
            EventKind::FinalResponse { delta } => delta.clone(),
            _ => String::new(),
        })
        .collect();
    assert_eq!(serde_json::from_str::<Value>(&answer).unwrap(), value);
}

async fn tool_mode_takes_the_final_answer_calls_arguments(wire: Wire) {
    let value = json!({"title": "Disk full", "priority": 2});
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "disk"})),
            Reply::tool_call("final_answer", value.clone()),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, &agent("output_mode = \"tool\"\n")).await;
    let (_, outcome) = run(&runtime, "File a ticket").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.output, Some(value));
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert_eq!(format_of(request, wire), None, "{request}");
        let tools = ScriptedLlm::offered_tools(request);
        assert!(tools.contains(&"final_answer".to_string()), "{tools:?}");
    }
}

async fn an_invalid_value_is_repaired_on_retry(wire: Wire) {
    let value = json!({"title": "Disk full", "priority": 3});
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::text("It is urgent."),
            Reply::text(r#"{"title": "Disk full", "priority": 9}"#),
            Reply::text(value.to_string()),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, &agent("output_mode = \"native\"\n")).await;
    let (_, outcome) = run(&runtime, "File a ticket").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.output, Some(value));
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let repair = requests[2].to_string();
    assert!(repair.contains("at /priority"), "{repair}");
    assert!(format_of(&requests[2], wire).is_some());
}

async fn a_value_never_repaired_fails_output_invalid(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::text(r#"{"title": "x"}"#),
            Reply::text(r#"{"title": "y"}"#),
        ],
    )
    .await;
    let runtime = runtime(
        &llm,
        None,
        &agent("output_mode = \"prompted\"\noutput_retries = 1\n"),
    )
    .await;
    let (events, outcome) = run(&runtime, "File a ticket").await;

    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, ErrorCode::OutputInvalid);
    assert!(failure.message.contains("priority"), "{}", failure.message);
    assert!(
        failure.message.contains(r#""title": "y""#),
        "{}",
        failure.message
    );
    let error = find(&events, "error");
    assert!(
        matches!(
            error[..],
            [EventKind::Error {
                code: ErrorCode::OutputInvalid,
                ..
            }]
        ),
        "{error:?}"
    );
    assert_eq!(done_output(&events), None);
    assert_eq!(llm.requests().len(), 2);
}

async fn a_forced_finish_asks_for_the_value(wire: Wire) {
    let value = json!({"title": "Echoed", "priority": 2});
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "a"})),
            Reply::text(value.to_string()),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, &agent("max_iterations = 1\n")).await;
    let (_, outcome) = run(&runtime, "Echo, then file a ticket").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    assert_eq!(outcome.output, Some(value));
    let requests = llm.requests();
    assert_no_format_on_tool_turns(&requests, wire);
    // The default mode over these providers is native: the summary carries the format.
    assert!(format_of(&requests[1], wire).is_some(), "{}", requests[1]);
}

async fn prompted_mode_reads_the_value_from_the_text(wire: Wire) {
    let value = json!({"title": "Prompted", "priority": 1});
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "a"})),
            Reply::text(format!("Here it is:\n```json\n{value}\n```")),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, &agent("output_mode = \"prompted\"\n")).await;
    let (events, outcome) = run(&runtime, "File a ticket").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.output, Some(value.clone()));
    let requests = llm.requests();
    for request in &requests {
        assert_eq!(format_of(request, wire), None, "{request}");
        assert!(
            request.to_string().contains("\\\"priority\\\""),
            "{request}"
        );
    }
    // The value streamed as it was written.
    let partials: Vec<&Value> = find(&events, "output_delta")
        .into_iter()
        .filter_map(|kind| match kind {
            EventKind::OutputDelta { partial } => Some(partial),
            _ => None,
        })
        .collect();
    assert_eq!(partials.last().copied(), Some(&value), "{partials:?}");
}

#[tokio::test]
async fn a_requests_own_schema_replaces_the_agents_and_a_bad_one_refuses_the_run() {
    let llm = ScriptedLlm::start(vec![Reply::text(r#"{"n": 4}"#)]).await;
    let runtime = runtime(&llm, None, &agent("")).await;
    let mut request = RunRequest::new("How many?");
    request.output = Some(agentloop::OutputSpec {
        name: "count".into(),
        schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
        strict: false,
    });
    let outcome = runtime.agent().run(request).outcome().await.unwrap();
    assert_eq!(outcome.output, Some(json!({"n": 4})));

    let mut bad = RunRequest::new("How many?");
    bad.output = Some(agentloop::OutputSpec {
        name: "count".into(),
        schema: json!({"type": "object", "properties": {"n": {"type": 5}}}),
        strict: false,
    });
    let outcome = runtime.agent().run(bad).outcome().await.unwrap();
    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert!(
        failure.message.contains("/properties/n/type"),
        "{}",
        failure.message
    );
    assert_eq!(llm.requests().len(), 1, "a refused run asks no model");
}

/// A model without tool calling (`llm.tool_calling = "json"`): the default mode is
/// `prompted`, and the value may come as the JSON planner's answer.
#[tokio::test]
async fn the_json_planner_gives_the_value_as_its_answer() {
    let value = json!({"title": "Planned", "priority": 1});
    let llm = ScriptedLlm::start(vec![
        Reply::text(
            r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "a"}, "reasoning": "look"}"#,
        ),
        Reply::text(json!({"action": "finalize", "answer": value}).to_string()),
    ])
    .await;
    let mut config = config(&llm, None, &agent(""));
    config.llm.tool_calling = agentloop::llm::ToolCalling::Json;
    let runtime = agentloop::Runtime::start(&config).await.unwrap();
    let (_, outcome) = run(&runtime, "File a ticket").await;

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.output, Some(value));
    for request in llm.requests() {
        assert!(request.get("tools").is_none(), "{request}");
        assert!(request.get("response_format").is_none(), "{request}");
        assert!(
            request
                .to_string()
                .contains("Your final answer must be only a JSON value")
        );
    }
}
