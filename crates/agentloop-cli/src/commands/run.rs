//! `agentloop run`: one run in the terminal. When the run pauses for approval, the calls are
//! shown and each one is approved or denied at the prompt; when it asks a clarification
//! question, the answer is read at the prompt. The run then goes on.

use std::{io::Write, process::ExitCode, sync::Arc};

use agentloop::{
    Agent, Event, EventKind, RunContext, RunRequest, RunStatus, Runtime,
    core::{
        InputAnswer, InstanceKind,
        durability::{OwnedAgent, own},
        protocol::{InputKind, InputRequest, PendingCall, ResumeReason},
    },
};
use anyhow::Context;
use futures::StreamExt;
use tokio::sync::mpsc;
use tokio_stream::wrappers::UnboundedReceiverStream;
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use crate::{
    cli::{GlobalArgs, ResumeArgs, RunArgs},
    commands::load_config,
    keyboard::Keyboard,
    output::{READER_GONE_STATUS, ReaderGone},
    render::StepView,
};

pub async fn execute(global: GlobalArgs, args: RunArgs) -> anyhow::Result<ExitCode> {
    let (mut config, origin) = load_config(&global)?;
    if args.record.is_some() {
        config.llm.record = args.record.clone();
    }
    if args.replay.is_some() {
        config.llm.replay = args.replay.clone();
    }
    config
        .validate()
        .with_context(|| format!("the configuration is not usable ({origin})"))?;
    // The hint at the end: the same configuration, the same user, the session.
    let config_arg = global
        .config
        .as_ref()
        .map(|path| format!(" --config {}", shell_word(&path.to_string_lossy())))
        .unwrap_or_default();
    let user_arg = match args.user.as_str() {
        "local" => String::new(),
        user => format!(" --user {}", shell_word(user)),
    };
    run_config(&config, args, move |session| {
        format!("agentloop{config_arg} run --session {session}{user_arg} \"...\"")
    })
    .await
}

/// `text` as one word of a shell command line: quoted when it needs to be.
pub(crate) fn shell_word(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./:=@%+,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// The files of `--attach`, read and admitted under `[agent.attachments]` before anything
/// starts: a file too large, of a type no model reads, or one too many, stops the command.
async fn read_attachments(
    paths: &[std::path::PathBuf],
    settings: &agentloop::core::attachments::AttachmentSettings,
) -> anyhow::Result<Vec<agentloop::Attachment>> {
    use agentloop::core::attachments::{AttachmentError, admit_bytes, check_message};
    if paths.len() > settings.max_count {
        anyhow::bail!(AttachmentError::TooMany {
            count: paths.len(),
            limit: settings.max_count,
        });
    }
    let mut attachments = Vec::with_capacity(paths.len());
    for path in paths {
        let data = tokio::fs::read(path)
            .await
            .map_err(|error| anyhow::anyhow!("cannot read {}: {error}", path.display()))?;
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned());
        attachments.push(admit_bytes(data, None, name, settings)?);
    }
    check_message(&attachments, settings)?;
    Ok(attachments)
}

