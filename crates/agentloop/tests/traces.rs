//! Traces: a run exports its spans over OTLP/HTTP to a real receiver (protobuf decoded with the
//! maintained `opentelemetry-proto` types), following the GenAI semantic conventions: one
//! `invoke_agent`, one `chat` per LLM call and one `execute_tool` per tool call, parented; the
//! trace of an HTTP request's `traceparent` continued, and carried on to an MCP server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{sync::Arc, time::Duration};

use agentloop::{
    Event, KeyStore, RunRequest, RunStatus, Runtime, Store,
    core::InputAnswer,
    server::{AppState, Metrics},
};
use agentloop_test_support::{
    mcp::{read_test_mcp_log, test_mcp_http_config_toml, test_mcp_server_http},
    otlp::{OtlpReceiver, ReceivedSpan},
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::{Value, json};

/// The content attributes the conventions make opt-in.
const CONTENT: [&str; 5] = [
    "gen_ai.system_instructions",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
];

const INTERNAL: i32 = 1;
const CLIENT: i32 = 3;
const STATUS_ERROR: i32 = 2;

fn telemetry(receiver: &OtlpReceiver, capture_content: bool) -> String {
    format!(
        "[telemetry]\notlp_endpoint = \"{}\"\ncapture_content = {capture_content}\n",
        receiver.endpoint()
    )
}

async fn traced_runtime(config: agentloop::Config) -> Runtime {
    let runtime = Runtime::start(&config).await.expect("runtime starts");
    assert!(runtime.warnings().is_empty(), "{:?}", runtime.warnings());
    assert!(runtime.traces().is_some(), "an endpoint sets up traces");
    runtime
}

/// Flushes the runtime's spans and gives every span the receiver has.
async fn exported(runtime: &Runtime, receiver: &OtlpReceiver) -> Vec<ReceivedSpan> {
    runtime.traces().unwrap().flush().await;
    receiver.spans()
}

/// Flushes until the run's span has ended and arrived, and gives every span.
async fn exported_once_ended(runtime: &Runtime, receiver: &OtlpReceiver) -> Vec<ReceivedSpan> {
    agentloop_test_support::wait::eventually("the run's span", Duration::from_secs(20), || async {
        let spans = exported(runtime, receiver).await;
        (!named(&spans, "invoke_agent ").is_empty()).then_some(spans)
    })
    .await
}

fn named<'a>(spans: &'a [ReceivedSpan], prefix: &str) -> Vec<&'a ReceivedSpan> {
    spans
        .iter()
        .filter(|span| span.name.starts_with(prefix))
        .collect()
}

fn one<'a>(spans: &'a [ReceivedSpan], prefix: &str) -> &'a ReceivedSpan {
    let found = named(spans, prefix);
    assert_eq!(found.len(), 1, "one span {prefix}: {spans:#?}");
    found[0]
}

