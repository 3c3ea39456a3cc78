//! Prometheus metrics: runs by status, LLM and tool call latencies, tokens and cost by model, the
//! events live runs hold in memory. Fed by the runs' [`Telemetry`] reports; rendered in the Prometheus text
//! format at `GET /metrics`.

use agentloop_core::{
    LlmCallReport, RunOutcome, Telemetry, guardrail::GuardrailReport, protocol::ToolExecutionRecord,
};
use prometheus::{
    CounterVec, Encoder, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, Opts, Registry,
    TextEncoder, core::Collector,
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
    guardrails: IntCounterVec,
    /// Each family's name, help and type: a family without samples yet (a vector no label
    /// set was used of) is still listed, with its HELP and TYPE, from the first scrape.
    families: Vec<(String, String, &'static str)>,
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
        let live_event_bytes = IntGauge::new(
            "agentloop_live_event_bytes",
            "Bytes of events live runs hold in memory for their followers (estimated)",
        )?;
        let guardrails = IntCounterVec::new(
            Opts::new(
                "agentloop_guardrail_checks_total",
                "Guardrail checks, by guardrail, side (input, output) and outcome (allowed, \
                 tripped, error)",
            ),
            &["name", "on", "outcome"],
        )?;
        let collectors: [(Box<dyn Collector>, &'static str); 9] = [
            (Box::new(runs.clone()), "counter"),
            (Box::new(active_runs.clone()), "gauge"),
            (Box::new(llm_calls.clone()), "histogram"),
            (Box::new(tool_calls.clone()), "histogram"),
            (Box::new(tokens.clone()), "counter"),
            (Box::new(cost.clone()), "counter"),
            (Box::new(unpriced.clone()), "counter"),
            (Box::new(live_event_bytes.clone()), "gauge"),
            (Box::new(guardrails.clone()), "counter"),
        ];
        let mut families = Vec::new();
        for (collector, kind) in collectors {
            for desc in collector.desc() {
                families.push((desc.fq_name.clone(), desc.help.clone(), kind));
            }
            registry.register(collector)?;
        }
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
            guardrails,
            families,
        })
    }

    /// The bytes of events live runs hold in memory at this moment.
    pub fn set_live_event_bytes(&self, bytes: usize) {
        self.live_event_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// The Prometheus text format, with `active` runs at this moment.
    pub fn render(&self, active: usize) -> String {
        self.active_runs
            .set(i64::try_from(active).unwrap_or(i64::MAX));
        let gathered = self.registry.gather();
        let mut out = Vec::new();
        if let Err(error) = TextEncoder::new().encode(&gathered, &mut out) {
            tracing::error!(%error, "cannot encode the metrics");
        }
        let mut text = String::from_utf8(out).unwrap_or_default();
        // The registry leaves out a family without samples; the text format allows one.
        for (name, help, kind) in &self.families {
            if !gathered.iter().any(|family| family.name() == name) {
                text.push_str(&format!("# HELP {name} {help}\n# TYPE {name} {kind}\n"));
            }
        }
        text
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

    fn guardrail_checked(&self, report: &GuardrailReport<'_>) {
        self.guardrails
            .with_label_values(&[report.name, report.on.as_str(), report.outcome.as_str()])
            .inc();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_registry_lists_every_family_with_help_and_type() {
        let Ok(metrics) = Metrics::new() else {
            unreachable!("the metrics are well-formed");
        };
        let text = metrics.render(0);
        for (name, kind) in [
            ("agentloop_runs_total", "counter"),
            ("agentloop_runs_active", "gauge"),
            ("agentloop_llm_call_duration_seconds", "histogram"),
            ("agentloop_tool_call_duration_seconds", "histogram"),
            ("agentloop_llm_tokens_total", "counter"),
            ("agentloop_llm_cost_usd_total", "counter"),
            ("agentloop_llm_unpriced_calls_total", "counter"),
            ("agentloop_live_event_bytes", "gauge"),
            ("agentloop_guardrail_checks_total", "counter"),
        ] {
            assert_eq!(
                text.matches(&format!("# HELP {name} ")).count(),
                1,
                "{name}: {text}"
            );
            assert_eq!(
                text.matches(&format!("# TYPE {name} {kind}\n")).count(),
                1,
                "{name}: {text}"
            );
        }
        // Once used, a family is listed once, with its samples.
        metrics.runs.with_label_values(&["completed"]).inc();
        let text = metrics.render(0);
        assert_eq!(text.matches("# TYPE agentloop_runs_total").count(), 1);
        assert!(text.contains("agentloop_runs_total{status=\"completed\"} 1"));
    }
}
