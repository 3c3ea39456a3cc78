//! What persistence costs a run: one `save_step` typical of a loop step (2 messages, 1 tool
//! record, 4 events), and whole runs persisted per second (create session, start run, 3 steps
//! and the final step), on SQLite (a temporary file) and on PostgreSQL (a schema of its own at
//! `DATABASE_URL`, default `postgres://postgres@127.0.0.1:5432/test`; skipped with a message
//! when it cannot be reached).
//!
//! `cargo bench -p agentloop-store --bench store_throughput`

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark harness, like a test

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentloop_core::protocol::{
    ChatMessage, Event, EventKind, MessageKind, RunStatus, SessionMessage, ToolCall,
    ToolExecutionRecord, ToolStatus, Usage,
};
use agentloop_core::{NewRun, NewSession, RunEnd, RunProgress, StepRecord, Store};
use agentloop_store::SqlStore;
use agentloop_test_support::postgres::TestSchema;
use chrono::Utc;
use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use tokio::runtime::Runtime;
use uuid::Uuid;

/// A database to measure, and how to remove it afterwards.
struct Target {
    name: &'static str,
    store: SqlStore,
    cleanup: Option<TestSchema>,
    _dir: Option<tempfile::TempDir>,
}

async fn sqlite() -> Target {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("bench.db").display());
    Target {
        name: "sqlite",
        store: SqlStore::connect(&url).await.unwrap(),
        cleanup: None,
        _dir: Some(dir),
    }
}

async fn postgres() -> Option<Target> {
    let schema = match TestSchema::try_create().await {
        Ok(schema) => schema,
        Err(message) => {
            eprintln!("PostgreSQL benchmarks skipped: {message}");
            return None;
        }
    };
    Some(Target {
        name: "postgres",
        store: SqlStore::connect(schema.url()).await.unwrap(),
        cleanup: Some(schema),
        _dir: None,
    })
}

impl Target {
    async fn finish(self) {
        self.store.close().await;
        if let Some(schema) = self.cleanup {
            schema.drop_schema().await;
        }
    }
}

/// Hands out the seqs of a run's events, from 1 without gaps.
struct Seqs(AtomicU64);

impl Seqs {
    fn next(&self) -> u64 {
        self.0.fetch_add(1, Ordering::Relaxed) + 1
    }
}

fn message(session_id: Uuid, run_id: Uuid, kind: MessageKind, chat: ChatMessage) -> SessionMessage {
    SessionMessage {
        id: Uuid::now_v7(),
        session_id,
        run_id: Some(run_id),
        kind,
        message: chat,
        metadata: serde_json::Value::Null,
        created_at: Utc::now(),
        superseded_by_run: None,
    }
}

/// One tool-calling iteration: the assistant's call and its result, the execution record, and
/// thinking / tool_selected / tool_executed / assistant_delta events.
fn loop_step(session_id: Uuid, run_id: Uuid, iteration: u32, seqs: &Seqs) -> StepRecord {
    let call_id = format!("call_{iteration}_{}", Uuid::new_v4().simple());
    let arguments = json!({"status": "open", "customer": "ACME", "limit": 20});
    let result = json!({"count": 3, "invoices": [{"id": 1, "total": 120.5}, {"id": 2, "total": 80}, {"id": 3, "total": 42}]});
    let messages = vec![
        message(
            session_id,
            run_id,
            MessageKind::ToolCall,
            ChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall {
                    id: call_id.clone(),
                    name: "erp.search_invoices".into(),
                    arguments: arguments.to_string(),
                }],
            ),
        ),
        message(
            session_id,
            run_id,
            MessageKind::ToolResult,
            ChatMessage::tool_result(&call_id, result.to_string()),
        ),
    ];
    let record = ToolExecutionRecord {
        call_id: call_id.clone(),
        iteration,
        tool: "erp.search_invoices".into(),
        arguments: arguments.clone(),
        started_at: Utc::now(),
        duration_ms: 12,
        status: ToolStatus::Success,
        result: Some(result.to_string()),
        structured_result: Some(result.clone()),
        error: None,
        cost_usd: None,
        logs: Vec::new(),
    };
    let kinds = [
        EventKind::Thinking { iteration },
        EventKind::ToolSelected {
            iteration,
            call_id: call_id.clone(),
            tool: "erp.search_invoices".into(),
            arguments,
        },
        EventKind::ToolExecuted {
            call_id,
            tool: "erp.search_invoices".into(),
            status: ToolStatus::Success,
            duration_ms: 12,
            result: Some(result.to_string()),
            error: None,
        },
        EventKind::AssistantDelta {
            text: "Looking up the open invoices.".into(),
        },
    ];
    StepRecord {
        run_id,
        session_id,
        messages,
        records: vec![record],
        events: kinds
            .into_iter()
            .map(|kind| Event {
                run_id,
                seq: seqs.next(),
                parent_run_id: None,
                kind,
            })
            .collect(),
        progress: RunProgress {
            iterations: iteration,
            tools_used: iteration,
            usage: Usage {
                prompt_tokens: 900 * u64::from(iteration),
                completion_tokens: 60 * u64::from(iteration),
                ..Usage::default()
            },
        },
        end: None,
        // What a real step saves to go on from: its input with the first step, then a head
        // of the size a loop's state has between batches.
        checkpoint: Some(agentloop_core::Checkpoint {
            input: (iteration == 1).then(|| {
                json!({"history": [], "system_prompt": "You are a helpful assistant. ".repeat(20)})
            }),
            head: json!({
                "version": 4,
                "phase": "awaiting_step",
                "iteration": iteration,
                "ids_issued": iteration * 4,
                "seen_calls": (0..iteration).map(|i| (format!("{i:032x}"), format!("call_{i}")))
                    .collect::<std::collections::BTreeMap<_, _>>(),
                "guidance": {"plan": null, "clarified": false, "calls_since_review": 0},
            })
            .to_string(),
            last_seq: u64::from(iteration) * 4,
            turn: Vec::new(),
        }),
        owner: None,
    }
}

