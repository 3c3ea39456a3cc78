//! The whole stack's cost per step, with collaborators that answer at once: the real LLM client
//! over loopback HTTP (streaming SSE) against the scripted server, and a real MCP tool call over
//! stdio to the test server. What remains is agentloop's own work plus loopback I/O.
//!
//! `cargo bench -p agentloop --bench stack_overhead`
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // benchmark harness

use agentloop::{Config, ConfigOrigin, RunRequest, Runtime};
use agentloop_test_support::{
    mcp::test_mcp_server_config_toml,
    scripted_llm::{Reply, ScriptedLlm},
};
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};

const STEPS: usize = 10;

/// Calls `test.echo` on each of `STEPS` iterations, then answers.
fn responder(request: &Value) -> Reply {
    let done = request["messages"]
        .as_array()
        .map(|messages| {
            messages
                .iter()
                .filter(|m| m["tool_calls"].is_array())
                .count()
        })
        .unwrap_or(0);
    if done >= STEPS {
        Reply::text("All ten echoes came back.")
    } else {
        Reply::tool_call("test__echo", json!({"text": format!("echo number {done}")}))
    }
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let llm = runtime.block_on(ScriptedLlm::start_with(responder));
    let mut group = c.benchmark_group("stack_overhead");
    group.throughput(Throughput::Elements(STEPS as u64));
    let stores = [
        ("in_memory_store", "sqlite::memory:".to_string()),
        (
            "sqlite_file_store",
            format!("sqlite://{}/bench.db", dir.path().display()),
        ),
    ];
    for (name, store_url) in stores {
        let text = format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"bench\"\n[agent]\nmax_iterations = {}\n\
             [store]\nurl = \"{store_url}\"\n{}",
            llm.base_url(),
            STEPS + 1,
            test_mcp_server_config_toml("test", None)
        );
        let config = Config::parse(&text, ConfigOrigin::Defaults).unwrap();
        let agent = runtime.block_on(Runtime::start(&config)).unwrap();
        group.bench_function(format!("per_iteration_http_llm_mcp_tool_{name}"), |b| {
            b.iter(|| {
                let outcome = runtime.block_on(async {
                    let (_, outcome) = agent
                        .agent()
                        .run(RunRequest::new("Echo ten times"))
                        .collect()
                        .await
                        .unwrap();
                    outcome
                });
                assert_eq!(outcome.tools_used as usize, STEPS);
            })
        });
        runtime.block_on(agent.shutdown());
    }
    group.finish();
    drop(llm);
}

criterion_group!(benches, bench);
criterion_main!(benches);
