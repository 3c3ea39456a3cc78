//! The thin async driver: performs the steps the [`RunMachine`] asks for against the `Llm` and
//! the tools, feeds the results back, saves each step, then emits its events.

mod abandon;
mod asks;
mod calls;
mod deadline;
mod guardrails;

use std::{panic::AssertUnwindSafe, sync::Arc, time::Instant};

use agentloop_protocol::{ErrorCode, Event, EventKind, ToolStatus};
use chrono::{DateTime, Utc};
use futures::FutureExt;
use tokio::sync::{RwLock, Semaphore};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

use self::calls::Running;
use crate::partial_json::PartialOutput;
use crate::{
    catalog::ToolCatalog,
    emitter::Emitter,
    hooks::{BeforeCall, CompletedCall, ToolHook},
    lease::{LeaseRenewal, Leased},
    llm::{CallPurpose, Llm},
    machine::{
        CallRefusal, Handled, Input, RunMachine, RunOutcome, RunState, SideEffectNote, Step,
        ToolInvocation, ToolOutcome, ToolResult, recheck,
    },
    policy::RunPolicy,
    registry::ToolRegistry,
    settings::AgentSettings,
    steering::{Inbox, Letter, SteerError, SteeringBoard},
    step_writer::{Persistence, StepWriter},
    store::StoreError,
    telemetry::{LlmCallReport, Telemetry},
    tokens::TokenCounter,
    tool::{ToolContext, ToolProgress},
    trace::{RunTrace, ToolAbout, ToolKind, Tracer},
};

/// What a run needs from its agent.
#[derive(Clone)]
pub struct RunServices {
    pub llm: Arc<dyn Llm>,
    /// The agent's tools; a run uses the catalog it started with.
    pub tools: Arc<ToolRegistry>,
    pub settings: Arc<AgentSettings>,
    pub counter: Arc<dyn TokenCounter>,
    pub telemetry: Arc<dyn Telemetry>,
    /// Makes the spans of the agent's runs.
    pub tracer: Arc<dyn Tracer>,
    /// The span of the run being driven: set on the run's own copy of the services (empty in
    /// the agent's).
    pub trace: RunTrace,
    /// Run around every tool call, in order.
    pub hooks: Arc<Vec<Arc<dyn ToolHook>>>,
    /// Sees every input fed to a run's machine (replays, audits).
    pub inputs: Option<Arc<dyn InputLog>>,
    /// Where messages sent to runs while they work wait for their driver.
    pub steering: Arc<SteeringBoard>,
    /// Where the questions of runs' tool calls wait for the user's answers.
    pub questions: Arc<crate::QuestionBoard>,
}

/// Sees every input a run's machine is fed, with the time it was fed: with the run's first
/// state, that is enough to replay the run exactly.
pub trait InputLog: Send + Sync {
    /// A run begins from `state`.
    fn started(&self, state: &RunState);
    fn record(&self, run_id: Uuid, input: &Input, at: DateTime<Utc>);
}

/// Feeds `input` to the machine as happening now, and shows it to the input log.
pub(crate) fn feed(
    machine: &mut RunMachine,
    inputs: Option<&Arc<dyn InputLog>>,
    input: Input,
) -> Handled {
    let now = crate::clock::now();
    if let Some(log) = inputs {
        log.record(machine.run_id(), &input, now);
    }
    machine.handle(input, now)
}

/// Like [`feed`], for an input that always yields a step.
fn feed_step(machine: &mut RunMachine, services: &RunServices, input: Input) -> Step {
    match feed(machine, services.inputs.as_ref(), input) {
        Handled::Next(step) => step,
        other => {
            let message =
                format!("internal error: the run stopped without a next step ({other:?})");
            let failure = Input::Fail {
                code: ErrorCode::InternalError,
                message,
            };
            match feed(machine, services.inputs.as_ref(), failure) {
                Handled::Next(step) => step,
                _ => Step::Finished(Box::new(machine.left_behind())),
            }
        }
    }
}

