//! What the calls of a batch ask their run while they run (`asking.rs`): each question
//! becomes a live `input_required` event (kind `elicitation`), saved at once so that a client
//! that comes back, or a restarted process, sees it, and waits on the question board; each
//! sampling request is an LLM call of the run (a `chat` span with purpose `sampling`, its
//! usage counted by the machine as an `llm_call`), refused when the budget cannot pay for it.

use std::{collections::HashMap, time::Instant};

use agentloop_protocol::{Elicitation, EventKind, InputKind, Usage};
use futures::{StreamExt, future::BoxFuture, stream::FuturesUnordered};
use tokio::sync::oneshot;

use super::RunServices;
use crate::{
    asking::{Ask, CallAsk, RunQuestions, SamplingRefused},
    llm::{LlmError, ModelReply},
    machine::RunMachine,
    telemetry::LlmCallReport,
};

/// A sampling call that ended, with where its reply goes.
pub(super) struct Sampled {
    reply: Result<ModelReply, LlmError>,
    requested: Option<String>,
    duration_ms: u64,
    to: oneshot::Sender<Result<ModelReply, SamplingRefused>>,
}

/// The asks of one batch.
pub(super) struct Asks<'a> {
    questions: RunQuestions,
    /// How many questions each call asked, for their ids.
    asked: HashMap<String, u32>,
    sampling: FuturesUnordered<BoxFuture<'a, Sampled>>,
    /// What each call's server logged, for its record.
    logs: HashMap<String, Vec<agentloop_protocol::ToolLog>>,
}

impl<'a> Asks<'a> {
    pub(super) fn new(services: &RunServices, machine: &RunMachine) -> Self {
        Self {
            questions: services.questions.open(machine.run_id()),
            asked: HashMap::new(),
            sampling: FuturesUnordered::new(),
            logs: HashMap::new(),
        }
    }

    /// Takes one ask: a question is put on the board and its event returned (to be sent and
    /// saved at once); a sampling request starts its LLM call, or is refused on the spot.
    pub(super) fn take(
        &mut self,
        machine: &RunMachine,
        services: &'a RunServices,
        ask: CallAsk,
    ) -> Option<EventKind> {
        let CallAsk { call_id, tool, ask } = ask;
        match ask {
            Ask::Log(log) => {
                self.logs.entry(call_id).or_default().push(log);
                None
            }
            Ask::Question { question, reply } => {
                let count = self.asked.entry(call_id.clone()).or_default();
                *count += 1;
                let id = format!("{call_id}/{count}");
                self.questions.put(id.clone(), &question, reply);
                Some(EventKind::InputRequired {
                    kind: InputKind::Elicitation,
                    question: Some(question.message.clone()),
                    calls: Vec::new(),
                    elicitation: Some(Box::new(Elicitation {
                        id,
                        call_id,
                        tool,
                        server: question.server,
                        mode: question.mode,
                        message: question.message,
                        requested_schema: question.requested_schema,
                        url: question.url,
                        purpose: question.purpose,
                    })),
                })
            }
            Ask::Sampling { request, reply: to } => {
                if machine.sampling_over_budget(request.max_tokens) {
                    let _ = to.send(Err(SamplingRefused::OverBudget));
                    return None;
                }
                let run_id = machine.run_id();
                let mut request = request.request;
                if request.model.is_none() {
                    request.model = machine.input().model.clone();
                }
                self.sampling.push(Box::pin(async move {
                    let mut span = services.trace.chat(&request);
                    let started = Instant::now();
                    let reply = services.llm.complete(&request, &mut |_: &str| {}).await;
                    let duration = started.elapsed();
                    if let Some(span) = span.as_mut() {
                        span.reply(Some(&reply));
                    }
                    if let Some(span) = span {
                        span.end(&LlmCallReport {
                            run_id,
                            iteration: 0,
                            purpose: request.purpose,
                            model: request.model.clone(),
                            duration,
                            usage: reply.as_ref().ok().and_then(|reply| reply.usage),
                            error: reply.as_ref().err().map(|error| error.code().as_str()),
                            cost_usd: None,
                        });
                    }
                    Sampled {
                        reply,
                        requested: request.model,
                        duration_ms: duration.as_millis() as u64,
                        to,
                    }
                }));
                None
            }
        }
    }

    /// What the server of `call_id` logged while it ran.
    pub(super) fn logs_of(&mut self, call_id: &str) -> Vec<agentloop_protocol::ToolLog> {
        self.logs.remove(call_id).unwrap_or_default()
    }

    /// The next sampling call that ends; pending while none runs.
    pub(super) async fn sampled(&mut self) -> Sampled {
        match self.sampling.next().await {
            Some(sampled) => sampled,
            None => std::future::pending().await,
        }
    }
}

impl Sampled {
    /// What the call spent, for the machine; `None` when it failed (nothing to count).
    pub(super) fn spent(&self) -> Option<(Option<String>, Usage, u64)> {
        let reply = self.reply.as_ref().ok()?;
        Some((
            reply.model.clone().or_else(|| self.requested.clone()),
            reply.usage.unwrap_or_default(),
            self.duration_ms,
        ))
    }

    /// Hands the reply to the call that asked.
    pub(super) fn answer(self) {
        let reply = self
            .reply
            .map_err(|error| SamplingRefused::Failed(error.to_string()));
        // A call that stopped waiting has nothing left to answer.
        let _ = self.to.send(reply);
    }
}
