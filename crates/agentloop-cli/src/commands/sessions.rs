//! `agentloop sessions list|show`: what the store remembers.

use std::process::ExitCode;

use agentloop::{
    MessageKind, Role, RunInfo, SessionInfo, SessionMessage, SqlStore, Store, ToolExecutionRecord,
    ToolStatus,
};
use anyhow::Context;
use chrono::{DateTime, Utc};
use serde_json::json;

use crate::{
    cli::{GlobalArgs, SessionsCommand, SessionsListArgs, SessionsShowArgs},
    commands::load_config,
    render::count,
};

/// Reads only: a SQLite file that is not there is not created (a listing in the wrong
/// directory would otherwise leave an empty database behind and report it empty).
pub async fn execute(global: GlobalArgs, command: SessionsCommand) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let Some(store) = SqlStore::open_existing(&config.store.url).await? else {
        let database = SqlStore::describe_url(&config.store.url)?;
        return match command {
            SessionsCommand::List(args) => {
                if args.json {
                    outln!("[]")?;
                }
                eprintln!("{}", no_database(&database, "nothing to list"));
                Ok(ExitCode::SUCCESS)
            }
            SessionsCommand::Show(args) => Err(anyhow::anyhow!(
                "{}",
                no_database(&database, &format!("no session {}", args.id))
            )),
        };
    };
    let code = match command {
        SessionsCommand::List(args) => list(&store, args).await?,
        SessionsCommand::Show(args) => show(&store, args).await?,
    };
    store.close().await;
    Ok(code)
}

/// What a reading command says when the store's SQLite file does not exist: where it looked,
/// and which settings choose the store, since keys and sessions live in one store only.
pub fn no_database(database: &str, consequence: &str) -> String {
    format!(
        "no database at {database} yet: {consequence} (a run, `agentloop serve` or `agentloop \
         keys create` creates it; if you expected one, check --config and DATABASE_URL, which \
         choose the store)"
    )
}