async fn start(store: &SqlStore) -> (Uuid, Uuid) {
    let session_id = Uuid::now_v7();
    store
        .create_session(&NewSession {
            id: session_id,
            user_id: "bench".into(),
            title: "How many open invoices does ACME have?".into(),
        })
        .await
        .unwrap();
    let run_id = Uuid::now_v7();
    store
        .start_run(&NewRun {
            id: run_id,
            session_id,
            user_id: "bench".into(),
            query: "How many open invoices does ACME have?".into(),
            model: Some("gpt-4o-mini".into()),
            save_chat: true,
            context: json!({}),
            started_at: Utc::now(),
            owner: None,
            traceparent: None,
        })
        .await
        .unwrap();
    (session_id, run_id)
}

/// A whole run: 3 tool-calling steps, then the answer with its events and the end.
async fn persist_run(store: &SqlStore) {
    let (session_id, run_id) = start(store).await;
    let seqs = Seqs(AtomicU64::new(0));
    for iteration in 1..=3 {
        let step = loop_step(session_id, run_id, iteration, &seqs);
        store.save_step(&step).await.unwrap();
    }
    let answer = message(
        session_id,
        run_id,
        MessageKind::Dialogue,
        ChatMessage::assistant("ACME has 3 open invoices, 242.50 in total."),
    );
    let answer_id = answer.id;
    let last = StepRecord {
        run_id,
        session_id,
        messages: vec![answer],
        records: Vec::new(),
        events: ["ACME has 3 open invoices, ", "242.50 in total."]
            .into_iter()
            .map(|delta| EventKind::FinalResponse {
                delta: delta.into(),
            })
            .chain([EventKind::Done {
                status: RunStatus::Completed,
                iterations: 4,
                tools_used: 3,
                message_id: Some(answer_id),
                usage: Usage::default(),
                should_refresh: false,
                output: None,
            }])
            .map(|kind| Event {
                run_id,
                seq: seqs.next(),
                parent_run_id: None,
                kind,
            })
            .collect(),
        progress: RunProgress {
            iterations: 4,
            tools_used: 3,
            usage: Usage::default(),
        },
        end: Some(RunEnd {
            output: None,
            status: RunStatus::Completed,
            answer_message_id: Some(answer_id),
            failure: None,
            finalize_reason: None,
            finished_at: Utc::now(),
        }),
        ..Default::default()
    };
    store.save_step(&last).await.unwrap();
}

fn bench_target(c: &mut Criterion, runtime: &Runtime, target: &Target) {
    let store = &target.store;
    let (session_id, run_id) = runtime.block_on(start(store));
    let seqs = Seqs(AtomicU64::new(0));
    let iteration = AtomicU64::new(0);

    let mut group = c.benchmark_group(format!("store/{}", target.name));
    group.sample_size(30);
    group.measurement_time(Duration::from_secs(8));

    group.throughput(Throughput::Elements(1));
    group.bench_function("save_step (2 messages, 1 record, 4 events)", |b| {
        b.iter_batched(
            || {
                // A loop's iterations stay in the tens (from 2: the input is saved once, with
                // the first), so the head (which lists the calls seen so far) keeps the size of
                // such a step however many steps the bench saves.
                let n = iteration.fetch_add(1, Ordering::Relaxed) % 20 + 2;
                loop_step(session_id, run_id, u32::try_from(n).unwrap(), &seqs)
            },
            |step| runtime.block_on(store.save_step(&step)).unwrap(),
            BatchSize::SmallInput,
        );
    });

    group.throughput(Throughput::Elements(1));
    group.bench_function("persisted run (session + run + 3 steps + end)", |b| {
        b.iter(|| runtime.block_on(persist_run(store)));
    });
    group.finish();
}

fn store_throughput(c: &mut Criterion) {
    let runtime = Runtime::new().unwrap();
    let sqlite = runtime.block_on(sqlite());
    bench_target(c, &runtime, &sqlite);
    runtime.block_on(sqlite.finish());
    if let Some(postgres) = runtime.block_on(postgres()) {
        bench_target(c, &runtime, &postgres);
        runtime.block_on(postgres.finish());
    }
}

criterion_group!(benches, store_throughput);
criterion_main!(benches);
