//! What traces cost per step: the loop of `agentloop-core`'s `loop_overhead` bench (an LLM and
//! a tool that answer at once, in process, one thread), with traces off (no endpoint: no tracer
//! at all) and on (spans exported over OTLP/HTTP to a real receiver on another thread), with and
//! without the message contents on the spans.
//!
//! `cargo bench -p agentloop --bench trace_overhead`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark harness

use std::sync::Arc;

use agentloop::{
    Agent, AgentSettings, EventSink, FnTool, Llm, LlmError, ModelReply, ModelRequest, RunRequest,
    ToolOutput,
    core::{
        TextSink,
        protocol::{Event, Role, ToolCall},
    },
    telemetry::{ModelInfo, TraceExport, Traces},
};
use agentloop_test_support::otlp::OtlpReceiver;
use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;

const STEPS: usize = 10;

/// Asks for one tool call on each of `STEPS` iterations, then answers.
struct InstantLlm;

#[async_trait]
impl Llm for InstantLlm {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let done = request
            .messages
            .iter()
            .filter(|message| message.role == Role::Assistant && !message.tool_calls.is_empty())
            .count();
        if done >= STEPS {
            on_text("All done.");
            return Ok(ModelReply {
                content: Some("All done.".into()),
                finish_reason: Some("stop".into()),
                ..ModelReply::default()
            });
        }
        Ok(ModelReply {
            tool_calls: vec![ToolCall {
                id: format!("call_{done}"),
                name: "bench__lookup".into(),
                arguments: json!({"id": done, "filter": {"kind": "project", "limit": 20}})
                    .to_string(),
            }],
            finish_reason: Some("tool_calls".into()),
            ..ModelReply::default()
        })
    }
}

struct Discard;

impl EventSink for Discard {
    fn emit(&self, _event: Event) {}
}

fn agent(runtime: &tokio::runtime::Runtime, traces: Option<&Traces>) -> Agent {
    let lookup = FnTool::new(
        "bench.lookup",
        "Looks a record up",
        json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
        |args, _ctx| async move {
            Ok(ToolOutput::text(format!(
                "record {}: {{\"name\": \"Example\", \"status\": \"open\"}}",
                args["id"]
            )))
        },
    );
    let mut builder = Agent::builder()
        .llm(Arc::new(InstantLlm))
        .tool(lookup)
        .settings(AgentSettings {
            max_iterations: STEPS as u32 + 1,
            ..AgentSettings::default()
        });
    if let Some(traces) = traces {
        builder = builder.tracer(traces.tracer());
    }
    runtime.block_on(builder.build()).unwrap()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    // The collector, on threads of its own, as a real one would be.
    let collector = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let receiver = collector.block_on(OtlpReceiver::start()).unwrap();
    let model = ModelInfo {
        server: None,
        provider: "openai".into(),
        model: "bench".into(),
    };
    let export = |capture_content| TraceExport {
        traces_url: format!("{}/v1/traces", receiver.endpoint()),
        service_name: "bench".into(),
        capture_content,
    };
    let on = Traces::start(&export(false), model.clone()).unwrap();
    let with_content = Traces::start(&export(true), model).unwrap();
    let mut group = c.benchmark_group("trace_overhead");
    group.throughput(Throughput::Elements(STEPS as u64));
    for (name, traces) in [
        ("per_iteration_1_tool_traces_off", None),
        ("per_iteration_1_tool_traces_on", Some(&on)),
        (
            "per_iteration_1_tool_traces_on_with_content",
            Some(&with_content),
        ),
    ] {
        let agent = agent(&runtime, traces);
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = runtime.block_on(agent.run_with_sink(
                    RunRequest::new("Look up the records"),
                    Arc::new(Discard),
                    Default::default(),
                ));
                assert_eq!(outcome.tools_used as usize, STEPS);
            })
        });
    }
    group.finish();
    runtime.block_on(on.shutdown());
    runtime.block_on(with_content.shutdown());
    let received = receiver.spans().len();
    assert!(received > 0, "the spans reached the receiver");
    eprintln!("the receiver got {received} spans");
    drop(receiver);
    drop(collector);
}

criterion_group!(benches, bench);
criterion_main!(benches);
