//! The bench's command line: which waves, on which store, with what work per run.

use std::{fmt, time::Duration};

use super::{chaos, memory, soak};

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum StoreKind {
    Sqlite,
    /// `sqlite::memory:`: the store's work without its file.
    Memory,
    Postgres,
}

impl fmt::Display for StoreKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            StoreKind::Sqlite => "SQLite file (WAL)",
            StoreKind::Memory => "SQLite in memory (sqlite::memory:)",
            StoreKind::Postgres => "PostgreSQL",
        })
    }
}

pub(crate) struct Options {
    pub(crate) waves: Vec<usize>,
    pub(crate) latency: Duration,
    pub(crate) store: StoreKind,
    /// Open the wave's connections in the same burst as its runs, instead of beforehand.
    pub(crate) cold_connections: bool,
    /// Measure memory under large answers instead of latency under waves.
    pub(crate) memory: Option<memory::Settings>,
    /// Keep one server under steady load for a while instead.
    pub(crate) soak: Option<soak::Settings>,
    /// Kill and restart servers under runs instead.
    pub(crate) chaos: Option<chaos::Settings>,
    /// What each run does.
    pub(crate) work: Work,
    /// The wave's runs one after another instead of all at once: CPU and latency per run
    /// without contention.
    pub(crate) sequential: bool,
    /// The model named in the config (`--model`): the scripted LLM answers whatever the name,
    /// but the server counts tokens with that model's tokenizer (tiktoken for OpenAI's).
    pub(crate) model: String,
    /// `server.threads` (`--threads N`): 0 serves on the runtime's shared threads, N on N
    /// threads of their own.
    pub(crate) threads: usize,
    /// PostgreSQL settings for the server's connections (`--pg-setting NAME=VALUE`, repeated),
    /// given in the store URL's `options`: `synchronous_commit=off`, say.
    pub(crate) pg_settings: Vec<String>,
    /// Parameters of the SQLite file's URL (`--sqlite-params QUERY`): `vfs=unix` opens it with
    /// SQLite's own VFS instead of the store's, whose WAL writes are one per commit.
    pub(crate) sqlite_params: Option<String>,
    /// Each wave also on the Python floor (`--floor`, `load/floor.py`), right after
    /// agentloop's, with the ratios of the two.
    pub(crate) floor: bool,
}

/// What one run of the bench does: `tool_calls` LLM calls that each ask for one tool call, then
/// one that answers; streamed over SSE (`stream: true`, the LLM streaming too) or answered as
/// JSON (`stream: false` on both sides).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Work {
    pub(crate) tool_calls: usize,
    pub(crate) stream: bool,
}

impl Default for Work {
    fn default() -> Work {
        Work {
            tool_calls: 1,
            stream: true,
        }
    }
}

