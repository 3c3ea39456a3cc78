//! The GenAI spans of a run, made with OpenTelemetry: `invoke_agent {agent}` for each stretch
//! of a run a process drives, `chat {model}` for each LLM call and `execute_tool {tool}` for
//! each tool call under it (a sub-agent's `invoke_agent` under its tool call).

use std::{collections::HashMap, sync::Arc};

use agentloop_core::{
    CallPurpose, LlmCallReport, LlmError, ModelReply, ModelRequest,
    guardrail::{GuardrailOutcome, GuardrailReport},
    machine::{RunOutcome, ToolInvocation, ToolOutcome, ToolResult},
    protocol::{ToolExecutionRecord, ToolStatus},
    trace::{ChatSpan, RunSpan, RunSpanStart, ToolAbout, ToolSpan, Tracer},
};
use opentelemetry::{
    Array, Context, KeyValue, StringValue, Value,
    propagation::TextMapPropagator,
    trace::{SpanKind, Status, TraceContextExt, Tracer as _, TracerProvider as _},
};
use opentelemetry_sdk::{propagation::TraceContextPropagator, trace::SdkTracerProvider};

use super::{ModelInfo, TraceExport, content};

/// What every span of the agent's runs shares.
struct Shared {
    tracer: opentelemetry_sdk::trace::Tracer,
    capture_content: bool,
    provider: String,
    model: String,
    /// The agent's own name (`gen_ai.agent.name`): the service's.
    agent: String,
    /// The LLM's host and port (`server.address`, `server.port`); `None` for the scripted model.
    server: Option<(String, u16)>,
}

/// The agent's [`Tracer`]: spans of the GenAI conventions, exported by the provider it came
/// from.
pub struct OtelTracer(Arc<Shared>);

impl OtelTracer {
    pub(super) fn new(
        provider: &SdkTracerProvider,
        export: &TraceExport,
        model: ModelInfo,
    ) -> Self {
        Self(Arc::new(Shared {
            tracer: provider.tracer("agentloop"),
            capture_content: export.capture_content,
            provider: model.provider,
            model: model.model,
            agent: export.service_name.clone(),
            server: model.server,
        }))
    }
}

/// The context a W3C `traceparent` names; an empty one (a new trace) when it names none.
fn continued(traceparent: Option<&str>) -> Context {
    let Some(traceparent) = traceparent else {
        return Context::new();
    };
    let carrier = HashMap::from([("traceparent".to_string(), traceparent.to_string())]);
    TraceContextPropagator::new().extract(&carrier)
}

/// The span of `cx` as a W3C `traceparent`.
fn traceparent_of(cx: &Context) -> Option<String> {
    let mut carrier = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    carrier.remove("traceparent")
}

fn count(value: u64) -> Value {
    Value::I64(i64::try_from(value).unwrap_or(i64::MAX))
}

impl Tracer for OtelTracer {
    fn start_run(&self, start: &RunSpanStart<'_>) -> Option<Arc<dyn RunSpan>> {
        let shared = &self.0;
        let parent = continued(start.parent);
        let agent = start.agent.unwrap_or(&shared.agent);
        let model = start.model.unwrap_or(&shared.model);
        let attributes = vec![
            KeyValue::new("gen_ai.operation.name", "invoke_agent"),
            KeyValue::new("gen_ai.agent.name", agent.to_string()),
            // An agent is known by its name: the service's, or its `[agents.NAME]`.
            KeyValue::new("gen_ai.agent.id", agent.to_string()),
            KeyValue::new("gen_ai.request.model", model.to_string()),
            KeyValue::new("gen_ai.conversation.id", start.session_id.to_string()),
            KeyValue::new("gen_ai.provider.name", shared.provider.clone()),
            KeyValue::new("agentloop.run_id", start.run_id.to_string()),
        ];
        let span = shared
            .tracer
            .span_builder(format!("invoke_agent {agent}"))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&shared.tracer, &parent);
        Some(Arc::new(OtelRunSpan {
            cx: parent.with_span(span),
            shared: shared.clone(),
        }))
    }
}

struct OtelRunSpan {
    cx: Context,
    shared: Arc<Shared>,
}

impl RunSpan for OtelRunSpan {
    fn traceparent(&self) -> Option<String> {
        traceparent_of(&self.cx)
    }

