//! Performs a guardrail check the machine asks for: every guardrail of the check at once, each
//! timed; the verdicts go back to the machine together (`Input::GuardrailVerdicts`), and each
//! to telemetry (Prometheus counters by name, side and outcome).

use std::{sync::Mutex, time::Instant};

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;

use super::{RunServices, feed_step};
use crate::{
    guardrail::{
        GuardrailCheck, GuardrailLlmCall, GuardrailModels, GuardrailOutcome, GuardrailReport,
        GuardrailRequest, GuardrailVerdict,
    },
    llm::{Llm, LlmError, ModelReply, ModelRequest},
    machine::{Input, RunMachine, Step},
    telemetry::LlmCallReport,
    trace::RunTrace,
};

/// A guardrail's LLM calls in its run: traced under the run's span, kept for the machine to
/// count.
struct RunModels<'a> {
    run_id: uuid::Uuid,
    trace: &'a RunTrace,
    calls: Mutex<Vec<GuardrailLlmCall>>,
}

#[async_trait]
impl GuardrailModels for RunModels<'_> {
    async fn complete(
        &self,
        llm: &dyn Llm,
        request: &ModelRequest,
    ) -> Result<ModelReply, LlmError> {
        let mut span = self.trace.chat(request);
        let started = Instant::now();
        let reply = llm.complete(request, &mut |_: &str| {}).await;
        let duration = started.elapsed();
        if let Some(span) = span.as_mut() {
            span.reply(Some(&reply));
        }
        let usage = reply.as_ref().ok().and_then(|reply| reply.usage);
        if let Some(span) = span {
            span.end(&LlmCallReport {
                run_id: self.run_id,
                iteration: 0,
                purpose: request.purpose,
                model: request.model.clone(),
                duration,
                usage,
                error: reply.as_ref().err().map(|error| error.code().as_str()),
                cost_usd: None,
            });
        }
        if let Ok(answer) = &reply
            && let Ok(mut calls) = self.calls.lock()
        {
            calls.push(GuardrailLlmCall {
                model: answer.model.clone().or_else(|| request.model.clone()),
                usage: answer.usage.unwrap_or_default(),
                duration_ms: duration.as_millis() as u64,
            });
        }
        reply
    }
}

/// Runs the check and feeds its verdicts; a cancelled run stops waiting for them.
pub(super) async fn check_guardrails(
    machine: &mut RunMachine,
    services: &RunServices,
    check: GuardrailCheck,
    cancel: &CancellationToken,
) -> Step {
    let input = machine.input();
    let (run_id, session_id) = (input.run_id, input.session_id);
    let user_id = input.context.user_id.as_deref();
    let guardrails = &services.settings.guardrails;
    let (on, text) = (check.on, check.text.as_str());
    let checks = check.names.iter().map(|name| async move {
        let models = RunModels {
            run_id,
            trace: &services.trace,
            calls: Mutex::new(Vec::new()),
        };
        let request = GuardrailRequest::new(on, text, run_id, session_id)
            .user(user_id)
            .models(&models);
        let started = Instant::now();
        let outcome = match guardrails.get(name) {
            Some(guardrail) => match guardrail.check(&request).await {
                Ok(crate::guardrail::Decision::Allow) => GuardrailOutcome::Allowed,
                Ok(crate::guardrail::Decision::Trip { reason }) => {
                    GuardrailOutcome::Tripped { reason }
                }
                Err(error) => GuardrailOutcome::Failed {
                    error: error.to_string(),
                },
            },
            None => GuardrailOutcome::Failed {
                error: format!("the agent has no guardrail named {name}"),
            },
        };
        GuardrailVerdict {
            name: name.clone(),
            outcome,
            duration_ms: started.elapsed().as_millis() as u64,
            llm_calls: models.calls.into_inner().unwrap_or_default(),
        }
    });
    let verdicts = tokio::select! {
        biased;
        () = cancel.cancelled() => None,
        verdicts = futures::future::join_all(checks) => Some(verdicts),
    };
    let Some(verdicts) = verdicts else {
        return feed_step(machine, services, Input::Cancel);
    };
    for verdict in &verdicts {
        let report = GuardrailReport {
            run_id,
            name: &verdict.name,
            on: check.on,
            outcome: &verdict.outcome,
            duration_ms: verdict.duration_ms,
        };
        services.telemetry.guardrail_checked(&report);
        services.trace.guardrail(&report);
    }
    feed_step(machine, services, Input::GuardrailVerdicts(verdicts))
}