pub(crate) fn options() -> Options {
    let args: Vec<String> = std::env::args().skip(1).collect();
    // cargo passes `--bench` to a bench it runs as one; `cargo test --benches` does not.
    let benchmarking = args.iter().any(|arg| arg == "--bench");
    let mut options = if benchmarking {
        Options {
            waves: vec![100, 1000, 3000],
            latency: Duration::from_millis(500),
            store: StoreKind::Sqlite,
            cold_connections: false,
            memory: None,
            soak: None,
            chaos: None,
            work: Work::default(),
            sequential: false,
            model: "scripted".into(),
            threads: 0,
            pg_settings: Vec::new(),
            sqlite_params: None,
            floor: false,
        }
    } else {
        // Under `cargo test`: the performance issue's work (2 tool calls, JSON answers, the
        // LLM not streaming), one small wave, to prove the bench runs; figures printed only.
        Options {
            waves: vec![20],
            latency: Duration::from_millis(50),
            store: StoreKind::Sqlite,
            cold_connections: false,
            memory: None,
            soak: None,
            chaos: None,
            work: Work {
                tool_calls: 2,
                stream: false,
            },
            sequential: false,
            model: "scripted".into(),
            threads: 0,
            pg_settings: Vec::new(),
            sqlite_params: None,
            // The floor's script is proved to work too.
            floor: true,
        }
    };
    let mut memory = memory::Settings::new(benchmarking);
    let mut measure_memory = false;
    let mut runs_given = false;
    let mut soak_concurrency = None;
    let mut chaos = chaos::Settings::bench(benchmarking);
    let mut run_chaos = false;
    let mut latency_given = false;
    let mut args = args.into_iter();
    while let Some(flag) = args.next() {
        let mut value = || {
            args.next()
                .unwrap_or_else(|| panic!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--runs" => {
                runs_given = true;
                options.waves = value()
                    .split(',')
                    .map(|n| n.trim().parse().expect("--runs takes counts: 100,1000"))
                    .collect();
            }
            "--latency-ms" => {
                let ms = value().parse().expect("--latency-ms takes milliseconds");
                options.latency = Duration::from_millis(ms);
                latency_given = true;
            }
            "--store" => {
                options.store = match value().as_str() {
                    "sqlite" => StoreKind::Sqlite,
                    "memory" => StoreKind::Memory,
                    "postgres" => StoreKind::Postgres,
                    other => panic!("--store is sqlite, memory or postgres, not {other:?}"),
                }
            }
            "--cold-connections" => options.cold_connections = true,
            "--tool-calls" => {
                options.work.tool_calls = value().parse().expect("--tool-calls takes a count");
            }
            "--no-stream" => options.work.stream = false,
            "--sequential" => options.sequential = true,
            "--model" => options.model = value(),
            "--threads" => options.threads = value().parse().expect("--threads takes a count"),
            "--pg-setting" => options.pg_settings.push(value()),
            "--sqlite-params" => options.sqlite_params = Some(value()),
            "--floor" => options.floor = true,
            "--memory" => measure_memory = true,
            "--answer-bytes" => {
                memory.answer_bytes = value().parse().expect("--answer-bytes takes bytes");
            }
            "--slow-readers" => {
                memory.slow_readers = value().parse().expect("--slow-readers takes a count");
            }
            "--soak" => {
                let seconds: u64 = value().parse().expect("--soak takes seconds");
                options.soak = Some(soak::Settings {
                    duration: Duration::from_secs(seconds),
                    concurrency: 20,
                });
            }
            "--concurrency" => {
                soak_concurrency = Some(value().parse().expect("--concurrency takes a count"));
            }
            "--chaos" => run_chaos = true,
            "--kill-every-s" => {
                let seconds: f64 = value().parse().expect("--kill-every-s takes seconds");
                chaos.kill_every = Duration::from_secs_f64(seconds);
            }
            "--bench" => {}
            // Under `cargo test`, what is meant for the test harness (a filter, --nocapture).
            other if !benchmarking => eprintln!("load bench: ignoring {other:?}"),
            other => panic!(
                "unknown argument {other:?}; use --runs N,N --latency-ms L --store \
                 sqlite|postgres --cold-connections --tool-calls N --no-stream --sequential \
                 --threads N --pg-setting NAME=VALUE --sqlite-params QUERY --floor, \
                 or --memory [--runs N] [--answer-bytes B] [--slow-readers S], or --soak \
                 SECONDS [--concurrency C], or --chaos [--runs M] [--kill-every-s S] \
                 [--latency-ms L] [--concurrency C]"
            ),
        }
    }
    assert!(
        !options.floor || !options.work.stream,
        "--floor measures the performance issue's work, answered as JSON: add --no-stream"
    );
    if let (Some(soak), Some(concurrency)) = (options.soak.as_mut(), soak_concurrency) {
        soak.concurrency = concurrency;
    }
    if run_chaos {
        if let Some(&runs) = options.waves.iter().max().filter(|_| runs_given) {
            chaos.runs = runs;
        }
        if latency_given {
            chaos.latency = options.latency;
        }
        if let Some(concurrency) = soak_concurrency {
            chaos.concurrency = concurrency;
        }
        options.chaos = Some(chaos);
    }
    if measure_memory {
        if let Some(&runs) = options.waves.iter().max().filter(|_| runs_given) {
            memory.runs = runs;
        }
        options.memory = Some(memory);
    }
    options
}