/// Feeds a message sent to the run while it works, and tells its sender what the run did
/// with it.
fn steer(machine: &mut RunMachine, services: &RunServices, letter: Letter) {
    let text = letter.text.clone();
    let answer = match feed(machine, services.inputs.as_ref(), Input::Steer { text }) {
        Handled::Steered(answer) => answer,
        _ => Err(SteerError::NotRunning(machine.run_id())),
    };
    letter.answer(answer);
}

/// Runs `machine` to its end. Each step's changes are saved (when `persistence` is given)
/// before its events are emitted. Cancellation takes effect at once: an LLM call is abandoned,
/// tool calls in flight are dropped (their MCP servers told) and recorded as cut off.
///
/// Not an `async fn`, nor are the other ways into the driver ([`drive_from`], `drive_saved`):
/// an `async fn`'s future keeps room for its arguments for as long as it runs, after it moved
/// them on into the future it awaits. A server's run task held five such layers, each with room
/// for the machine, its services and how it is saved: 6.6 KB, 4.2 KB with one
/// (`cargo bench -p agentloop --bench run_footprint` prints it).
pub fn drive(
    machine: RunMachine,
    services: RunServices,
    emitter: &mut Emitter,
    cancel: CancellationToken,
    persistence: Option<Persistence>,
) -> impl Future<Output = RunOutcome> + Send {
    let run = Driven::new(machine, services, persistence);
    drive_traced(run, DriveFrom::Start, emitter, cancel)
}

/// Starts `machine`: its first step.
pub(crate) fn start(machine: &mut RunMachine, services: &RunServices) -> Step {
    if let Some(log) = &services.inputs {
        log.started(machine.state());
    }
    feed_step(machine, services, Input::Start)
}

/// Like [`drive`], from `step` of a machine already under way (a paused run that resumes).
pub fn drive_from(
    machine: RunMachine,
    step: Step,
    services: RunServices,
    emitter: &mut Emitter,
    cancel: CancellationToken,
    persistence: Option<Persistence>,
) -> impl Future<Output = RunOutcome> + Send {
    let run = Driven::new(machine, services, persistence);
    drive_traced(run, DriveFrom::Step(step), emitter, cancel)
}

/// Where a run's driver starts.
pub(crate) enum DriveFrom {
    /// The machine's start.
    Start,
    /// A step to save, then perform.
    Step(Step),
    /// A step saved already, whose events were sent: to perform.
    Saved(Step),
}

/// A run to drive: its machine, what it uses, how its steps are saved, and what is held for it
/// while it is driven (its session's lease, renewed).
pub(crate) struct Driven {
    pub(crate) machine: RunMachine,
    pub(crate) services: RunServices,
    pub(crate) persistence: Option<Persistence>,
    pub(crate) lease: Option<LeaseRenewal>,
}

impl Driven {
    pub(crate) fn new(
        machine: RunMachine,
        services: RunServices,
        persistence: Option<Persistence>,
    ) -> Driven {
        Driven {
            machine,
            services,
            persistence,
            lease: None,
        }
    }
}

