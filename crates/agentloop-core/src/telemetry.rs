//! What a run reports about itself as it goes: each LLM call (latency, tokens, outcome), each
//! tool call (its record) and its end. Metrics and traces implement [`Telemetry`].

use std::time::Duration;

use agentloop_protocol::{ToolExecutionRecord, Usage};
use uuid::Uuid;

use crate::{llm::CallPurpose, machine::RunOutcome};

/// One LLM call of a run, as it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallReport {
    pub run_id: Uuid,
    pub iteration: u32,
    pub purpose: CallPurpose,
    pub model: Option<String>,
    pub duration: Duration,
    pub usage: Option<Usage>,
    /// The error code when the call failed (`llm_timeout`, ...); `cancelled` when abandoned.
    pub error: Option<&'static str>,
    /// What the call cost in USD, from the price table; `None` when the model has no price or
    /// the call failed.
    pub cost_usd: Option<f64>,
}

/// Receives a run's reports. Called on the run's task: must not block.
pub trait Telemetry: Send + Sync {
    fn llm_call(&self, report: &LlmCallReport) {
        let _ = report;
    }

    fn tool_call(&self, run_id: Uuid, record: &ToolExecutionRecord) {
        let _ = (run_id, record);
    }

    fn run_finished(&self, outcome: &RunOutcome) {
        let _ = outcome;
    }

    /// One guardrail checked a question or an answer.
    fn guardrail_checked(&self, report: &crate::guardrail::GuardrailReport<'_>) {
        let _ = report;
    }
}

/// Reports nowhere.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTelemetry;

impl Telemetry for NoTelemetry {}