/// One run of `args.query` with `config`, shown in the terminal (`run`, `demo`);
/// `continue_with` is the command that continues a session, for the line that ends the run.
pub async fn run_config(
    config: &agentloop::Config,
    args: RunArgs,
    continue_with: impl Fn(Uuid) -> String,
) -> anyhow::Result<ExitCode> {
    let attachments = read_attachments(&args.attach, &config.agent.attachments).await?;
    let gone = ReaderGone::watch();
    let view = StepView::new(!args.json);
    view.status("starting MCP servers");
    let runtime = Runtime::start(config).await?;
    view.note(&format!("model: {}", config.llm.describe()));
    if let Some(cassette) = &config.llm.record {
        view.note(&format!(
            "recording the LLM exchanges to {}",
            cassette.display()
        ));
    }
    for warning in runtime.warnings() {
        view.warn(warning);
    }
    let run_id = Uuid::now_v7();
    let mut request = RunRequest {
        query: args.query.join(" "),
        attachments,
        run_id: Some(run_id),
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
    let session_id = request.new_session_id();

    let cancel = CancellationToken::new();
    let ctrl_c = tokio::spawn(cancel_on_ctrl_c(cancel.clone()));
    let reader_left = tokio::spawn(cancel_when_gone(gone.clone(), cancel.clone()));
    let (agent, _alive) = as_instance(&runtime, config, cancel.clone()).await;
    let mut printer = Printer {
        json: args.json,
        typed: config.agent.output_schema.is_some(),
        view,
        answer_open: false,
        keyboard: Keyboard::new(),
        gone: gone.clone(),
    };
    let (sink, events) = mpsc::unbounded_channel();
    let token = cancel.clone();
    let started = agent.clone();
    let driving =
        tokio::spawn(async move { started.run_with_sink(request, Arc::new(sink), token).await });
    let pass = printer.follow(events, (&agent, run_id)).await?;
    let pass = until_done(&agent, &mut printer, pass, run_id, &cancel).await?;
    // The run's span ends when its task does: after it, the last spans are flushed.
    let _ = driving.await;
    let code = finish(&gone, pass.status, run_id, session_id);
    if !args.json && !gone.is_gone() {
        eprintln!(
            "session {session_id} (continue it with: {})",
            continue_with(session_id)
        );
    }
    ctrl_c.abort();
    reader_left.abort();
    runtime.shutdown().await;
    Ok(code)
}

/// `agentloop resume RUN_ID`: adopts a run a killed `agentloop run` left behind and drives it
/// on, in the terminal, from its last saved step.
pub async fn resume_command(global: GlobalArgs, args: ResumeArgs) -> anyhow::Result<ExitCode> {
    let (config, _origin) = load_config(&global)?;
    let gone = ReaderGone::watch();
    let view = StepView::new(!args.json);
    view.status("starting MCP servers");
    let runtime = Runtime::start(&config).await?;
    for warning in runtime.warnings() {
        view.warn(warning);
    }
    let cancel = CancellationToken::new();
    let ctrl_c = tokio::spawn(cancel_on_ctrl_c(cancel.clone()));
    let reader_left = tokio::spawn(cancel_when_gone(gone.clone(), cancel.clone()));
    let (agent, _alive) = as_instance(&runtime, &config, cancel.clone()).await;
    let lease = config.server.run_lease();
    let resumed = agent
        .adopt(args.run, ResumeReason::Restarted, lease)
        .await
        .with_context(|| format!("run {} cannot be resumed here", args.run))?;
    let session_id = resumed.session_id();
    let mut printer = Printer {
        json: args.json,
        typed: config.agent.output_schema.is_some(),
        view,
        answer_open: false,
        keyboard: Keyboard::new(),
        gone: gone.clone(),
    };
    let pass = printer
        .follow(resume(&agent, resumed, cancel.clone()), (&agent, args.run))
        .await?;
    let pass = until_done(&agent, &mut printer, pass, args.run, &cancel).await?;
    let code = finish(&gone, pass.status, args.run, session_id);
    ctrl_c.abort();
    reader_left.abort();
    runtime.shutdown().await;
    Ok(code)
}

/// The runtime's agent as a CLI instance that shows signs of life (so that `agentloop resume`
/// can tell a run left behind from one still at work), and what keeps it alive. Without a
/// store, or when it cannot register, the agent as it is.
pub(crate) async fn as_instance(
    runtime: &Runtime,
    config: &agentloop::Config,
    cancel: CancellationToken,
) -> (Agent, Option<OwnedAgent>) {
    let agent = runtime.agent().clone();
    // A cancel asked through a server or `agentloop cancel` stops the run, as Ctrl-C does.
    let on_cancel = Arc::new(move |_| cancel.cancel());
    match own(
        &agent,
        InstanceKind::Cli,
        config.server.run_lease(),
        on_cancel,
    )
    .await
    {
        Ok(Some(owned)) => (owned.agent.clone(), Some(owned)),
        Ok(None) => (agent, None),
        Err(error) => {
            tracing::warn!(%error, "cannot register this run's process; `agentloop resume` will not find it");
            (agent, None)
        }
    }
}

fn exit_code(status: RunStatus) -> ExitCode {
    match status {
        RunStatus::Completed => ExitCode::SUCCESS,
        RunStatus::Cancelled => ExitCode::from(130),
        _ => ExitCode::FAILURE,
    }
}

/// The exit status of a run that ended `status`; when stdout's reader went away before the
/// end, what happened to the run is said on stderr, and only a completed run exits 0.
fn finish(gone: &ReaderGone, status: RunStatus, run_id: Uuid, session_id: Uuid) -> ExitCode {
    if !gone.is_gone() {
        return exit_code(status);
    }
    let closed = "agentloop: stdout was closed (its reader went away, as with `| head`)";
    match status {
        RunStatus::Completed => {
            eprintln!(
                "{closed} before the end of the output; run {run_id} completed all the same and \
                 is saved in session {session_id} (agentloop sessions show {session_id})"
            );
            ExitCode::SUCCESS
        }
        RunStatus::Cancelled => {
            eprintln!(
                "{closed} while run {run_id} was working: the run was cancelled at its next \
                 safe point and saved as cancelled, and session {session_id} is free. To let a \
                 run finish, read its output to the end (`| sed -n 1p` rather than `| head \
                 -1`, or `> FILE`)."
            );
            ExitCode::from(READER_GONE_STATUS)
        }
        other => {
            eprintln!(
                "{closed} while run {run_id} was working; the run ended {} (agentloop sessions \
                 show {session_id})",
                other.as_str()
            );
            ExitCode::from(READER_GONE_STATUS)
        }
    }
}

/// A run whose output nobody reads any more is cancelled at its next safe point: it would
/// otherwise go on spending (the model, the tools' side effects) for no one, or be left
/// `running` with its session locked when the process ends.
async fn cancel_when_gone(gone: ReaderGone, cancel: CancellationToken) {
    gone.gone().await;
    cancel.cancel();
}

/// Answers the run's pauses at the prompt until it ends (or a question gets no answer). A run
/// that pauses after stdout's reader went away is cancelled instead.
async fn until_done(
    agent: &Agent,
    printer: &mut Printer,
    mut pass: Pass,
    run_id: Uuid,
    cancel: &CancellationToken,
) -> anyhow::Result<Pass> {
    while let Some(input) = pass.input.take() {
        let gone = printer.gone.clone();
        let answer = tokio::select! {
            answer = prompt(&input, &mut printer.keyboard) => answer?,
            () = gone.gone() => None,
        };
        let answer = match answer {
            Some(answer) => answer,
            None if gone.is_gone() => {
                let resumed = agent
                    .cancel_paused(run_id)
                    .await
                    .context("the paused run cannot be cancelled")?;
                pass = printer
                    .follow(resume(agent, resumed, cancel.clone()), (agent, run_id))
                    .await?;
                break;
            }
            None => {
                eprintln!(
                    "(no answer: run {run_id} stays paused; answer it with POST \
                     /v1/runs/{run_id}/input {{\"answer\": \"...\"}} on agentloop serve, or \
                     cancel it with agentloop cancel {run_id})"
                );
                break;
            }
        };
        let resumed = agent
            .resume(run_id, &answer)
            .await
            .context("the run cannot resume")?;
        pass = printer
            .follow(resume(agent, resumed, cancel.clone()), (agent, run_id))
            .await?;
    }
    printer.end()?;
    Ok(pass)
}

/// The answer to what the run waits for, read at the prompt; `None` when a question got none.
async fn prompt(
    input: &InputRequest,
    keyboard: &mut Keyboard,
) -> anyhow::Result<Option<InputAnswer>> {
    match input.kind {
        InputKind::Approval => ask(&input.calls, keyboard).await.map(Some),
        InputKind::Clarification => answer_question(keyboard).await,
        // Asked and answered while the run works (`Printer::follow`); never a pause.
        InputKind::Elicitation => Ok(None),
    }
}

/// Drives a resumed run in a task of its own; its events arrive on the returned channel.
fn resume(
    agent: &Agent,
    resumed: agentloop::core::Resumed,
    cancel: CancellationToken,
) -> mpsc::UnboundedReceiver<Event> {
    let (sink, events) = mpsc::unbounded_channel();
    let agent = agent.clone();
    tokio::spawn(async move { agent.run_resumed(resumed, Arc::new(sink), cancel).await });
    events
}

async fn cancel_on_ctrl_c(cancel: CancellationToken) {
    if tokio::signal::ctrl_c().await.is_ok() {
        cancel.cancel();
        // A second Ctrl-C does not wait for the safe point.
        if tokio::signal::ctrl_c().await.is_ok() {
            std::process::exit(130);
        }
    }
}

/// How one stretch of a run ended: its status, and what it waits for when it paused.
struct Pass {
    status: RunStatus,
    input: Option<InputRequest>,
}

/// Shows a run's events: steps on stderr and the answer on stdout, or JSON lines.
struct Printer {
    json: bool,
    /// The answer is a typed value (`[agent] output_schema`): printed as indented JSON.
    typed: bool,
    view: StepView,
    answer_open: bool,
    /// What the user types: answers at prompts, steering while the run works.
    keyboard: Keyboard,
    /// Set when stdout's reader went away: nothing more is written to stdout.
    gone: ReaderGone,
}

impl Printer {
    /// Shows the run's events until it ends or pauses; a line typed meanwhile steers `run`.
    async fn follow(
        &mut self,
        events: mpsc::UnboundedReceiver<Event>,
        run: (&Agent, Uuid),
    ) -> anyhow::Result<Pass> {
        let mut events = UnboundedReceiverStream::new(events);
        let mut pass = Pass {
            status: RunStatus::Failed,
            input: None,
        };
        let mut waiting = None;
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                Some(line) = self.keyboard.typed() => {
                    let (agent, run_id) = run;
                    if !line.trim().is_empty() {
                        match agent.steer(run_id, &line).await {
                            Ok(()) => self.view.status("sent to the run: added before its next step"),
                            Err(error) => self.view.warn(&format!("not sent: {error}")),
                        }
                    }
                    continue;
                }
            };
            let Some(event) = event else { break };
            self.print(&event)?;
            if event.parent_run_id.is_some() {
                // A sub-agent's events are shown; only the run's own decide how it ended.
                continue;
            }
            match event.kind {
                // A running call's question: answered here; the run goes on meanwhile.
                EventKind::InputRequired {
                    elicitation: Some(elicitation),
                    ..
                } => {
                    let (agent, run_id) = run;
                    let answer = super::elicit::answer(&elicitation, &mut self.keyboard).await?;
                    if let Err(error) = agent.answer_question(run_id, answer) {
                        self.view.warn(&format!("answer not taken: {error}"));
                    }
                }
                EventKind::InputRequired {
                    kind,
                    question,
                    calls,
                    elicitation: None,
                } => {
                    waiting = Some(InputRequest {
                        kind,
                        question,
                        calls,
                        elicitation: None,
                    })
                }
                EventKind::Done { status, .. } => pass.status = status,
                _ => {}
            }
        }
        if pass.status == RunStatus::AwaitingInput {
            pass.input = waiting;
        }
        Ok(pass)
    }

    fn print(&mut self, event: &Event) -> anyhow::Result<()> {
        if self.json {
            let line = serde_json::to_string(event)?;
            return self.out(|stdout| {
                writeln!(stdout, "{line}")?;
                stdout.flush()
            });
        }
        if event.parent_run_id.is_some() {
            self.view.show_nested(&event.kind);
            return Ok(());
        }
        if let EventKind::FinalResponse { delta } = &event.kind {
            self.view.clear();
            // A typed answer comes whole, as one chunk of JSON.
            let pretty = self
                .typed
                .then(|| serde_json::from_str::<serde_json::Value>(delta).ok())
                .flatten()
                .and_then(|value| serde_json::to_string_pretty(&value).ok());
            let text = pretty.as_deref().unwrap_or(delta);
            self.out(|stdout| {
                write!(stdout, "{text}")?;
                stdout.flush()
            })?;
            self.answer_open = true;
        } else if self.answer_open {
            // The answer is over: end its line before anything goes to stderr, or on a
            // terminal (stdout and stderr on one screen) the summary line would start right
            // after its last word.
            self.out(|stdout| {
                writeln!(stdout)?;
                stdout.flush()
            })?;
            self.answer_open = false;
        }
        self.view.show(&event.kind);
        Ok(())
    }

    /// Ends the answer's line if no later event did.
    fn end(&mut self) -> anyhow::Result<()> {
        if self.answer_open {
            self.out(|stdout| writeln!(stdout))?;
            self.answer_open = false;
        }
        Ok(())
    }

    /// Writes to stdout, unless its reader has gone; a write that finds it gone says so (the
    /// run is then cancelled, see `cancel_when_gone`) instead of failing the command.
    fn out(
        &self,
        write: impl FnOnce(&mut std::io::StdoutLock<'static>) -> std::io::Result<()>,
    ) -> anyhow::Result<()> {
        if self.gone.is_gone() {
            return Ok(());
        }
        match write(&mut std::io::stdout().lock()) {
            Err(error) if error.kind() == std::io::ErrorKind::BrokenPipe => {
                self.gone.mark();
                Ok(())
            }
            written => Ok(written?),
        }
    }
}