/// Drives the steps from `from`, and ends the run's span with its outcome.
///
/// Plain functions that build the future, not `async fn`s: an `async fn` keeps its arguments
/// twice for as long as it runs (as it received them, and moved into its body), and the
/// run's machine, services and persistence are half a kilobyte. See `benches/run_footprint.rs`
/// in the `agentloop` crate.
pub(crate) fn drive_traced(
    mut run: Driven,
    from: DriveFrom,
    emitter: &mut Emitter,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send {
    let trace = run.services.trace.clone();
    let lease = run.lease.take();
    Leased::new(drive_steps(run, from, emitter, cancel), lease).map(move |outcome| {
        trace.end(&outcome);
        outcome
    })
}

fn drive_steps(
    run: Driven,
    from: DriveFrom,
    emitter: &mut Emitter,
    cancel: CancellationToken,
) -> impl Future<Output = RunOutcome> + Send {
    let Driven {
        mut machine,
        services,
        persistence,
        lease: _,
    } = run;
    let handover = persistence
        .as_ref()
        .map(|persistence| persistence.handover.clone());
    let mut writer = StepWriter::new(persistence, services.telemetry.clone());
    // Each is used where the future holds it: rebound in the block, it would be held twice.
    async move {
        let mut inbox = services.steering.open(machine.run_id());
        let (mut step, mut saved) = match from {
            DriveFrom::Start => (start(&mut machine, &services), false),
            DriveFrom::Step(step) => (step, false),
            DriveFrom::Saved(step) => (step, true),
        };
        loop {
            trace_refused_calls(&mut machine, &services);
            // Saving and running tools are boxed: inline, this future kept their room (7.5 KB in all,
            // 2.1 KB without them) for the whole run, most of which is spent waiting for the LLM.
            if !std::mem::take(&mut saved)
                && let Err(error) =
                    Box::pin(writer.commit(&mut machine, emitter, step.ended())).await
            {
                if let StoreError::NotOwner(_) = error {
                    return machine.left_behind();
                }
                step = unsaved(&mut machine, &services, emitter, error);
                continue;
            }
            if cancel.is_cancelled() && !matches!(step, Step::Finished(_)) {
                step = feed_step(&mut machine, &services, Input::Cancel);
                continue;
            }
            // Handed over before an LLM call, which the next owner makes again: the state saved
            // with this step is where it goes on. Tool calls are run first (their results are
            // saved), so that they are not left of unknown outcome.
            let handing_over = handover.as_ref().filter(|handover| handover.is_cancelled());
            if handing_over.is_some() && matches!(step, Step::CallModel(_)) {
                tracing::info!(run_id = %machine.run_id(), "run handed over at a saved step");
                return machine.left_behind();
            }
            step = match step {
                Step::Finished(outcome) => {
                    services.telemetry.run_finished(&outcome);
                    return *outcome;
                }
                Step::CheckGuardrails(check) => {
                    Box::pin(guardrails::check_guardrails(
                        &mut machine,
                        &services,
                        check,
                        &cancel,
                    ))
                    .await
                }
                Step::CallModel(request) => {
                    let purpose = request.purpose;
                    // Output guardrails check the answer before a client sees it.
                    let hold = machine.holds_answer();
                    let mut span = services.trace.chat(&request);
                    let started = Instant::now();
                    // The typed answer as it is written (`output_delta`), when this call's
                    // text may be it; the machine emits the answer's text once it is valid.
                    let mut partial = request.output.as_ref().map(|_| PartialOutput::default());
                    let reply = {
                        let mut on_text = |text: &str| {
                            if text.is_empty() {
                                return;
                            }
                            // Held text streams no partial value either: it is not checked yet.
                            if hold {
                                return;
                            }
                            let delta = text.to_string();
                            let mut events = Vec::with_capacity(2);
                            match (purpose, partial.is_some()) {
                                (CallPurpose::Step, _) => {
                                    events.push(EventKind::AssistantDelta { text: delta });
                                }
                                (CallPurpose::Finalize, false) => {
                                    events.push(EventKind::FinalResponse { delta });
                                }
                                (CallPurpose::Finalize, true) => {}
                                // Plans and reviews are JSON for the loop, not text for the user.
                                (
                                    CallPurpose::Plan
                                    | CallPurpose::Review
                                    | CallPurpose::Guardrail
                                    | CallPurpose::Sampling,
                                    _,
                                ) => return,
                            }
                            events.extend(partial.as_mut().and_then(|partial| partial.push(text)));
                            for event in events {
                                let event = emitter.number(event);
                                // Live text is sent at once and saved with the next step.
                                writer.keep_delta(&event);
                                emitter.send(event);
                            }
                        };
                        let handed_over = async {
                            match &handover {
                                Some(handover) => handover.cancelled().await,
                                None => std::future::pending().await,
                            }
                        };
                        tokio::pin!(handed_over);
                        let call = services.llm.complete(&request, &mut on_text);
                        tokio::pin!(call);
                        loop {
                            tokio::select! {
                                biased;
                                () = cancel.cancelled() => break None,
                                () = &mut handed_over => {
                                    tracing::info!(run_id = %machine.run_id(), "run handed over during an LLM call");
                                    return machine.left_behind();
                                }
                                // Kept for the next LLM call: this one goes on.
                                letter = inbox.recv() => steer(&mut machine, &services, letter),
                                reply = &mut call => break Some(reply),
                            }
                        }
                    };
                    let mut report = LlmCallReport {
                        run_id: machine.run_id(),
                        iteration: machine.iteration(),
                        purpose: request.purpose,
                        // The configured model when the request names none.
                        model: request
                            .model
                            .clone()
                            .or_else(|| services.settings.pricing.default_model.clone()),
                        duration: started.elapsed(),
                        usage: reply
                            .as_ref()
                            .and_then(|reply| reply.as_ref().ok())
                            .and_then(|reply| reply.usage),
                        error: match &reply {
                            None => Some("cancelled"),
                            Some(Err(error)) => Some(error.code().as_str()),
                            Some(Ok(_)) => None,
                        },
                        cost_usd: None,
                    };
                    tracing::debug!(
                        run_id = %report.run_id,
                        iteration = report.iteration,
                        elapsed_ms = report.duration.as_millis() as u64,
                        error = report.error,
                        "llm call"
                    );
                    if let Some(span) = span.as_mut() {
                        span.reply(reply.as_ref());
                    }
                    let input = match reply {
                        Some(reply) => Input::ModelReply {
                            reply,
                            duration_ms: report.duration.as_millis() as u64,
                        },
                        None => Input::Cancel,
                    };
                    let next = feed_step(&mut machine, &services, input);
                    // Priced by the machine, which knows the price table.
                    report.cost_usd = report
                        .error
                        .is_none()
                        .then(|| machine.last_call_cost())
                        .flatten();
                    if let Some(span) = span {
                        span.end(&report);
                    }
                    services.telemetry.llm_call(&report);
                    next
                }
                Step::CallTools(invocations) => {
                    let batch = Batch {
                        emitter,
                        writer: &mut writer,
                        inbox: &mut inbox,
                        cancel: &cancel,
                    };
                    Box::pin(run_tools(&mut machine, &services, batch, invocations)).await
                }
            };
        }
    }
}

/// What a tool call's span says of the tool `name` of `catalog`.
fn tool_about<'a>(catalog: &'a ToolCatalog, name: &str) -> ToolAbout<'a> {
    match catalog.get(name) {
        Some(entry) => ToolAbout {
            description: &entry.tool.info().description,
            kind: if entry.client {
                ToolKind::Function
            } else {
                ToolKind::Extension
            },
        },
        None => ToolAbout {
            description: "",
            kind: ToolKind::Extension,
        },
    }
}

