//! A run's spans: the run, each LLM call and each tool call, parented, and the W3C
//! `traceparent` that carries them across processes (an HTTP request that starts a run, an MCP
//! server a tool call reaches, a restart). Core only calls [`Tracer`]; the facade implements it
//! with OpenTelemetry. Without a tracer no span is made and nothing is paid.

use std::sync::Arc;

use agentloop_protocol::ToolExecutionRecord;
use uuid::Uuid;

use crate::{
    llm::{LlmError, ModelReply, ModelRequest},
    machine::{RunOutcome, ToolInvocation, ToolResult},
    telemetry::LlmCallReport,
};

/// Makes the spans of runs. Called on the run's task: must not block.
pub trait Tracer: Send + Sync {
    /// The span of a run, or of a run that goes on (after a pause or a restart); `None` when
    /// spans go nowhere.
    fn start_run(&self, start: &RunSpanStart<'_>) -> Option<Arc<dyn RunSpan>>;
}

/// What a run's span is made from.
#[derive(Debug, Clone, Copy)]
pub struct RunSpanStart<'a> {
    pub run_id: Uuid,
    pub session_id: Uuid,
    /// The sub-agent's name; `None` for the agent itself.
    pub agent: Option<&'a str>,
    /// The model the run asks for; `None`: the configured one.
    pub model: Option<&'a str>,
    /// The W3C `traceparent` this run continues: an HTTP request's, the tool call that runs a
    /// sub-agent, or the run's own span before a pause or a restart.
    pub parent: Option<&'a str>,
}

/// A run's span, open while the run is driven.
pub trait RunSpan: Send + Sync {
    /// This span as a W3C `traceparent` (saved with the run, so that it goes on in this trace).
    fn traceparent(&self) -> Option<String>;
    /// A child span for one LLM call.
    fn chat(&self, request: &ModelRequest) -> Box<dyn ChatSpan>;
    /// A child span for one tool call.
    fn tool(&self, call: &ToolInvocation, about: &ToolAbout<'_>) -> Box<dyn ToolSpan>;
    /// A child span, ended at once, for a call refused before it ran (policy, arguments,
    /// duplicates, a denial): `record` says why.
    fn refused_call(&self, record: &ToolExecutionRecord, about: &ToolAbout<'_>);
    /// A child span, ended at once, for one guardrail's check (which took
    /// `report.duration_ms`).
    fn guardrail(&self, report: &crate::guardrail::GuardrailReport<'_>) {
        let _ = report;
    }
    /// The run stops being driven here (it ended, paused or was handed over).
    fn end(&self, outcome: &RunOutcome);
    /// The run could not begin (its session busy or unknown, the store unavailable): the span
    /// ends as an error of this code.
    fn refused(&self, code: &str, message: &str);
}

/// What a tool call's span says of its tool.
#[derive(Debug, Clone, Copy)]
pub struct ToolAbout<'a> {
    /// The tool's description, as the model reads it (empty for a tool that left the catalog).
    pub description: &'a str,
    pub kind: ToolKind,
}

/// Where a tool runs, in the GenAI conventions' words (`gen_ai.tool.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    /// Run by the agent, reaching out to a system of its own (an MCP server, a function of
    /// the program, a sub-agent): `extension`.
    Extension,
    /// Run by the run's client, which sends the result back (client tools): `function`.
    Function,
}

impl ToolKind {
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Extension => "extension",
            ToolKind::Function => "function",
        }
    }
}

/// One LLM call's span.
pub trait ChatSpan: Send {
    /// What the call brought, before the run reads it: `None` when the call was abandoned
    /// (cancelled).
    fn reply(&mut self, reply: Option<&Result<ModelReply, LlmError>>);
    /// Ends the span with the call's report (tokens, and the cost the run priced the reply at).
    fn end(self: Box<Self>, report: &LlmCallReport);
}

/// One tool call's span.
pub trait ToolSpan: Send {
    /// This span as a W3C `traceparent`, for what the tool calls (an MCP server, a sub-agent).
    fn traceparent(&self) -> Option<String>;
    fn end(self: Box<Self>, result: &ToolResult);
}

/// Makes no spans.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoTracer;

impl Tracer for NoTracer {
    fn start_run(&self, _start: &RunSpanStart<'_>) -> Option<Arc<dyn RunSpan>> {
        None
    }
}

/// The span of the run being driven, when there is one.
#[derive(Clone, Default)]
pub struct RunTrace(Option<Arc<dyn RunSpan>>);

impl RunTrace {
    pub fn start(tracer: &dyn Tracer, start: &RunSpanStart<'_>) -> Self {
        Self(tracer.start_run(start))
    }

    pub fn traceparent(&self) -> Option<String> {
        self.0.as_ref().and_then(|span| span.traceparent())
    }

    pub(crate) fn chat(&self, request: &ModelRequest) -> Option<Box<dyn ChatSpan>> {
        self.0.as_ref().map(|span| span.chat(request))
    }

    pub(crate) fn tool(
        &self,
        call: &ToolInvocation,
        about: &ToolAbout<'_>,
    ) -> Option<Box<dyn ToolSpan>> {
        self.0.as_ref().map(|span| span.tool(call, about))
    }

    pub(crate) fn refused_call(&self, record: &ToolExecutionRecord, about: &ToolAbout<'_>) {
        if let Some(span) = &self.0 {
            span.refused_call(record, about);
        }
    }

    pub(crate) fn guardrail(&self, report: &crate::guardrail::GuardrailReport<'_>) {
        if let Some(span) = &self.0 {
            span.guardrail(report);
        }
    }

    /// Whether spans are made: without, nothing need be prepared for them.
    pub(crate) fn is_on(&self) -> bool {
        self.0.is_some()
    }

    pub(crate) fn end(&self, outcome: &RunOutcome) {
        if let Some(span) = &self.0 {
            span.end(outcome);
        }
    }

    pub(crate) fn refused(&self, code: &str, message: &str) {
        if let Some(span) = &self.0 {
            span.refused(code, message);
        }
    }
}

impl std::fmt::Debug for RunTrace {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_tuple("RunTrace")
            .field(&self.traceparent())
            .finish()
    }
}
