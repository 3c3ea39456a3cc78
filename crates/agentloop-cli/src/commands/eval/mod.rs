//! `agentloop eval CASES.toml`: runs a set of cases against the configured agent (a real
//! model, a cassette or the scripted one) and scores what each run did (see `cases.rs` for the
//! format); `--compare A.json B.json` shows what changed between two runs of a set;
//! `--from-session ID` prints a stored session as a case.
//!
//! The runs use a store of their own in memory: a case set never fills the configured
//! database with its sessions.

mod cases;
mod expect;
mod from_session;
mod judge;
mod observe;
mod report;

use std::io::{IsTerminal, Write};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agentloop::Runtime;
use anyhow::Context;
use futures::StreamExt;

use crate::cli::{EvalArgs, GlobalArgs};
use crate::commands::load_config;
use report::{Attempt, CaseResult};

pub async fn execute(global: GlobalArgs, args: EvalArgs) -> anyhow::Result<ExitCode> {
    if let [before, after] = args.compare.as_slice() {
        outln!(
            "{}",
            report::compare(&read_json(before)?, &read_json(after)?)
        )?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(session) = args.from_session {
        return print_session_case(&global, session).await;
    }
    let Some(path) = &args.cases else {
        anyhow::bail!(
            "name a case file (agentloop eval CASES.toml), or --compare A.json B.json, or \
             --from-session ID"
        );
    };
    let cases = cases::load(path)?;
    let (mut config, _origin) = load_config(&global)?;
    config.store.url = "sqlite::memory:".into();
    let runtime = Runtime::start(&config).await?;
    for warning in runtime.warnings() {
        eprintln!("warning: {warning}");
    }
    let agent = runtime.agent().clone();
    // The judge's model: the configured client (a case's judge may name another model).
    let judging = cases.iter().any(|case| case.expect.judge.is_some());
    let judge_llm = match judging {
        true => Some(agentloop::llm::client_for(&config.llm)?),
        false => None,
    };
    let pricing = config.pricing()?;
    let repeat = args.repeat.max(1) as usize;
    let total = cases.len() * repeat;
    let done = Arc::new(AtomicUsize::new(0));
    let failed = Arc::new(AtomicUsize::new(0));
    let live = std::io::stderr().is_terminal();
    // Every repetition of every case, `--jobs` at a time; results back in the file's order.
    let attempts = cases
        .iter()
        .enumerate()
        .flat_map(|(index, case)| std::iter::repeat_n((index, case), repeat));
    let mut finished: Vec<(usize, Attempt)> = futures::stream::iter(attempts)
        .map(|(index, case)| {
            let agent = agent.clone();
            let (done, failed) = (done.clone(), failed.clone());
            let (judge_llm, pricing) = (judge_llm.clone(), pricing.clone());
            async move {
                let mut seen = observe::observe(&agent, case).await;
                if let (Some(judge), Some(llm)) = (&case.expect.judge, &judge_llm) {
                    let question = case.questions().join("\n");
                    seen.judge =
                        Some(judge::verdict(llm, &pricing, judge, &question, &seen.answer).await);
                }
                let failures = expect::check(&case.expect, &seen);
                let count = done.fetch_add(1, Ordering::Relaxed) + 1;
                if !failures.is_empty() {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
                let line = format!(
                    "[{count}/{total}] {} {}, {} failed so far",
                    case.name,
                    if failures.is_empty() {
                        "passed"
                    } else {
                        "FAILED"
                    },
                    failed.load(Ordering::Relaxed)
                );
                progress(live, &line);
                (index, Attempt { seen, failures })
            }
        })
        .buffer_unordered(args.jobs.max(1))
        .collect()
        .await;
    if live {
        eprintln!();
    }
    finished.sort_by_key(|(index, _)| *index);
    let mut results: Vec<CaseResult> = cases
        .iter()
        .map(|case| CaseResult {
            name: case.name.clone(),
            attempts: Vec::new(),
        })
        .collect();
    for (index, attempt) in finished {
        if let Some(result) = results.get_mut(index) {
            result.attempts.push(attempt);
        }
    }
    runtime.shutdown().await;
    if let Some(file) = &args.junit {
        std::fs::write(file, report::junit(&results)?)
            .with_context(|| format!("cannot write {}", file.display()))?;
    }
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&results)?)?;
    } else {
        outln!("{}", report::table(&results).trim_end())?;
    }
    Ok(if results.iter().all(CaseResult::passed) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Prints the case a stored session makes (`--from-session`).
async fn print_session_case(global: &GlobalArgs, session: uuid::Uuid) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(global)?;
    let missing = || anyhow::anyhow!("no session {session} in the store at {}", config.store.url);
    let store = agentloop::SqlStore::open_existing(&config.store.url)
        .await?
        .ok_or_else(missing)?;
    let messages = agentloop::core::Store::messages(&store, session).await?;
    let name = format!("session {session}");
    let case = from_session::case_toml(&name, &messages)?.ok_or_else(missing)?;
    outln!("{}", case.trim_end())?;
    Ok(ExitCode::SUCCESS)
}

/// The progress line: rewritten in place on a terminal, one line each otherwise.
fn progress(live: bool, line: &str) {
    let mut stderr = std::io::stderr().lock();
    let _ = if live {
        write!(stderr, "\r\x1b[2K{line}")
    } else {
        writeln!(stderr, "{line}")
    };
}

fn read_json(path: &Path) -> anyhow::Result<Vec<CaseResult>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    serde_json::from_str(&text).with_context(|| {
        format!(
            "{} is not the output of `agentloop eval --json`",
            path.display()
        )
    })
}