/// Gives the calls the machine ended without running (refused, duplicates) their spans.
fn trace_refused_calls(machine: &mut RunMachine, services: &RunServices) {
    let refused = machine.take_refused_calls();
    if !services.trace.is_on() {
        return;
    }
    for record in &refused {
        let about = tool_about(machine.catalog(), &record.tool);
        services.trace.refused_call(record, &about);
    }
}

/// What a batch of tool calls reports to while it runs.
struct Batch<'a> {
    emitter: &'a mut Emitter,
    writer: &'a mut StepWriter,
    inbox: &'a mut Inbox,
    cancel: &'a CancellationToken,
}

/// Runs a batch: up to `parallel_tools` at once; tools that do not support parallel calls run
/// alone. Results are fed back, saved and reported as they arrive.
async fn run_tools(
    machine: &mut RunMachine,
    services: &RunServices,
    batch: Batch<'_>,
    invocations: Vec<ToolInvocation>,
) -> Step {
    let Batch {
        emitter,
        writer,
        inbox,
        cancel,
    } = batch;
    let mut in_flight: Vec<String> = invocations
        .iter()
        .map(|call| call.call_id.clone())
        .collect();
    let permits = Arc::new(Semaphore::new(services.settings.parallel_tools.max(1)));
    let gate = Arc::new(RwLock::new(()));
    let (nested_sender, mut nested) = tokio::sync::mpsc::unbounded_channel();
    let (progress_sender, mut progress) = tokio::sync::mpsc::unbounded_channel();
    let (asks_sender, mut asked) = tokio::sync::mpsc::unbounded_channel();
    let mut asks = asks::Asks::new(services, machine);
    let input = machine.input();
    let policy = Arc::new(input.policy.clone());
    let mut running: Running<_> = invocations
        .into_iter()
        .map(|invocation| {
            let span = services.trace.tool(
                &invocation,
                &tool_about(machine.catalog(), &invocation.tool),
            );
            let context = ToolContext {
                run_id: input.run_id,
                session_id: input.session_id,
                call_id: invocation.call_id.clone(),
                user_id: input.context.user_id.clone(),
                entity_id: input.context.entity_id.clone(),
                workflow: input.context.workflow.clone(),
                read_only: input.context.read_only,
                events: Some(nested_sender.clone()),
                traceparent: span.as_ref().and_then(|span| span.traceparent()),
                // Each call's own, set where it runs.
                progress: None,
                asks: None,
            };
            let tool = CallTool {
                catalog: machine.catalog().clone(),
                policy: policy.clone(),
                hooks: services.hooks.clone(),
            };
            let call = execute(
                invocation,
                tool,
                context,
                (permits.clone(), gate.clone()),
                (progress_sender.clone(), asks_sender.clone()),
            );
            async move {
                let result = call.await;
                if let Some(span) = span {
                    span.end(&result);
                }
                result
            }
        })
        .collect();
    // `nested_sender` lives until the batch ends: the last sender dropped (a call's context, in
    // this task's own poll) would close the channel and wake this task as it runs, which tokio
    // answers by queueing it for another worker thread and waking one.
    loop {
        let result = tokio::select! {
            biased;
            Some(event) = nested.recv() => {
                relay(emitter, writer, event);
                continue;
            }
            Some(kind) = progress.recv() => {
                live(emitter, writer, kind);
                continue;
            }
            Some(ask) = asked.recv() => {
                if let Some(question) = asks.take(machine, services, ask) {
                    live(emitter, writer, question);
                    // Saved at once: a client that comes back, or another process, sees it.
                    if let Err(error) = writer.commit(machine, emitter, None).await {
                        return unsaved(machine, services, emitter, error);
                    }
                }
                continue;
            }
            sampled = asks.sampled() => {
                if let Some((model, usage, duration_ms)) = sampled.spent() {
                    let spent = Input::Sampled(crate::machine::SampledCall { model, usage, duration_ms });
                    let _ = feed(machine, services.inputs.as_ref(), spent);
                    if let Err(error) = writer.commit(machine, emitter, None).await {
                        sampled.answer();
                        return unsaved(machine, services, emitter, error);
                    }
                }
                sampled.answer();
                continue;
            }
            // Kept for the LLM call after the batch.
            letter = inbox.recv() => {
                steer(machine, services, letter);
                continue;
            }
            result = running.next() => result,
            // The calls in flight are dropped: each MCP server is told (`notifications/cancelled`).
            () = cancel.cancelled() => {
                drop(running);
                return abandon::calls(machine, services, in_flight);
            }
        };
        let Some(mut result) = result else { break };
        in_flight.retain(|call_id| *call_id != result.call_id);
        // A sub-agent's last events, and the calls' last reports, come before its result.
        while let Ok(event) = nested.try_recv() {
            relay(emitter, writer, event);
        }
        while let Ok(kind) = progress.try_recv() {
            live(emitter, writer, kind);
        }
        while let Ok(ask) = asked.try_recv() {
            if let Some(question) = asks.take(machine, services, ask) {
                live(emitter, writer, question);
            }
        }
        result.logs = asks.logs_of(&result.call_id);
        match feed(machine, services.inputs.as_ref(), Input::ToolResult(result)) {
            Handled::Next(step) => return step,
            Handled::BatchRunning => {}
            other => {
                tracing::warn!(run_id = %machine.run_id(), ?other, "unexpected answer to a tool result");
            }
        }
        trace_refused_calls(machine, services);
        // A call that ended is saved, and reported, before the rest of the batch ends: the run
        // goes on.
        if let Err(error) = writer.commit(machine, emitter, None).await {
            return unsaved(machine, services, emitter, error);
        }
    }
    let failure = Input::Fail {
        code: ErrorCode::InternalError,
        message: "internal error: a tool batch ended without a result for every call".to_string(),
    };
    feed_step(machine, services, failure)
}

