//! Prometheus metrics: runs by status, LLM and tool call latencies, tokens and cost by model, the
//! events live runs hold in memory. Fed by the runs' [`Telemetry`] reports; rendered in the Prometheus text
//! format at `GET /metrics`.

use std::sync::Once;

use agentloop_core::{LlmCallReport, RunOutcome, Telemetry, protocol::ToolExecutionRecord};
use prometheus::{
    CounterVec, Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder,
};
use uuid::Uuid;

/// Latency buckets, in seconds: from a fast local tool to a slow LLM call.
const BUCKETS: &[f64] = &[
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
];

/// The server's metrics, in a registry of their own (no global state).
pub struct Metrics {
    registry: Registry,
    runs: IntCounterVec,
    active_runs: IntGauge,
    llm_calls: HistogramVec,
    tool_calls: HistogramVec,
    tokens: IntCounterVec,
    cost: CounterVec,
    unpriced: IntCounterVec,
    live_event_bytes: IntGauge,
    /// The gauge is exported once someone sets it, so an unwired gauge does not read 0.
    live_event_bytes_registered: Once,
}

impl Metrics {
    pub fn new() -> Result<Metrics, prometheus::Error> {
        let registry = Registry::new();
        let runs = IntCounterVec::new(
            Opts::new("agentloop_runs_total", "Runs that ended, by status"),
            &["status"],
        )?;
        let active_runs = IntGauge::new("agentloop_runs_active", "Runs in progress")?;
        let llm_calls = HistogramVec::new(
            HistogramOpts::new("agentloop_llm_call_duration_seconds", "LLM call latency")
                .buckets(BUCKETS.to_vec()),
            &["outcome"],
        )?;
        let tool_calls = HistogramVec::new(
            HistogramOpts::new("agentloop_tool_call_duration_seconds", "Tool call latency")
                .buckets(BUCKETS.to_vec()),
            &["status"],
        )?;
        let tokens = IntCounterVec::new(
            Opts::new(
                "agentloop_llm_tokens_total",
                "Tokens used by LLM calls, by model",
            ),
            &["kind", "model"],
        )?;
        let cost = CounterVec::new(
            Opts::new(
                "agentloop_llm_cost_usd_total",
                "What LLM calls cost in USD (from the price table), by model",
            ),
            &["model"],
        )?;
        let unpriced = IntCounterVec::new(
            Opts::new(
                "agentloop_llm_unpriced_calls_total",
                "LLM calls of a model without a price: their cost is not in the cost total",
            ),
            &["model"],
        )?;
        registry.register(Box::new(runs.clone()))?;
        registry.register(Box::new(active_runs.clone()))?;
        registry.register(Box::new(llm_calls.clone()))?;
        registry.register(Box::new(tool_calls.clone()))?;
        registry.register(Box::new(tokens.clone()))?;
        registry.register(Box::new(cost.clone()))?;
        registry.register(Box::new(unpriced.clone()))?;
        let live_event_bytes = IntGauge::new(
            "agentloop_live_event_bytes",
            "Bytes of events live runs hold in memory for their followers (estimated)",
        )?;
        Ok(Metrics {
            registry,
            runs,
            active_runs,
            llm_calls,
            tool_calls,
            tokens,
            cost,
            unpriced,
            live_event_bytes,
            live_event_bytes_registered: Once::new(),
        })
    }

    /// The bytes of events live runs hold in memory at this moment.
    pub fn set_live_event_bytes(&self, bytes: usize) {
        self.live_event_bytes_registered.call_once(|| {
            if let Err(error) = self
                .registry
                .register(Box::new(self.live_event_bytes.clone()))
            {
                tracing::error!(%error, "cannot register the live events gauge");
            }
        });
        self.live_event_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The Prometheus text format, with `active` runs at this moment.
    pub fn render(&self, active: usize) -> String {
        self.active_runs
            .set(i64::try_from(active).unwrap_or(i64::MAX));
        let mut out = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&self.registry.gather(), &mut out) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }
}

impl Telemetry for Metrics {
    fn llm_call(&self, report: &LlmCallReport) {
        let outcome = report.error.unwrap_or("ok");
        self.llm_calls
            .with_label_values(&[outcome])
            .observe(report.duration.as_secs_f64());
        let model = report.model.as_deref().unwrap_or("unknown");
        if let Some(usage) = report.usage {
            for (kind, count) in [
                ("prompt", usage.prompt_tokens),
                ("completion", usage.completion_tokens),
                ("cache_read", usage.cache_read_tokens),
                ("cache_creation", usage.cache_creation_tokens),
            ] {
                if count > 0 || kind == "prompt" || kind == "completion" {
                    self.tokens.with_label_values(&[kind, model]).inc_by(count);
                }
            }
            match report.cost_usd {
                Some(cost) => self.cost.with_label_values(&[model]).inc_by(cost),
                None => self.unpriced.with_label_values(&[model]).inc(),
            }
        }
    }

    fn tool_call(&self, _run_id: Uuid, record: &ToolExecutionRecord) {
        self.tool_calls
            .with_label_values(&[record.status.as_str()])
            .observe(record.duration_ms as f64 / 1000.0);
    }

    fn run_finished(&self, outcome: &RunOutcome) {
        self.runs
            .with_label_values(&[outcome.status.as_str()])
            .inc();
    }
}