/// Reads the answer to the run's question (shown with its `input_required` event); `None` when
/// the input ended without an answer.
async fn answer_question(keyboard: &mut Keyboard) -> anyhow::Result<Option<InputAnswer>> {
    loop {
        eprint!("> ");
        std::io::stderr().flush()?;
        let line = keyboard.read_line().await?;
        if line.is_empty() {
            return Ok(None);
        }
        if !line.trim().is_empty() {
            return Ok(Some(InputAnswer {
                answer: Some(line.trim().to_string()),
                ..InputAnswer::default()
            }));
        }
    }
}

/// Asks on the terminal about each call waiting for approval; no answer (end of input) denies.
async fn ask(calls: &[PendingCall], keyboard: &mut Keyboard) -> anyhow::Result<InputAnswer> {
    let mut answer = InputAnswer::default();
    for call in calls {
        eprint!(
            "approve {} {}? [y/N] ",
            call.tool,
            agentloop::core::machine::one_line(&call.arguments.to_string(), 200)
        );
        std::io::stderr().flush()?;
        let line = keyboard.read_line().await?;
        let approved = matches!(line.trim().to_ascii_lowercase().as_str(), "y" | "yes");
        if line.is_empty() {
            eprintln!("(no answer: denied)");
        }
        if approved {
            answer.approve.push(call.call_id.clone());
        } else {
            answer.deny.push(call.call_id.clone());
        }
    }
    Ok(answer)
}