    fn chat(&self, request: &ModelRequest) -> Box<dyn ChatSpan> {
        let shared = &self.shared;
        let model = request
            .model
            .clone()
            .unwrap_or_else(|| shared.model.clone());
        let mut attributes = vec![
            KeyValue::new("gen_ai.operation.name", "chat"),
            KeyValue::new("gen_ai.provider.name", shared.provider.clone()),
            KeyValue::new("gen_ai.request.model", model.clone()),
            KeyValue::new("agentloop.call.purpose", purpose(request.purpose)),
        ];
        if let Some((address, port)) = &shared.server {
            attributes.push(KeyValue::new("server.address", address.clone()));
            attributes.push(KeyValue::new("server.port", i64::from(*port)));
        }
        if shared.capture_content {
            let (instructions, messages) = content::input_messages(&request.messages);
            if let Some(instructions) = instructions {
                attributes.push(KeyValue::new("gen_ai.system_instructions", instructions));
            }
            attributes.push(KeyValue::new("gen_ai.input.messages", messages));
        }
        let span = shared
            .tracer
            .span_builder(format!("chat {model}"))
            .with_kind(SpanKind::Client)
            .with_attributes(attributes)
            .start_with_context(&shared.tracer, &self.cx);
        Box::new(OtelChatSpan {
            cx: self.cx.with_span(span),
            model,
            capture_content: shared.capture_content,
        })
    }

    fn tool(&self, call: &ToolInvocation, about: &ToolAbout<'_>) -> Box<dyn ToolSpan> {
        let shared = &self.shared;
        let mut attributes = tool_attributes(&call.tool, &call.call_id, about);
        if shared.capture_content {
            attributes.push(KeyValue::new(
                "gen_ai.tool.call.arguments",
                call.arguments.to_string(),
            ));
        }
        let span = shared
            .tracer
            .span_builder(format!("execute_tool {}", call.tool))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&shared.tracer, &self.cx);
        Box::new(OtelToolSpan {
            cx: self.cx.with_span(span),
            capture_content: shared.capture_content,
        })
    }

    fn refused_call(&self, record: &ToolExecutionRecord, about: &ToolAbout<'_>) {
        let shared = &self.shared;
        let mut attributes = tool_attributes(&record.tool, &record.call_id, about);
        if shared.capture_content {
            attributes.push(KeyValue::new(
                "gen_ai.tool.call.arguments",
                record.arguments.to_string(),
            ));
        }
        attributes.push(KeyValue::new(
            "agentloop.tool.status",
            record.status.as_str(),
        ));
        attributes.push(KeyValue::new("error.type", "refused"));
        let span = shared
            .tracer
            .span_builder(format!("execute_tool {}", record.tool))
            .with_kind(SpanKind::Internal)
            .with_attributes(attributes)
            .start_with_context(&shared.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        let span = cx.span();
        span.set_status(Status::error(record.error.clone().unwrap_or_default()));
        span.end();
    }

    fn guardrail(&self, report: &GuardrailReport<'_>) {
        let shared = &self.shared;
        let end = std::time::SystemTime::now();
        let start = end - std::time::Duration::from_millis(report.duration_ms);
        let attributes = vec![
            KeyValue::new("agentloop.guardrail.name", report.name.to_string()),
            KeyValue::new("agentloop.guardrail.on", report.on.as_str()),
            KeyValue::new("agentloop.guardrail.outcome", report.outcome.as_str()),
        ];
        let span = shared
            .tracer
            .span_builder(format!("guardrail {}", report.name))
            .with_kind(SpanKind::Internal)
            .with_start_time(start)
            .with_attributes(attributes)
            .start_with_context(&shared.tracer, &self.cx);
        let cx = self.cx.with_span(span);
        let span = cx.span();
        if let GuardrailOutcome::Failed { error } = report.outcome {
            span.set_status(Status::error(error.clone()));
        }
        span.end_with_timestamp(end);
    }

    fn end(&self, outcome: &RunOutcome) {
        let span = self.cx.span();
        span.set_attributes([
            KeyValue::new("agentloop.run.status", outcome.status.as_str()),
            KeyValue::new(
                "gen_ai.usage.input_tokens",
                count(outcome.usage.prompt_tokens),
            ),
            KeyValue::new(
                "gen_ai.usage.output_tokens",
                count(outcome.usage.completion_tokens),
            ),
        ]);
        if let Some(cost) = outcome.usage.cost_usd {
            span.set_attributes([
                KeyValue::new("agentloop.cost_usd", cost),
                KeyValue::new("agentloop.cost_complete", outcome.usage.cost_complete),
            ]);
        }
        if let Some(failure) = &outcome.failure {
            span.set_attribute(KeyValue::new("error.type", failure.code.as_str()));
            span.set_status(Status::error(failure.message.clone()));
        }
        span.end();
    }

    fn refused(&self, code: &str, message: &str) {
        let span = self.cx.span();
        span.set_attribute(KeyValue::new("error.type", code.to_string()));
        span.set_status(Status::error(message.to_string()));
        span.end();
    }
}

/// What every `execute_tool` span says: the call, and its tool.
fn tool_attributes(tool: &str, call_id: &str, about: &ToolAbout<'_>) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("gen_ai.operation.name", "execute_tool"),
        KeyValue::new("gen_ai.tool.name", tool.to_string()),
        KeyValue::new("gen_ai.tool.call.id", call_id.to_string()),
        KeyValue::new("gen_ai.tool.type", about.kind.as_str()),
    ];
    if !about.description.is_empty() {
        attributes.push(KeyValue::new(
            "gen_ai.tool.description",
            about.description.to_string(),
        ));
    }
    attributes
}

