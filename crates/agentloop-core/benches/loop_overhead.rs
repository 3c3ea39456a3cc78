//! The runtime's own cost per iteration and per tool call: an LLM and a tool that answer
//! instantly, in process, so that everything measured is agentloop itself (state machine,
//! validation, canonicalisation, event emission, task spawning).
//!
//! `cargo bench -p agentloop-core --bench loop_overhead`

#![allow(clippy::panic, clippy::unwrap_used, clippy::expect_used)] // benchmark harness, like a test

use std::sync::{
    Arc,
    atomic::{AtomicU64, Ordering},
};

use agentloop_core::{
    Agent, AgentSettings, Budget, CallPurpose, EventSink, FnTool, Llm, LlmError, ModelReply,
    ModelRequest, PlanningSettings, Price, PriceTable, Pricing, RunRequest, TextSink, ToolOutput,
    protocol::{Event, Role, ToolCall},
};
use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const PLAN: &str = r#"{"goal": "Look up the records", "sub_tasks": [
    {"id": "1", "description": "Look each record up", "status": "pending", "depends_on": []},
    {"id": "2", "description": "Report them", "status": "pending", "depends_on": ["1"]}],
    "needs_clarification": false, "clarification_question": null}"#;

/// Asks for `tools_per_reply` calls on each of `steps` iterations, then answers.
struct InstantLlm {
    steps: usize,
    tools_per_reply: usize,
}

#[async_trait]
impl Llm for InstantLlm {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        if request.purpose == CallPurpose::Plan {
            return Ok(ModelReply {
                content: Some(PLAN.into()),
                finish_reason: Some("stop".into()),
                ..ModelReply::default()
            });
        }
        let done = request
            .messages
            .iter()
            .filter(|message| message.role == Role::Assistant && !message.tool_calls.is_empty())
            .count();
        if done >= self.steps {
            on_text("All done.");
            return Ok(ModelReply {
                content: Some("All done.".into()),
                finish_reason: Some("stop".into()),
                ..ModelReply::default()
            });
        }
        let tool_calls = (0..self.tools_per_reply)
            .map(|i| ToolCall {
                id: format!("call_{done}_{i}"),
                name: "bench__lookup".into(),
                arguments:
                    json!({"id": done * 100 + i, "filter": {"kind": "project", "limit": 20}})
                        .to_string(),
            })
            .collect();
        Ok(ModelReply {
            tool_calls,
            finish_reason: Some("tool_calls".into()),
            ..ModelReply::default()
        })
    }
}

struct CountingSink(AtomicU64);

impl EventSink for CountingSink {
    fn emit(&self, _event: Event) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn agent(
    runtime: &tokio::runtime::Runtime,
    steps: usize,
    tools_per_reply: usize,
    planning: bool,
    priced: bool,
) -> Agent {
    // Every call priced, and a budget checked before every step (never reached).
    let (budget, pricing) = if priced {
        let price = Price {
            input: 0.15,
            output: 0.60,
            cached_input: None,
            cache_write: None,
        };
        let prices = PriceTable::new([("bench".to_string(), price)].into())
            .unwrap_or_else(|error| panic!("prices: {error}"));
        let budget = Budget {
            max_tokens: Some(u64::MAX / 4),
            max_cost_usd: Some(1e9),
        };
        let pricing = Pricing {
            prices: Arc::new(prices),
            default_model: Some("bench".to_string()),
        };
        (budget, pricing)
    } else {
        Default::default()
    };
    let settings = AgentSettings {
        budget,
        pricing,
        max_iterations: steps as u32 + 1,
        planning: PlanningSettings {
            enabled: planning,
            model: None,
        },
        ..AgentSettings::default()
    };
    let lookup = FnTool::new(
        "bench.lookup",
        "Looks a record up",
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "filter": {"type": "object", "properties": {"kind": {"type": "string"}, "limit": {"type": "integer"}}}
            },
            "required": ["id"]
        }),
        |args, _ctx| async move {
            Ok(ToolOutput::text(format!(
                "record {}: {{\"name\": \"Example\", \"status\": \"open\"}}",
                args["id"]
            )))
        },
    );
    runtime
        .block_on(
            Agent::builder()
                .llm(Arc::new(InstantLlm {
                    steps,
                    tools_per_reply,
                }))
                .tool(lookup)
                .settings(settings)
                .build(),
        )
        .unwrap_or_else(|error| panic!("agent: {error}"))
}

fn bench(c: &mut Criterion) {
    // One thread: what is measured is agentloop's own work, not the operating system handing
    // tasks between worker threads (which dominates a multi-threaded measurement at this scale).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|error| panic!("runtime: {error}"));
    let sink = Arc::new(CountingSink(AtomicU64::new(0)));
    let mut group = c.benchmark_group("loop_overhead");
    for (name, steps, tools, planning, priced) in [
        ("answer_only_run", 0, 0, false, false),
        ("per_iteration_1_tool", 10, 1, false, false),
        ("per_iteration_4_parallel_tools", 10, 4, false, false),
        // The plan call once, then the <Plan>/<ToolCallHistory> block on every step.
        ("per_iteration_1_tool_with_a_plan", 10, 1, true, false),
        // Each reply priced (`llm_call`), the budget checked before each step.
        (
            "per_iteration_1_tool_priced_with_a_budget",
            10,
            1,
            false,
            true,
        ),
    ] {
        let agent = agent(&runtime, steps, tools, planning, priced);
        // Throughput in iterations (LLM calls that asked for tools), so criterion prints the
        // time per iteration; for the answer-only run, per run.
        group.throughput(Throughput::Elements(steps.max(1) as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                let outcome = runtime.block_on(agent.run_with_sink(
                    RunRequest::new("Look up the records"),
                    sink.clone(),
                    CancellationToken::new(),
                ));
                assert_eq!(outcome.tools_used as usize, steps * tools);
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