/// The step after one the store did not take. Another instance took the run over: the run
/// stops here (its writer refuses every later step without asking the store). Otherwise the
/// store stayed away: the run ends failed with `store_unavailable`.
fn unsaved(
    machine: &mut RunMachine,
    services: &RunServices,
    emitter: &Emitter,
    error: StoreError,
) -> Step {
    if let StoreError::NotOwner(_) = error {
        return Step::Finished(Box::new(machine.left_behind()));
    }
    tracing::error!(run_id = %machine.run_id(), %error, "cannot save a step of the run; it ends failed");
    let lost = Input::StoreLost {
        error: error.to_string(),
        announced: emitter.last_seq() > 0,
    };
    feed_step(machine, services, lost)
}

/// Sends a sub-agent's event on, as part of this run's stream (saved with the next step).
fn relay(emitter: &mut Emitter, writer: &mut StepWriter, event: Event) {
    let event = emitter.adopt(event);
    writer.keep_delta(&event);
    emitter.send(event);
}

/// Sends a live event of the run (a call's progress) at once; it is saved with the next step.
fn live(emitter: &mut Emitter, writer: &mut StepWriter, kind: EventKind) {
    let event = emitter.number(kind);
    writer.keep_delta(&event);
    emitter.send(event);
}

/// What a call needs of its run: the tools and the rules it started with, and the hooks.
struct CallTool {
    catalog: Arc<ToolCatalog>,
    policy: Arc<RunPolicy>,
    hooks: Arc<Vec<Arc<dyn ToolHook>>>,
}