#[tokio::test]
async fn a_chained_run_exports_its_agent_llm_and_tool_spans_parented() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "one"}))
            .with_usage(100, 10)
            .with_cache(40, 0),
        Reply::tool_call("test__add", json!({"a": 1, "b": 2})).with_usage(120, 12),
        Reply::text("one, and 3").with_usage(130, 5),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    // USD per million tokens; cache reads cost what other input does (no `cached_input`).
    let prices = "[prices.scripted]\ninput = 1.0\noutput = 2.0\n";
    let extra = format!("{}\n{prices}", telemetry(&receiver, false));
    let runtime = traced_runtime(config(&llm, None, &extra)).await;
    let llm_port = reqwest::Url::parse(&llm.base_url())
        .unwrap()
        .port()
        .unwrap();
    let (_, outcome) = run(&runtime, "Echo one, then add 1 and 2").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let spans = exported(&runtime, &receiver).await;
    assert_eq!(spans.len(), 6, "{spans:#?}");

    let agent = one(&spans, "invoke_agent ");
    assert_eq!(agent.name, "invoke_agent agentloop");
    assert_eq!(agent.kind, INTERNAL);
    assert_eq!(
        agent.parent_span_id, "",
        "a run nobody traced starts a trace"
    );
    assert_eq!(agent.text("gen_ai.operation.name"), Some("invoke_agent"));
    assert_eq!(agent.text("gen_ai.agent.name"), Some("agentloop"));
    assert_eq!(agent.text("gen_ai.agent.id"), Some("agentloop"));
    assert_eq!(agent.text("gen_ai.request.model"), Some("scripted"));
    let session_id = outcome.session_id.to_string();
    assert_eq!(
        agent.text("gen_ai.conversation.id"),
        Some(session_id.as_str())
    );
    assert_eq!(agent.service_name.as_deref(), Some("agentloop"));
    for span in &spans {
        assert_eq!(span.trace_id, agent.trace_id, "{}", span.name);
        if span.name != agent.name {
            assert_eq!(span.parent_span_id, agent.span_id, "{}", span.name);
        }
        for key in CONTENT {
            assert!(
                span.attribute(key).is_none(),
                "{key} on {} without the opt-in",
                span.name
            );
        }
    }

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 3);
    let tokens: Vec<(Option<i64>, Option<i64>)> = chats
        .iter()
        .map(|chat| {
            (
                chat.integer("gen_ai.usage.input_tokens"),
                chat.integer("gen_ai.usage.output_tokens"),
            )
        })
        .collect();
    assert_eq!(
        tokens,
        [
            (Some(100), Some(10)),
            (Some(120), Some(12)),
            (Some(130), Some(5))
        ]
    );
    for chat in &chats {
        assert_eq!(chat.name, "chat scripted");
        assert_eq!(chat.kind, CLIENT);
        assert_eq!(chat.text("gen_ai.operation.name"), Some("chat"));
        assert_eq!(chat.text("gen_ai.provider.name"), Some("openai"));
        assert_eq!(chat.text("gen_ai.request.model"), Some("scripted"));
        assert_eq!(chat.text("gen_ai.response.model"), Some("scripted"));
        assert_eq!(chat.text("server.address"), Some("127.0.0.1"));
        assert_eq!(chat.integer("server.port"), Some(i64::from(llm_port)));
        assert!(chat.attribute("error.type").is_none());
    }
    let reply_ids: Vec<&str> = chats
        .iter()
        .map(|chat| chat.text("gen_ai.response.id").unwrap())
        .collect();
    assert_eq!(reply_ids.len(), 3);
    for id in &reply_ids {
        assert!(id.starts_with("chatcmpl-"), "the provider's id: {id}");
    }
    assert!(
        reply_ids[0] != reply_ids[1] && reply_ids[1] != reply_ids[2],
        "{reply_ids:?}"
    );
    let costs: Vec<f64> = chats
        .iter()
        .map(|chat| {
            chat.attribute("agentloop.cost_usd")
                .and_then(|v| v.as_f64())
                .unwrap()
        })
        .collect();
    let expected = [
        (100.0 + 20.0) / 1e6,
        (120.0 + 24.0) / 1e6,
        (130.0 + 10.0) / 1e6,
    ];
    for (cost, expected) in costs.iter().zip(expected) {
        assert!((cost - expected).abs() < 1e-12, "{costs:?}");
    }
    let run_cost = agent
        .attribute("agentloop.cost_usd")
        .and_then(|v| v.as_f64())
        .unwrap();
    assert!(
        (run_cost - expected.iter().sum::<f64>()).abs() < 1e-12,
        "{run_cost}"
    );
    assert_eq!(
        agent.attribute("agentloop.cost_complete"),
        Some(&json!(true))
    );
    assert_eq!(
        chats[0].integer("gen_ai.usage.cache_read.input_tokens"),
        Some(40)
    );
    assert_eq!(
        chats[1].integer("gen_ai.usage.cache_read.input_tokens"),
        None
    );
    assert_eq!(
        chats[0].attribute("gen_ai.response.finish_reasons"),
        Some(&json!(["tool_calls"]))
    );
    assert_eq!(
        chats[2].attribute("gen_ai.response.finish_reasons"),
        Some(&json!(["stop"]))
    );

    let tools = named(&spans, "execute_tool ");
    let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
    assert_eq!(names, ["execute_tool test.echo", "execute_tool test.add"]);
    for (tool, record) in tools.iter().zip(&outcome.records) {
        assert_eq!(tool.kind, INTERNAL);
        assert_eq!(tool.text("gen_ai.operation.name"), Some("execute_tool"));
        assert_eq!(tool.text("gen_ai.tool.name"), Some(record.tool.as_str()));
        assert_eq!(
            tool.text("gen_ai.tool.call.id"),
            Some(record.call_id.as_str())
        );
        assert_eq!(tool.text("agentloop.tool.status"), Some("success"));
        assert_eq!(tool.text("gen_ai.tool.type"), Some("extension"));
    }
    assert_eq!(
        tools[0].text("gen_ai.tool.description"),
        Some("Returns its text unchanged")
    );
    assert_eq!(
        tools[1].text("gen_ai.tool.description"),
        Some("Adds two numbers")
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_call_refused_before_it_runs_has_its_span_with_the_reason() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": "one", "b": 2})),
        Reply::text("The call was refused."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let runtime = traced_runtime(config(&llm, None, &telemetry(&receiver, false))).await;
    let (_, outcome) = run(&runtime, "Add them").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let record = &outcome.records[0];
    assert_ne!(record.status.as_str(), "success", "{record:?}");
    let spans = exported(&runtime, &receiver).await;

    let tool = one(&spans, "execute_tool test.add");
    let agent = one(&spans, "invoke_agent ");
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_eq!(tool.text("gen_ai.operation.name"), Some("execute_tool"));
    assert_eq!(tool.text("gen_ai.tool.name"), Some("test.add"));
    assert_eq!(
        tool.text("gen_ai.tool.call.id"),
        Some(record.call_id.as_str())
    );
    assert_eq!(tool.text("gen_ai.tool.type"), Some("extension"));
    assert_eq!(
        tool.text("gen_ai.tool.description"),
        Some("Adds two numbers")
    );
    assert_eq!(
        tool.text("agentloop.tool.status"),
        Some(record.status.as_str())
    );
    assert_eq!(tool.text("error.type"), Some("refused"));
    assert_eq!(tool.status_code, STATUS_ERROR);
    runtime.shutdown().await;
}

#[tokio::test]
async fn contents_are_on_the_spans_only_when_opted_in() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "secret"})),
        Reply::text("It said secret."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let extra = format!(
        "{}\n[agent]\nsystem_prompt = \"Be brief.\"\n",
        telemetry(&receiver, true)
    );
    let runtime = traced_runtime(config(&llm, None, &extra)).await;
    let (_, outcome) = run(&runtime, "What does echo say?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let spans = exported(&runtime, &receiver).await;

    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 2);
    let json_of = |span: &ReceivedSpan, key: &str| -> Value {
        serde_json::from_str(
            span.text(key)
                .unwrap_or_else(|| panic!("{key} on {}", span.name)),
        )
        .unwrap()
    };
    let instructions = json_of(chats[0], "gen_ai.system_instructions");
    assert_eq!(instructions[0]["type"], "text");
    assert!(
        instructions[0]["content"]
            .as_str()
            .unwrap()
            .contains("Be brief.")
    );
    let input = json_of(chats[0], "gen_ai.input.messages");
    let last = input.as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["parts"][0]["content"], "What does echo say?");
    let output = json_of(chats[0], "gen_ai.output.messages");
    assert_eq!(output[0]["role"], "assistant");
    assert_eq!(output[0]["parts"][0]["type"], "tool_call");
    assert_eq!(output[0]["parts"][0]["name"], "test__echo");
    assert_eq!(
        output[0]["parts"][0]["arguments"],
        json!({"text": "secret"})
    );
    // The second call sees the tool's result.
    let input = json_of(chats[1], "gen_ai.input.messages");
    assert!(input.as_array().unwrap().iter().any(|message| {
        message["role"] == "tool"
            && message["parts"][0]["type"] == "tool_call_response"
            && message["parts"][0]["response"] == "secret"
    }));
    let output = json_of(chats[1], "gen_ai.output.messages");
    assert_eq!(output[0]["parts"][0]["content"], "It said secret.");
    assert_eq!(output[0]["finish_reason"], "stop");

    let tool = one(&spans, "execute_tool ");
    assert_eq!(
        json_of(tool, "gen_ai.tool.call.arguments"),
        json!({"text": "secret"})
    );
    assert_eq!(tool.text("gen_ai.tool.call.result"), Some("secret"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failed_llm_call_and_its_run_carry_the_error_type() {
    let llm = ScriptedLlm::start(vec![Reply::error(400, "this model does not exist")]).await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let runtime = traced_runtime(config(&llm, None, &telemetry(&receiver, false))).await;
    let (_, outcome) = run(&runtime, "Hello?").await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let code = outcome.failure.as_ref().unwrap().code.as_str();
    let spans = exported(&runtime, &receiver).await;

    let chat = one(&spans, "chat ");
    assert_eq!(chat.text("error.type"), Some(code));
    assert_eq!(chat.status_code, STATUS_ERROR);
    assert!(chat.attribute("gen_ai.response.finish_reasons").is_none());
    let agent = one(&spans, "invoke_agent ");
    assert_eq!(agent.text("error.type"), Some(code));
    assert_eq!(agent.status_code, STATUS_ERROR);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_sub_agent_run_nests_under_its_tool_call() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("agent__researcher", json!({"task": "Find X"})),
        Reply::tool_call("test__echo", json!({"text": "X is 42"})),
        Reply::text("X is 42."),
        Reply::text("The researcher says X is 42."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let extra = format!(
        "{}\n[agents.researcher]\ndescription = \"Finds facts.\"\nsystem_prompt = \"You research.\"\ntools = [\"test.echo\"]\n",
        telemetry(&receiver, false)
    );
    let runtime = traced_runtime(config(&llm, None, &extra)).await;
    let (_, outcome) = run(&runtime, "What is X?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let spans = exported(&runtime, &receiver).await;
    assert_eq!(spans.len(), 8, "{spans:#?}");

    let main = one(&spans, "invoke_agent agentloop");
    let call = one(&spans, "execute_tool agent.researcher");
    let researcher = one(&spans, "invoke_agent researcher");
    assert_eq!(call.parent_span_id, main.span_id);
    assert_eq!(researcher.parent_span_id, call.span_id);
    assert_eq!(researcher.text("gen_ai.agent.name"), Some("researcher"));
    let echo = one(&spans, "execute_tool test.echo");
    assert_eq!(echo.parent_span_id, researcher.span_id);
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 4);
    let under = |parent: &ReceivedSpan| {
        chats
            .iter()
            .filter(|chat| chat.parent_span_id == parent.span_id)
            .count()
    };
    assert_eq!((under(main), under(researcher)), (2, 2));
    assert!(spans.iter().all(|span| span.trace_id == main.trace_id));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_request_with_a_traceparent_continues_its_trace_and_an_mcp_server_gets_the_call_span() {
    let log = tempfile::NamedTempFile::new().unwrap();
    let remote = test_mcp_server_http(Some(log.path()));
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("remote__record", json!({"note": "traced"})),
        Reply::text("Recorded."),
        // The chat's run.
        Reply::text("Hello."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let extra = format!(
        "{}\n{}",
        telemetry(&receiver, false),
        test_mcp_http_config_toml("remote", remote.url())
    );
    let runtime = traced_runtime(config(&llm, None, &extra)).await;
    let store = runtime.store().clone();
    let key = store.create_api_key("ann").await.unwrap();
    let state = AppState::new(
        runtime.agent().clone(),
        store.clone() as Arc<dyn Store>,
        store as Arc<dyn KeyStore>,
        Arc::new(Metrics::new().unwrap()),
        Default::default(),
    );
    let listener = agentloop::server::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let address = listener.local_addr().unwrap();
    let server = tokio::spawn(agentloop::server::serve(
        listener,
        state,
        std::future::pending(),
    ));

    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let caller_span = "00f067aa0ba902b7";
    let answer: Value = reqwest::Client::new()
        .post(format!("http://{address}/v1/runs"))
        .bearer_auth(&key.secret)
        .header("traceparent", format!("00-{trace_id}-{caller_span}-01"))
        .json(&json!({"query": "Record it", "stream": false}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(answer["status"], "completed", "{answer}");
    // The run's span ends just after its answer is sent.
    let spans = exported_once_ended(&runtime, &receiver).await;
    assert!(
        spans.iter().all(|span| span.trace_id == trace_id),
        "{spans:#?}"
    );
    let agent = one(&spans, "invoke_agent ");
    assert_eq!(agent.parent_span_id, caller_span);
    let call = one(&spans, "execute_tool remote.record");
    let expected = format!("00-{trace_id}-{}-01", call.span_id);
    let logged = read_test_mcp_log(log.path());
    let record = logged
        .iter()
        .find(|line| line["tool"] == "record")
        .expect("the call reached the server");
    assert_eq!(record["traceparent"], json!(expected), "in _meta");
    assert_eq!(
        record["traceparent_header"],
        json!(expected),
        "as the HTTP header"
    );

    // The AI SDK's chat route continues the caller's trace too.
    let chat_trace = "0af7651916cd43dd8448eb211c80319c";
    let chat_caller = "b7ad6b7169203331";
    let stream = reqwest::Client::new()
        .post(format!("http://{address}/v1/chat"))
        .bearer_auth(&key.secret)
        .header("traceparent", format!("00-{chat_trace}-{chat_caller}-01"))
        .json(&json!({
            "id": "chat-1",
            "trigger": "submit-message",
            "messages": [{"id": "m1", "role": "user", "parts": [{"type": "text", "text": "Hi"}]}],
        }))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(stream.contains("Hello."), "{stream}");
    let spans = agentloop_test_support::wait::eventually(
        "the chat run's span",
        Duration::from_secs(20),
        || async {
            let spans = exported(&runtime, &receiver).await;
            spans
                .iter()
                .any(|span| span.name.starts_with("invoke_agent ") && span.trace_id == chat_trace)
                .then_some(spans)
        },
    )
    .await;
    let chat_run: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|span| span.trace_id == chat_trace)
        .collect();
    assert_eq!(chat_run.len(), 2, "invoke_agent and chat: {chat_run:#?}");
    let agent = chat_run
        .iter()
        .find(|span| span.name.starts_with("invoke_agent "))
        .unwrap();
    assert_eq!(agent.parent_span_id, chat_caller);
    server.abort();
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_run_resumed_after_a_restart_continues_its_trace() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "write it"})),
        Reply::text("Recorded."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let extra = format!(
        "{}\n[tools.\"test.record\"]\nneeds_approval = true\n",
        telemetry(&receiver, false)
    );
    let config = config_with_store(&llm, None, &store_url, &extra);
    let first = traced_runtime(config.clone()).await;
    let (_, paused) = first
        .agent()
        .run(RunRequest::new("record it"))
        .collect()
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingInput);
    let call_id = paused.input_required.clone().unwrap().calls[0]
        .call_id
        .clone();
    first.shutdown().await;
    let before = receiver.spans();
    let paused_span = one(&before, "invoke_agent ").clone();

    // Another process: the same store, a new exporter.
    let second = traced_runtime(config).await;
    let answer = InputAnswer {
        approve: vec![call_id],
        ..Default::default()
    };
    let resumed = second.agent().resume(paused.run_id, &answer).await.unwrap();
    let (sink, _events) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let outcome = second
        .agent()
        .run_resumed(resumed, Arc::new(sink), Default::default())
        .await;
    assert_eq!(outcome.answer.as_deref(), Some("Recorded."));
    let spans = exported(&second, &receiver).await;

    let agents = named(&spans, "invoke_agent ");
    assert_eq!(agents.len(), 2, "{spans:#?}");
    let goes_on = agents
        .iter()
        .find(|span| span.span_id != paused_span.span_id)
        .unwrap();
    assert_eq!(goes_on.trace_id, paused_span.trace_id);
    assert_eq!(goes_on.parent_span_id, paused_span.span_id);
    let record = one(&spans, "execute_tool test.record");
    assert_eq!(record.parent_span_id, goes_on.span_id);
    second.shutdown().await;
}

#[tokio::test]
async fn without_an_endpoint_there_is_no_exporter() {
    let llm = ScriptedLlm::start(vec![Reply::text("Hi.")]).await;
    let runtime = runtime(&llm, None, "").await;
    assert!(runtime.traces().is_none());
    let (_, outcome) = run(&runtime, "Hello").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_failed_tool_call_has_its_status_and_error_type() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__fail", json!({"message": "disk full"})),
        Reply::text("The tool failed."),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let runtime = traced_runtime(config(&llm, None, &telemetry(&receiver, false))).await;
    let (_, outcome) = run(&runtime, "Try it").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let spans = exported(&runtime, &receiver).await;

    let tool = one(&spans, "execute_tool test.fail");
    assert_eq!(tool.text("agentloop.tool.status"), Some("error"));
    assert_eq!(tool.text("error.type"), Some("tool_error"));
    assert_eq!(tool.status_code, STATUS_ERROR);
    let agent = one(&spans, "invoke_agent ");
    assert!(
        agent.attribute("error.type").is_none(),
        "the run did not fail"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_run_refused_at_its_start_ends_its_span_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let llm = ScriptedLlm::start(vec![Reply::tool_call(
        "test__record",
        json!({"note": "write it"}),
    )])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let extra = format!(
        "{}\n[tools.\"test.record\"]\nneeds_approval = true\n",
        telemetry(&receiver, false)
    );
    let runtime = traced_runtime(config_with_store(&llm, None, &store_url, &extra)).await;
    // A paused run keeps its session: the next run of that session is refused.
    let (_, paused) = runtime
        .agent()
        .run(RunRequest::new("record it"))
        .collect()
        .await
        .unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingInput);
    let (_, refused) = runtime
        .agent()
        .run(RunRequest::new("and this").session(paused.session_id))
        .collect()
        .await
        .unwrap();
    assert_eq!(refused.failure.as_ref().unwrap().code, "session_busy");
    let spans = exported(&runtime, &receiver).await;

    let agents = named(&spans, "invoke_agent ");
    assert_eq!(agents.len(), 2, "{spans:#?}");
    let refused_run = refused.run_id.to_string();
    let span = agents
        .iter()
        .find(|span| span.text("agentloop.run_id") == Some(refused_run.as_str()))
        .unwrap();
    assert_eq!(span.text("error.type"), Some("session_busy"));
    assert_eq!(span.status_code, STATUS_ERROR);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_guardrail_check_has_its_span_and_an_llm_guardrail_its_chat_span() {
    let llm = ScriptedLlm::start(vec![
        Reply::text(r#"{"allow": true}"#).with_usage(20, 3),
        Reply::text("Boil it.").with_usage(30, 4),
    ])
    .await;
    let receiver = OtlpReceiver::start().await.unwrap();
    let guardrail = "[[guardrails]]\nname = \"on-topic\"\nkind = \"llm\"\non = \"input\"\n\
                     prompt = \"The request is about cooking.\"\n";
    let extra = format!("{}\n{guardrail}", telemetry(&receiver, false));
    let runtime = traced_runtime(config(&llm, None, &extra)).await;
    let (_, outcome) = run(&runtime, "How do I cook pasta?").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let spans = exported_once_ended(&runtime, &receiver).await;
    let agent = one(&spans, "invoke_agent ");
    let check = one(&spans, "guardrail on-topic");
    assert_eq!(check.parent_span_id, agent.span_id);
    assert_eq!(check.text("agentloop.guardrail.on"), Some("input"));
    assert_eq!(check.text("agentloop.guardrail.outcome"), Some("allowed"));
    let chats = named(&spans, "chat ");
    assert_eq!(chats.len(), 2, "{spans:#?}");
    let purposes: Vec<_> = chats
        .iter()
        .map(|chat| chat.text("agentloop.call.purpose").unwrap())
        .collect();
    assert!(purposes.contains(&"guardrail"), "{purposes:?}");
    assert!(
        chats
            .iter()
            .all(|chat| chat.parent_span_id == agent.span_id)
    );
}
