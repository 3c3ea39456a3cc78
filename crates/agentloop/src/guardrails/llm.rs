//! The `llm` guardrail: a classifier prompt sent to a model (the agent's LLM client, with the
//! guardrail's `model`), whose reply must hold the verdict `{"allow": bool, "reason": "..."}`.
//! The call goes through the run (`GuardrailRequest::call_model`): a chat span, and its usage
//! in the run's. A reply without such a verdict is an error (the rule's `fail` decides).

use std::{sync::Arc, time::Duration};

use agentloop_core::{
    CallPurpose, Llm, ModelRequest, ToolChoice, extract_object,
    guardrail::{Decision, Guardrail, GuardrailError, GuardrailRequest, GuardrailSide},
    protocol::ChatMessage,
};
use async_trait::async_trait;
use serde_json::Value;

/// Asks a model whether the text may pass.
pub struct LlmGuardrail {
    llm: Arc<dyn Llm>,
    model: Option<String>,
    prompt: String,
    timeout: Duration,
}

impl LlmGuardrail {
    pub fn new(
        llm: Arc<dyn Llm>,
        model: Option<String>,
        prompt: String,
        timeout: Duration,
    ) -> Self {
        Self {
            llm,
            model,
            prompt,
            timeout,
        }
    }

    fn request(&self, on: GuardrailSide, text: &str) -> ModelRequest {
        let what = match on {
            GuardrailSide::Input => "a user's request to an assistant",
            GuardrailSide::Output => "an assistant's answer to a user",
        };
        let system = format!(
            "You are a guardrail. You check {what} against this rule:\n\n{}\n\nReply with one \
             JSON object and nothing else: {{\"allow\": true}} when the text follows the rule, \
             {{\"allow\": false, \"reason\": \"...\"}} when it does not (the reason in a few \
             words, without quoting the text).",
            self.prompt.trim()
        );
        ModelRequest {
            model: self.model.clone(),
            messages: vec![
                Arc::new(ChatMessage::system(system)),
                Arc::new(ChatMessage::user(format!("<text>\n{text}\n</text>"))),
            ],
            tools: Vec::new(),
            tool_choice: ToolChoice::None,
            purpose: CallPurpose::Guardrail,
            output: None,
        }
    }
}

/// The verdict in the model's reply.
fn verdict(reply: &str) -> Result<Decision, GuardrailError> {
    let object = extract_object(reply).map_err(|error| {
        GuardrailError::new(format!(
            "the guardrail model's reply holds no verdict: {error}"
        ))
    })?;
    let allow = object
        .get("allow")
        .and_then(Value::as_bool)
        .ok_or_else(|| {
            GuardrailError::new(format!(
                "the guardrail model's verdict has no boolean `allow`: {object}"
            ))
        })?;
    if allow {
        return Ok(Decision::Allow);
    }
    let reason = match object.get("reason") {
        Some(Value::String(reason)) if !reason.trim().is_empty() => reason.trim().to_string(),
        None | Some(Value::Null) => "refused by the guardrail model".to_string(),
        Some(Value::String(_)) => "refused by the guardrail model".to_string(),
        Some(other) => {
            return Err(GuardrailError::new(format!(
                "the guardrail model's `reason` is not a string: {other}"
            )));
        }
    };
    Ok(Decision::Trip { reason })
}

#[async_trait]
impl Guardrail for LlmGuardrail {
    async fn check(&self, request: &GuardrailRequest<'_>) -> Result<Decision, GuardrailError> {
        let asked = self.request(request.on, request.text);
        let reply =
            tokio::time::timeout(self.timeout, request.call_model(self.llm.as_ref(), &asked))
                .await
                .map_err(|_| {
                    GuardrailError::new(format!(
                        "the guardrail model did not answer within {}s",
                        self.timeout.as_secs_f64()
                    ))
                })?
                .map_err(|error| {
                    GuardrailError::new(format!("the guardrail model failed: {error}"))
                        .caused_by(error)
                })?;
        verdict(reply.text().unwrap_or_default())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_verdict_is_read_from_the_reply_and_checked() {
        assert_eq!(verdict(r#"{"allow": true}"#).unwrap(), Decision::Allow);
        assert_eq!(
            verdict("```json\n{\"allow\": false, \"reason\": \"medical advice\"}\n```").unwrap(),
            Decision::Trip {
                reason: "medical advice".into()
            }
        );
        for bad in [
            "yes",
            r#"{"allow": "no"}"#,
            r#"{"verdict": true}"#,
            r#"{"allow": false, "reason": 3}"#,
        ] {
            assert!(verdict(bad).is_err(), "{bad}");
        }
    }
}