async fn execute(
    invocation: ToolInvocation,
    call: CallTool,
    mut context: ToolContext,
    (permits, gate): (Arc<Semaphore>, Arc<RwLock<()>>),
    (progress, asks): (
        tokio::sync::mpsc::UnboundedSender<EventKind>,
        tokio::sync::mpsc::UnboundedSender<crate::asking::CallAsk>,
    ),
) -> ToolResult {
    let ToolInvocation {
        call_id,
        tool: name,
        mut arguments,
        timeout,
    } = invocation;
    let Some(entry) = call.catalog.get(&name) else {
        return ToolResult::new(call_id, crate::clock::now(), 0, ToolOutcome::Unavailable);
    };
    let hooks = &call.hooks;
    let original = arguments.clone();
    for hook in hooks.iter() {
        if let BeforeCall::Skip { reason } = hook.before_call(&name, &mut arguments, &context).await
        {
            return ToolResult::new(
                call_id,
                crate::clock::now(),
                0,
                ToolOutcome::Skipped(reason),
            );
        }
    }
    // The pipeline checked the arguments the model wrote; rewritten ones are checked again.
    if arguments != original
        && let Some(refusal) = recheck(entry, &call.policy, &arguments)
    {
        let mut refused = ToolResult::new(
            call_id,
            crate::clock::now(),
            0,
            ToolOutcome::Refused(refusal),
        );
        refused.arguments = Some(arguments);
        return refused;
    }
    let tool = entry.tool.clone();
    // Both are only closed when dropped, which cannot happen while we hold the Arcs.
    let _permit = permits.acquire_owned().await.ok();
    let (_shared, _exclusive) = if tool.supports_parallel() {
        (Some(gate.read_owned().await), None)
    } else {
        (None, Some(gate.write_owned().await))
    };
    // Taken now that the call runs: a call denied, cancelled or refused before spends nothing.
    if let Some(refusal) = call.policy.take_mutation(entry) {
        let refusal = CallRefusal {
            status: ToolStatus::Blocked,
            error: refusal.error,
            hint: refusal.hint.to_string(),
        };
        let mut refused = ToolResult::new(
            call_id,
            crate::clock::now(),
            0,
            ToolOutcome::Refused(refusal),
        );
        refused.arguments = (arguments != original).then_some(arguments);
        return refused;
    }
    let started_at = crate::clock::now();
    let started = Instant::now();
    // In the run's own task, not one of its own (a spawn, a wake of another worker and a join
    // per call): a tool that panics still fails its call, not the run, and a run that is dropped
    // or a call that times out leaves nothing running behind (the call is dropped with it).
    let (reports, reported) = tokio::sync::mpsc::unbounded_channel();
    context.progress = Some(reports);
    // While the call waits for a human's answer, its time limit waits too.
    let asking = Arc::new(tokio::sync::watch::Sender::new(0));
    let waiting = asking.subscribe();
    context.asks = Some(crate::asking::CallAsks::new(&call_id, &name, asks, asking));
    let call = AssertUnwindSafe(tool.call(arguments.clone(), context.clone())).catch_unwind();
    let max_duration = entry
        .settings
        .max_duration_s
        .map(std::time::Duration::from_secs_f64);
    let on_progress = |report: ToolProgress| {
        // The run's task is gone only when the run is.
        let _ = progress.send(EventKind::ToolProgress {
            call_id: call_id.clone(),
            tool: name.clone(),
            progress: report.progress,
            total: report.total,
            message: report.message,
        });
    };
    let outcome = match deadline::within(
        call,
        (timeout, max_duration),
        (reported, waiting),
        on_progress,
    )
    .await
    {
        Ok(Ok(Ok(output))) => ToolOutcome::Success(output),
        Ok(Ok(Err(error))) => ToolOutcome::Failed(error),
        Ok(Err(panic)) => ToolOutcome::Crashed(panic_message(panic.as_ref())),
        Err(limit) => ToolOutcome::TimedOut(limit),
    };
    let duration_ms = started.elapsed().as_millis() as u64;
    let mut side_effects = Vec::new();
    if let ToolOutcome::Success(output) = &outcome {
        let completed = CompletedCall {
            tool: &name,
            arguments: &arguments,
            output,
            context: &context,
            settings: &entry.settings,
        };
        for hook in hooks.iter() {
            side_effects.push(match hook.after_call(&completed).await {
                Ok(effect) if effect.note.is_none() && !effect.refresh => continue,
                Ok(effect) => SideEffectNote {
                    note: effect.note,
                    failed: false,
                    refresh: effect.refresh,
                },
                Err(error) => SideEffectNote {
                    note: Some(error.to_string()),
                    failed: true,
                    refresh: false,
                },
            });
        }
    }
    ToolResult {
        call_id,
        started_at,
        duration_ms,
        outcome,
        arguments: (arguments != original).then_some(arguments),
        side_effects,
        // The batch's, added as the result is fed.
        logs: Vec::new(),
    }
}

/// What a tool's panic said, for the model.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let message = panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("no message");
    format!("it panicked: {message}")
}

#[cfg(test)]
mod tests;
