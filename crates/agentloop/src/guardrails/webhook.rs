//! The `webhook` guardrail: `{on, text, run_id, session_id, user}` is POSTed to `url`, which
//! answers `{"allow": bool, "reason": "..."}`. No answer in time, a status other than 2xx, or an
//! answer of another shape is an error (the rule's `fail` decides), never a verdict.

use std::time::Duration;

use agentloop_core::{
    guardrail::{Decision, Guardrail, GuardrailError, GuardrailRequest},
    short_of_resources,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::json;

/// POSTs each check to a URL.
pub struct WebhookGuardrail {
    client: reqwest::Client,
    url: String,
    timeout: Duration,
}

#[derive(Debug, Deserialize)]
struct Answer {
    allow: bool,
    #[serde(default)]
    reason: Option<String>,
}

impl WebhookGuardrail {
    pub fn new(client: reqwest::Client, url: String, timeout: Duration) -> Self {
        Self {
            client,
            url,
            timeout,
        }
    }
}

#[async_trait]
impl Guardrail for WebhookGuardrail {
    async fn check(&self, request: &GuardrailRequest<'_>) -> Result<Decision, GuardrailError> {
        let url = &self.url;
        let body = json!({
            "on": request.on,
            "text": request.text,
            "run_id": request.run_id,
            "session_id": request.session_id,
            "user": request.user_id,
        });
        let exchange = async {
            let response = self.client.post(url).json(&body).send().await?;
            let status = response.status();
            let text = response.text().await?;
            Ok::<_, reqwest::Error>((status, text))
        };
        let (status, text) = match tokio::time::timeout(self.timeout, exchange).await {
            Err(_) => {
                return Err(GuardrailError::new(format!(
                    "the webhook {url} did not answer within {}s",
                    self.timeout.as_secs_f64()
                )));
            }
            Ok(Err(error)) => {
                let mut message = format!("the webhook {url} failed: {error}");
                if let Some(advice) = short_of_resources(&error) {
                    message = format!("{message} ({advice})");
                }
                return Err(GuardrailError::new(message).caused_by(error));
            }
            Ok(Ok(answer)) => answer,
        };
        if !status.is_success() {
            return Err(GuardrailError::new(format!(
                "the webhook {url} answered HTTP {}",
                status.as_u16()
            )));
        }
        let answer: Answer = serde_json::from_str(&text).map_err(|error| {
            GuardrailError::new(format!(
                "the webhook {url} did not answer {{\"allow\": bool, \"reason\": string}}: {error}"
            ))
            .caused_by(error)
        })?;
        Ok(if answer.allow {
            Decision::Allow
        } else {
            Decision::Trip {
                reason: answer
                    .reason
                    .filter(|reason| !reason.trim().is_empty())
                    .unwrap_or_else(|| "refused by the webhook".to_string()),
            }
        })
    }
}
