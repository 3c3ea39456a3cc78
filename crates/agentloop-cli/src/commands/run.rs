//! `agentloop run`: one run in the terminal.

use std::{io::Write, process::ExitCode};

use agentloop::{EventKind, RunContext, RunRequest, RunStatus, Runtime};
use futures::StreamExt;

use crate::{
    cli::{GlobalArgs, RunArgs},
    commands::load_config,
    render::StepView,
};

pub async fn execute(global: GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let mut view = StepView::new(!args.json);
    view.status("starting MCP servers");
    let runtime = Runtime::start(&config).await?;
    for warning in runtime.warnings() {
        view.warn(warning);
    }

    let request = RunRequest {
        query: args.query.join(" "),
        session_id: args.session,
        include_history: !args.no_history,
        max_iterations: args.max_iterations,
        context: RunContext {
            user_id: Some(args.user.clone()),
            entity_id: args.entity.clone(),
            workflow: args.workflow.clone(),
            read_only: args.read_only,
        },
        ..RunRequest::default()
    };
    let mut run = runtime.agent().run(request);
    let session_id = run.session_id();
    let cancel = run.cancellation_token();
    let ctrl_c = tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            // A second Ctrl-C does not wait for the safe point.
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });

    let mut stdout = std::io::stdout().lock();
    let mut status = RunStatus::Failed;
    let mut answer_open = false;
    while let Some(event) = run.next().await {
        if args.json {
            writeln!(stdout, "{}", serde_json::to_string(&event)?)?;
            stdout.flush()?;
        } else {
            if let EventKind::FinalResponse { delta } = &event.kind {
                view.clear();
                write!(stdout, "{delta}")?;
                stdout.flush()?;
                answer_open = true;
            }
            view.show(&event.kind);
        }
        if let EventKind::Done { status: done, .. } = event.kind {
            status = done;
        }
    }
    if answer_open {
        writeln!(stdout)?;
    }
    if !args.json {
        eprintln!("session {session_id} (continue it with --session {session_id})");
    }
    ctrl_c.abort();
    drop(stdout);
    runtime.shutdown().await;
    Ok(match status {
        RunStatus::Completed => ExitCode::SUCCESS,
        RunStatus::Cancelled => ExitCode::from(130),
        _ => ExitCode::FAILURE,
    })
}
