//! Side effects as webhooks: a tool with `side_effect_webhook = URL` has, after each successful
//! call, `{tool, input, result, context}` POSTed to that URL. An answer `{"note": ...,
//! "refresh": true}` becomes a side effect; a failure becomes a `[Side Effect Error]` note and
//! never fails the run. The webhook is not retried: a side effect must not happen twice.

use std::time::Duration;

use agentloop_core::{CompletedCall, SideEffect, SideEffectError, ToolHook, short_of_resources};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};

/// How long a webhook may take.
const WEBHOOK_TIMEOUT: Duration = Duration::from_secs(10);

/// Calls the side-effect webhooks of `[tools."server.tool"]`.
pub struct WebhookSideEffects {
    client: reqwest::Client,
}

#[derive(Debug, Default, Deserialize)]
struct WebhookAnswer {
    #[serde(default)]
    note: Option<String>,
    #[serde(default)]
    refresh: bool,
}

impl WebhookSideEffects {
    pub fn new() -> Result<Self, reqwest::Error> {
        Ok(Self {
            client: reqwest::Client::builder()
                .timeout(WEBHOOK_TIMEOUT)
                .build()?,
        })
    }
}

#[async_trait]
impl ToolHook for WebhookSideEffects {
    async fn after_call(&self, call: &CompletedCall<'_>) -> Result<SideEffect, SideEffectError> {
        let Some(url) = &call.settings.side_effect_webhook else {
            return Ok(SideEffect::default());
        };
        let context = call.context;
        let body = json!({
            "tool": call.tool,
            "input": call.arguments,
            "result": call.output.structured.clone().unwrap_or_else(|| Value::String(call.output.text.clone())),
            "context": {
                "run_id": context.run_id,
                "session_id": context.session_id,
                "call_id": context.call_id,
                "user_id": context.user_id,
                "entity_id": context.entity_id,
                "workflow": context.workflow,
                "read_only": context.read_only,
            },
        });
        let response = self
            .client
            .post(url)
            // The same key if the webhook is ever called again for this call: it can deduplicate.
            .header("Idempotency-Key", context.idempotency_key())
            .json(&body)
            .send()
            .await
            .map_err(|error| {
                let mut cause: &dyn std::error::Error = &error;
                while let Some(source) = cause.source() {
                    cause = source;
                }
                let mut message = format!(
                    "the side-effect webhook of {} ({url}) failed: {cause}",
                    call.tool
                );
                // Not the webhook's fault: this process could not open the connection.
                if let Some(advice) = short_of_resources(&error) {
                    message = format!("{message} ({advice})");
                }
                SideEffectError::new(message).caused_by(error)
            })?;
        let status = response.status();
        let text = response.text().await.unwrap_or_default();
        if !status.is_success() {
            let excerpt: String = text.chars().take(200).collect();
            return Err(SideEffectError::new(format!(
                "the side-effect webhook of {} ({url}) answered HTTP {}: {excerpt}",
                call.tool,
                status.as_u16()
            )));
        }
        // An empty or non-JSON answer is a side effect with nothing to say.
        let answer: WebhookAnswer = serde_json::from_str(&text).unwrap_or_default();
        Ok(SideEffect {
            note: answer.note.filter(|note| !note.trim().is_empty()),
            refresh: answer.refresh,
        })
    }
}