fn purpose(purpose: CallPurpose) -> &'static str {
    match purpose {
        CallPurpose::Step => "step",
        CallPurpose::Plan => "plan",
        CallPurpose::Review => "review",
        CallPurpose::Guardrail => "guardrail",
        CallPurpose::Sampling => "sampling",
        CallPurpose::Finalize => "summary",
    }
}

struct OtelChatSpan {
    cx: Context,
    model: String,
    capture_content: bool,
}

impl ChatSpan for OtelChatSpan {
    fn reply(&mut self, reply: Option<&Result<ModelReply, LlmError>>) {
        let span = self.cx.span();
        match reply {
            Some(Ok(reply)) => {
                if let Some(id) = &reply.id {
                    span.set_attribute(KeyValue::new("gen_ai.response.id", id.clone()));
                }
                if let Some(reason) = &reply.finish_reason {
                    let reasons = Array::String(vec![StringValue::from(reason.clone())]);
                    span.set_attribute(KeyValue::new(
                        "gen_ai.response.finish_reasons",
                        Value::Array(reasons),
                    ));
                }
                if self.capture_content {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.output.messages",
                        content::output_messages(reply),
                    ));
                }
            }
            Some(Err(error)) => {
                span.set_attribute(KeyValue::new("error.type", error.code().as_str()));
                span.set_status(Status::error(error.to_string()));
            }
            None => {
                span.set_attribute(KeyValue::new("error.type", "cancelled"));
                span.set_status(Status::error(
                    "the call was abandoned: the run was cancelled",
                ));
            }
        }
    }

    fn end(self: Box<Self>, report: &LlmCallReport) {
        let span = self.cx.span();
        // The providers' replies do not say which model answered: the one asked for did.
        span.set_attribute(KeyValue::new("gen_ai.response.model", self.model.clone()));
        span.set_attribute(KeyValue::new(
            "agentloop.iteration",
            i64::from(report.iteration),
        ));
        if let Some(usage) = &report.usage {
            span.set_attributes([
                KeyValue::new("gen_ai.usage.input_tokens", count(usage.prompt_tokens)),
                KeyValue::new("gen_ai.usage.output_tokens", count(usage.completion_tokens)),
            ]);
            if usage.cache_read_tokens > 0 {
                span.set_attribute(KeyValue::new(
                    "gen_ai.usage.cache_read.input_tokens",
                    count(usage.cache_read_tokens),
                ));
            }
            if usage.cache_creation_tokens > 0 {
                span.set_attribute(KeyValue::new(
                    "gen_ai.usage.cache_creation.input_tokens",
                    count(usage.cache_creation_tokens),
                ));
            }
        }
        if let Some(cost) = report.cost_usd {
            span.set_attribute(KeyValue::new("agentloop.cost_usd", cost));
        }
        span.end();
    }
}

struct OtelToolSpan {
    cx: Context,
    capture_content: bool,
}

impl ToolSpan for OtelToolSpan {
    fn traceparent(&self) -> Option<String> {
        traceparent_of(&self.cx)
    }

    fn end(self: Box<Self>, result: &ToolResult) {
        let span = self.cx.span();
        let (status, error) = match &result.outcome {
            ToolOutcome::Success(output) => {
                if self.capture_content {
                    span.set_attribute(KeyValue::new(
                        "gen_ai.tool.call.result",
                        output.text.clone(),
                    ));
                }
                (ToolStatus::Success, None)
            }
            ToolOutcome::Failed(error) => {
                (ToolStatus::Error, Some(("tool_error", error.to_string())))
            }
            ToolOutcome::TimedOut(limit) => (
                ToolStatus::Error,
                Some(("timeout", format!("no result within {limit:?}"))),
            ),
            ToolOutcome::Crashed(why) => (ToolStatus::Error, Some(("crashed", why.clone()))),
            ToolOutcome::Unavailable => (
                ToolStatus::Error,
                Some(("unavailable", "the tool left the catalog".to_string())),
            ),
            ToolOutcome::Skipped(_) => (ToolStatus::Skipped, None),
            ToolOutcome::Refused(refusal) => {
                (refusal.status, Some(("refused", refusal.error.clone())))
            }
            other => (
                ToolStatus::Error,
                Some(("tool_error", format!("{other:?}"))),
            ),
        };
        span.set_attribute(KeyValue::new("agentloop.tool.status", status.as_str()));
        if let Some((kind, message)) = error {
            span.set_attribute(KeyValue::new("error.type", kind));
            span.set_status(Status::error(message));
        }
        span.end();
    }
}