async fn list(store: &SqlStore, args: SessionsListArgs) -> anyhow::Result<ExitCode> {
    // One more than shown, to tell whether the listing goes on.
    let mut sessions = store
        .list_sessions(args.user.as_deref(), args.limit.saturating_add(1))
        .await?;
    let shown = usize::try_from(args.limit).unwrap_or(usize::MAX);
    let more = sessions.len() > shown;
    sessions.truncate(shown);
    if args.json {
        outln!("{}", serde_json::to_string_pretty(&sessions)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let database = store.location();
    if sessions.is_empty() {
        eprintln!("No sessions in {database} yet. Start one with: agentloop run \"your question\"");
        return Ok(ExitCode::SUCCESS);
    }
    eprintln!("sessions in {database}");
    let user_width = sessions
        .iter()
        .map(|s| s.user_id.chars().count())
        .max()
        .unwrap_or(4)
        .max(4);
    outln!(
        "{:36}  {:user_width$}  {:16}  {:>5}  TITLE",
        "ID",
        "USER",
        "UPDATED (UTC)",
        "MSGS"
    )?;
    for session in sessions {
        outln!(
            "{:36}  {:user_width$}  {:16}  {:>5}  {}",
            session.id,
            session.user_id,
            minute(session.updated_at),
            session.message_count,
            session.title
        )?;
    }
    if more {
        eprintln!(
            "There are more sessions than the {shown} shown: show more with --limit N (the most \
             recent first)."
        );
    }
    Ok(ExitCode::SUCCESS)
}

async fn show(store: &SqlStore, args: SessionsShowArgs) -> anyhow::Result<ExitCode> {
    let session = store
        .session(args.id)
        .await?
        .with_context(|| format!("no session {} (see `agentloop sessions list`)", args.id))?;
    let messages = store.messages(args.id).await?;
    let runs = store.session_runs(args.id).await?;
    let mut traces = Vec::with_capacity(runs.len());
    for run in &runs {
        traces.push(store.tool_executions(run.id).await?);
    }
    if args.json {
        let runs: Vec<_> = runs
            .iter()
            .zip(&traces)
            .map(|(run, trace)| json!({"run": run, "execution_trace": trace}))
            .collect();
        let value = json!({"session": session, "messages": messages, "runs": runs});
        outln!("{}", serde_json::to_string_pretty(&value)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    print_session(&session, &messages, &runs, &traces)?;
    Ok(ExitCode::SUCCESS)
}

fn print_session(
    session: &SessionInfo,
    messages: &[SessionMessage],
    runs: &[RunInfo],
    traces: &[Vec<ToolExecutionRecord>],
) -> std::io::Result<()> {
    outln!(
        "Session {} \"{}\"\nuser {}, created {} UTC, {}, {}",
        session.id,
        session.title,
        session.user_id,
        second(session.created_at),
        count(session.message_count, "message"),
        count(runs.len() as u64, "run")
    )?;
    for (run, trace) in runs.iter().zip(traces) {
        outln!()?;
        outln!("── run {} · {}", run.id, run_summary(run))?;
        let of_run = messages.iter().filter(|m| m.run_id == Some(run.id));
        let (questions, rest): (Vec<_>, Vec<_>) =
            of_run.partition(|m| m.kind == MessageKind::Dialogue && m.message.role == Role::User);
        for message in &questions {
            print_line(message.created_at, "user", message.message.text_content())?;
        }
        if questions.is_empty() {
            print_line(run.started_at, "user", &run.query)?;
        }
        for record in trace {
            print_line(record.started_at, "tool", &record_line(record))?;
        }
        for message in rest {
            match (message.kind, message.message.role) {
                (MessageKind::Dialogue, _) => print_line(
                    message.created_at,
                    "assistant",
                    message.message.text_content(),
                )?,
                (MessageKind::Note, _) => {
                    print_line(message.created_at, "note", message.message.text_content())?
                }
                // Refused by a guardrail: shown to the operator, marked.
                (MessageKind::Blocked, _) => print_line(
                    message.created_at,
                    "blocked",
                    message.message.text_content(),
                )?,
                _ => {}
            }
        }
        if let Some(error) = &run.error_message {
            print_line(run.finished_at.unwrap_or(run.started_at), "error", error)?;
        }
    }
    Ok(())
}

fn run_summary(run: &RunInfo) -> String {
    let mut parts = vec![
        run.status.as_str().to_string(),
        count(u64::from(run.iterations), "step"),
        count(u64::from(run.tools_used), "tool call"),
        count(run.usage.total(), "token"),
        crate::render::cost_text(&run.usage, run.model.as_deref()),
    ];
    if let Some(finished) = run.finished_at {
        let ms = (finished - run.started_at).num_milliseconds().max(0);
        parts.push(format!("{:.1} s", ms as f64 / 1000.0));
    }
    if let Some(reason) = run.finalize_reason {
        parts.push(format!("summary forced: {}", reason.as_str()));
    }
    if !run.save_chat {
        parts.push("not saved in the chat".to_string());
    }
    parts.join(" · ")
}

fn record_line(record: &ToolExecutionRecord) -> String {
    let mark = match record.status {
        ToolStatus::Success => "✓",
        ToolStatus::Error => "✗",
        ToolStatus::Blocked => "⊘",
        ToolStatus::Skipped => "↺",
    };
    let detail = match record.status {
        ToolStatus::Success => record.result.as_deref().unwrap_or_default(),
        _ => record.error.as_deref().unwrap_or_default(),
    };
    let one_line = agentloop::core::machine::one_line;
    format!(
        "{mark} {} {} ({}, {} ms): {}",
        record.tool,
        one_line(&record.arguments.to_string(), 100),
        record.status.as_str(),
        record.duration_ms,
        one_line(detail, 120)
    )
}

fn print_line(at: DateTime<Utc>, who: &str, text: &str) -> std::io::Result<()> {
    let mut lines = text.lines();
    outln!(
        "{}  {who:9}  {}",
        at.format("%H:%M:%S"),
        lines.next().unwrap_or_default()
    )?;
    for line in lines {
        outln!("{:8}  {:9}  {line}", "", "")?;
    }
    Ok(())
}

fn minute(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M").to_string()
}

fn second(at: DateTime<Utc>) -> String {
    at.format("%Y-%m-%d %H:%M:%S").to_string()
}
