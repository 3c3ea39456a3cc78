//! `[[guardrails]]`: checks on each run's question (`on = "input"`) or answer
//! (`on = "output"`), of three kinds: `regex` (deny and require patterns, in core), `webhook`
//! (a POST answered `{allow, reason}`) and `llm` (a classifier prompt whose verdict is JSON).
//! Each table becomes a core `GuardrailRule` with its `Guardrail`; docs/guardrails.md.

mod llm;
mod webhook;

use std::{sync::Arc, time::Duration};

use agentloop_core::{
    InvalidSetting, Llm,
    guardrail::{
        DEFAULT_RETRIES, FailMode, Guardrail, GuardrailAction, GuardrailRule, GuardrailSide,
        Guardrails, RegexGuardrail,
    },
};
use serde::{Deserialize, Serialize};

pub use self::llm::LlmGuardrail;
pub use self::webhook::WebhookGuardrail;

/// How long a `webhook` guardrail waits by default, in seconds.
pub const WEBHOOK_TIMEOUT_S: f64 = 5.0;
/// How long an `llm` guardrail waits by default, in seconds.
pub const LLM_TIMEOUT_S: f64 = 30.0;

/// What checks the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GuardrailKind {
    #[default]
    Regex,
    Webhook,
    Llm,
}

/// One `[[guardrails]]` table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct GuardrailConfig {
    /// Named in events, metrics and the message of a blocked run.
    pub name: String,
    pub kind: GuardrailKind,
    pub on: GuardrailSide,
    pub action: GuardrailAction,
    /// With `action = "retry"`: answers the model may write again (default 2).
    pub retries: Option<u32>,
    /// `webhook` and `llm`: whether a guardrail that cannot decide lets the text through.
    pub fail: FailMode,
    /// `regex`: patterns the text must not match.
    pub deny: Vec<String>,
    /// `regex`: patterns the text must match.
    pub require: Vec<String>,
    /// `webhook`: where `{on, text, run_id, session_id, user}` is POSTed.
    pub url: Option<String>,
    /// `webhook` (default 5) and `llm` (default 30): how long the check may take.
    pub timeout_s: Option<f64>,
    /// `llm`: the model asked (default: `llm.model`).
    pub model: Option<String>,
    /// `llm`: what the classifier checks, in words.
    pub prompt: Option<String>,
}

impl GuardrailConfig {
    /// Checks the table; `index` is its place among `[[guardrails]]`.
    pub fn validate(&self, index: usize, names: &[&str]) -> Result<(), InvalidSetting> {
        let key = |field: &str| format!("guardrails[{index}].{field}");
        let invalid = |field: &str, message: String| Err(InvalidSetting::new(key(field), message));
        let name = self.name.trim();
        if name.is_empty() {
            return invalid("name", format!("{} must name the guardrail", key("name")));
        }
        if names.iter().filter(|other| **other == name).count() > 1 {
            return invalid(
                "name",
                format!("two guardrails are named {name:?}; each needs its own name"),
            );
        }
        if self.on == GuardrailSide::Input && self.action == GuardrailAction::Retry {
            return invalid(
                "action",
                format!(
                    "{} = \"retry\" is for output guardrails: a question cannot be written \
                     again (use \"block\")",
                    key("action")
                ),
            );
        }
        if let Some(timeout) = self.timeout_s
            && !(timeout.is_finite() && timeout > 0.0)
        {
            return invalid(
                "timeout_s",
                format!("{} must be a number of seconds above 0", key("timeout_s")),
            );
        }
        match self.kind {
            GuardrailKind::Regex => {
                if self.deny.is_empty() && self.require.is_empty() {
                    return invalid(
                        "deny",
                        format!("the regex guardrail {name} needs `deny` or `require` patterns"),
                    );
                }
                if let Err(error) = RegexGuardrail::new(&self.deny, &self.require) {
                    return invalid(
                        "deny",
                        format!("a pattern of the guardrail {name} does not compile: {error}"),
                    );
                }
            }
            GuardrailKind::Webhook => {
                let url = self.url.as_deref().unwrap_or_default();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return invalid(
                        "url",
                        format!(
                            "the webhook guardrail {name} needs `url`, an http:// or https:// \
                             address (got {url:?})"
                        ),
                    );
                }
            }
            GuardrailKind::Llm => {
                if self.prompt.as_deref().unwrap_or_default().trim().is_empty() {
                    return invalid(
                        "prompt",
                        format!(
                            "the llm guardrail {name} needs `prompt`: what it checks, in words"
                        ),
                    );
                }
            }
        }
        Ok(())
    }

    fn rule(&self) -> GuardrailRule {
        GuardrailRule::new(self.name.trim(), self.on)
            .action(self.action)
            .retries(self.retries.unwrap_or(DEFAULT_RETRIES))
            .fail(self.fail)
    }

    fn timeout(&self, default: f64) -> Duration {
        Duration::from_secs_f64(self.timeout_s.unwrap_or(default))
    }
}

/// Checks every table.
pub fn validate(guardrails: &[GuardrailConfig]) -> Result<(), InvalidSetting> {
    let names: Vec<&str> = guardrails.iter().map(|g| g.name.trim()).collect();
    for (index, guardrail) in guardrails.iter().enumerate() {
        guardrail.validate(index, &names)?;
    }
    Ok(())
}

/// Why the guardrails could not be built.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GuardrailsError {
    #[error(transparent)]
    Invalid(#[from] InvalidSetting),
    #[error("cannot set up the HTTP client of the webhook guardrails: {0}")]
    Client(#[from] reqwest::Error),
}

/// The guardrails of `configs` (validated first); `llm` answers the `llm` kind.
pub fn build(
    configs: &[GuardrailConfig],
    llm: &Arc<dyn Llm>,
) -> Result<Guardrails, GuardrailsError> {
    validate(configs)?;
    let mut guardrails = Guardrails::default();
    let mut client = None;
    for config in configs {
        let guardrail: Arc<dyn Guardrail> = match config.kind {
            GuardrailKind::Regex => Arc::new(
                RegexGuardrail::new(&config.deny, &config.require).map_err(|error| {
                    InvalidSetting::new(format!("guardrails.{}", config.name), error.to_string())
                })?,
            ),
            GuardrailKind::Webhook => {
                let client = match &client {
                    Some(client) => reqwest::Client::clone(client),
                    None => client.insert(reqwest::Client::builder().build()?).clone(),
                };
                Arc::new(WebhookGuardrail::new(
                    client,
                    config.url.clone().unwrap_or_default(),
                    config.timeout(WEBHOOK_TIMEOUT_S),
                ))
            }
            GuardrailKind::Llm => Arc::new(LlmGuardrail::new(
                llm.clone(),
                config.model.clone(),
                config.prompt.clone().unwrap_or_default(),
                config.timeout(LLM_TIMEOUT_S),
            )),
        };
        guardrails.push(config.rule(), guardrail);
    }
    Ok(guardrails)
}

#[cfg(test)]
mod tests;
