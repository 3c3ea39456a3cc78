//! Traces: a run's spans exported over OTLP/HTTP (protobuf), following OpenTelemetry's GenAI
//! semantic conventions. `[telemetry]` in `agentloop.toml` and the standard `OTEL_*` variables
//! say where; without an endpoint nothing is set up, and the agent makes no span at all.
//!
//! The exporter is the `otel` feature; a build without it reads `[telemetry]` but refuses to
//! start with an endpoint set.

#[cfg(feature = "otel")]
mod content;
#[cfg(feature = "otel")]
mod spans;

use std::sync::Arc;
#[cfg(feature = "otel")]
use std::time::Duration;

use agentloop_core::{InvalidSetting, Tracer};
#[cfg(feature = "otel")]
use opentelemetry_otlp::{Protocol, WithExportConfig};
#[cfg(feature = "otel")]
use opentelemetry_sdk::{Resource, trace::SdkTracerProvider};
use serde::{Deserialize, Serialize};

#[cfg(feature = "otel")]
pub use spans::OtelTracer;

/// `[telemetry]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// The collector's base URL (`http://127.0.0.1:4318`); spans go to `{it}/v1/traces`.
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` (used as it is) and `OTEL_EXPORTER_OTLP_ENDPOINT`
    /// override it.
    pub otlp_endpoint: Option<String>,
    /// Put messages, tool arguments and tool results on the spans (the conventions' opt-in
    /// attributes). They may hold anything a user or a tool wrote: off by default.
    pub capture_content: bool,
    /// The `service.name` of the spans; `OTEL_SERVICE_NAME` overrides it.
    pub service_name: String,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        Self {
            otlp_endpoint: None,
            capture_content: false,
            service_name: "agentloop".to_string(),
        }
    }
}

/// Where and how spans are exported, once the environment is applied.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceExport {
    /// The full URL spans are posted to (`.../v1/traces`).
    pub traces_url: String,
    pub service_name: String,
    pub capture_content: bool,
}

/// Why traces cannot be exported as configured.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TelemetryError {
    #[error(transparent)]
    Invalid(#[from] InvalidSetting),
    #[cfg(feature = "otel")]
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
    /// Traces are asked for, but this build has no exporter.
    #[cfg(not(feature = "otel"))]
    #[error(
        "traces are to be sent to {traces_url}, but this agentloop was built without its `otel` \
         feature: build it with that feature, or unset telemetry.otlp_endpoint and the \
         OTEL_EXPORTER_OTLP_* variables"
    )]
    NotBuilt { traces_url: String },
}

impl TelemetrySettings {
    /// The export these settings and the environment (`env`) ask for; `None` when no endpoint
    /// is set anywhere (no traces).
    pub fn export(
        &self,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceExport>, InvalidSetting> {
        let set = |name: &str| {
            env(name)
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        for variable in [
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
            "OTEL_EXPORTER_OTLP_PROTOCOL",
        ] {
            if let Some(protocol) = set(variable)
                && protocol != "http/protobuf"
            {
                return Err(InvalidSetting::new(
                    variable,
                    format!(
                        "{variable}={protocol} is not supported: agentloop exports traces over \
                         OTLP/HTTP with protobuf; set it to http/protobuf (or unset it) and point \
                         the endpoint at the collector's HTTP port (4318)"
                    ),
                ));
            }
        }
        let base = |url: &str| format!("{}/v1/traces", url.trim_end_matches('/'));
        let traces_url = if let Some(url) = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") {
            url
        } else if let Some(url) = set("OTEL_EXPORTER_OTLP_ENDPOINT") {
            base(&url)
        } else if let Some(url) = self.otlp_endpoint.as_deref().filter(|url| !url.is_empty()) {
            base(url)
        } else {
            return Ok(None);
        };
        if !(traces_url.starts_with("http://") || traces_url.starts_with("https://")) {
            return Err(InvalidSetting::new(
                "telemetry.otlp_endpoint",
                format!("the OTLP endpoint {traces_url:?} must be an http:// or https:// URL"),
            ));
        }
        Ok(Some(TraceExport {
            traces_url,
            service_name: set("OTEL_SERVICE_NAME").unwrap_or_else(|| self.service_name.clone()),
            capture_content: self.capture_content,
        }))
    }
}

/// Where a runtime's spans go: the exporter's pipeline, to flush before the process ends.
#[cfg(feature = "otel")]
#[derive(Clone)]
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: Arc<OtelTracer>,
}

#[cfg(feature = "otel")]
impl std::fmt::Debug for Traces {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Traces").finish_non_exhaustive()
    }
}

/// What the spans say about the model, besides what each call says.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelInfo {
    /// `gen_ai.provider.name`.
    pub provider: String,
    /// The configured model, for calls that do not name one.
    pub model: String,
    /// The LLM server's host and port (`server.address`, `server.port` of each `chat` span):
    /// `base_url`'s; `None` when the model is no server (the scripted one).
    pub server: Option<(String, u16)>,
}

impl ModelInfo {
    /// The host and port of `base_url` (the scheme's port when it names none).
    pub fn server_of(base_url: &str) -> Option<(String, u16)> {
        let url = reqwest::Url::parse(base_url).ok()?;
        Some((url.host_str()?.to_string(), url.port_or_known_default()?))
    }
}

#[cfg(feature = "otel")]
impl Traces {
    /// Starts the exporter (spans are sent in batches, from a thread of their own).
    pub fn start(export: &TraceExport, model: ModelInfo) -> Result<Traces, TelemetryError> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(export.traces_url.clone())
            .build()?;
        let resource = Resource::builder()
            .with_service_name(export.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = Arc::new(OtelTracer::new(&provider, export, model));
        Ok(Traces { provider, tracer })
    }

    /// The tracer to give the agent.
    pub fn tracer(&self) -> Arc<dyn Tracer> {
        self.tracer.clone()
    }

    /// Sends the spans that ended and waits for the collector's answer (at most the exporter's
    /// timeout). Runs off the async threads: the export blocks.
    pub async fn flush(&self) {
        let provider = self.provider.clone();
        let flushed = tokio::task::spawn_blocking(move || provider.force_flush()).await;
        if let Ok(Err(error)) = flushed {
            tracing::warn!(%error, "cannot send the last spans");
        }
    }

    /// Flushes, then stops the exporter.
    pub async fn shutdown(&self) {
        let provider = self.provider.clone();
        let stopped = tokio::task::spawn_blocking(move || {
            provider.shutdown_with_timeout(Duration::from_secs(5))
        })
        .await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "cannot send the last spans");
        }
    }
}

/// Where a runtime's spans go: in a build without the `otel` feature, nowhere (none can be
/// started).
#[cfg(not(feature = "otel"))]
#[derive(Debug, Clone)]
pub struct Traces {
    never: std::convert::Infallible,
}

#[cfg(not(feature = "otel"))]
impl Traces {
    /// Fails: this build has no exporter.
    pub fn start(export: &TraceExport, _model: ModelInfo) -> Result<Traces, TelemetryError> {
        Err(TelemetryError::NotBuilt {
            traces_url: export.traces_url.clone(),
        })
    }

    /// The tracer to give the agent.
    pub fn tracer(&self) -> Arc<dyn Tracer> {
        match self.never {}
    }

    /// Sends the spans that ended.
    pub async fn flush(&self) {
        match self.never {}
    }

    /// Flushes, then stops the exporter.
    pub async fn shutdown(&self) {
        match self.never {}
    }
}

#[cfg(test)]
mod tests;
