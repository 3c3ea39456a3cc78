//! The `[agent]` and `[tools."server.tool"]` sections of the configuration.

use std::{path::PathBuf, time::Duration};

use serde::{Deserialize, Serialize};

pub use crate::invalid::InvalidSetting;

/// Limits and behaviour of the loop (`[agent]` in `agentloop.toml`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AgentSettings {
    /// Sent first on every LLM call of a run, unchanged.
    pub system_prompt: String,
    /// LLM calls that may ask for tools before the forced summary.
    pub max_iterations: u32,
    /// Questions and answers of the session a run sees (with the tool calls between them).
    pub history_messages: usize,
    /// The most tokens sent to the LLM in one call; the oldest messages leave first.
    pub context_tokens: usize,
    /// Characters of a tool result the model sees; the record keeps the whole result.
    pub tool_output_max_chars: usize,
    /// Tool calls of one reply that run at the same time.
    pub parallel_tools: usize,
    /// Failed tool calls in a row that stop the run from calling tools.
    pub max_consecutive_failures: u32,
    /// Failures in a row after which a tool is no longer offered in the run.
    pub tool_failure_limit: u32,
    /// Default time limit of a tool call, in seconds (per tool: `[tools."x"] timeout_s`).
    pub tool_timeout_s: f64,
    /// A Markdown file with one `## server.tool` section per tool, extending its description.
    pub tool_descriptions: Option<PathBuf>,
    /// How long starting waits for MCP servers; slower ones join when ready (each within its
    /// own `startup_timeout_s`), so a slow or dead server never holds a run longer.
    pub tools_wait_s: f64,
    /// How long a step the store refuses (it is down or unreachable) is tried again before the
    /// run ends failed with `store_unavailable`.
    pub store_retry_s: f64,
    /// Offer the built-in `ask_user` tool: the model may pause the run to ask the user.
    pub ask_user: bool,
    /// `[agent.planning]`: a plan before the loop.
    pub planning: PlanningSettings,
    /// `[agent.review]`: a reviewer every few tool calls.
    pub review: ReviewSettings,
    /// `[agent.budget]`: what one run may spend.
    pub budget: Budget,
    /// The JSON Schema of every run's answer (typed answers): inline, or a JSON file's path.
    pub output_schema: Option<crate::output::OutputSchemaSetting>,
    /// The schema's name, sent to providers that want one.
    pub output_name: Option<String>,
    /// Ask the provider to hold the model to the schema exactly (OpenAI's `strict`).
    pub output_strict: bool,
    /// How the model is asked for the typed answer; default: the best the provider supports
    /// (chosen by the facade).
    pub output_mode: Option<crate::output::OutputMode>,
    /// Invalid typed answers sent back to the model before the run fails `output_invalid`.
    pub output_retries: u32,
    /// `[agent.attachments]`: limits on a message's images and files.
    pub attachments: AttachmentSettings,
    /// The price table (`[prices."MODEL"]`, loaded by the facade) and the configured model:
    /// what each LLM call of a run costs.
    #[serde(skip)]
    pub pricing: crate::cost::Pricing,
    /// How the answer reaches clients when output guardrails check it: held until they pass
    /// (`hold`), or streamed and retracted if one trips (`after`).
    pub guardrail_mode: crate::guardrail::GuardrailMode,
    /// The guardrails of the agent's runs (`[[guardrails]]`, built by the facade; or added by
    /// a program with [`crate::guardrail::Guardrails::push`]).
    #[serde(skip)]
    pub guardrails: crate::guardrail::Guardrails,
}

/// What the model is given of attachments (`[agent.attachments] model`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ModelAttachments {
    /// The model reads images and files: each goes in the provider's own form.
    #[default]
    Native,
    /// A text-only model: each attachment is a line of text in the message
    /// (`[attachment: name, type, size]`).
    Note,
    /// A text-only model: a request with attachments is refused (400 `attachments_unsupported`).
    Refuse,
}

/// `[agent.attachments]`: limits on a message's images and files.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AttachmentSettings {
    /// The most bytes of one attachment.
    pub max_bytes: u64,
    /// The most bytes of all the attachments of one message.
    pub max_total_bytes: u64,
    /// The most attachments of one message.
    pub max_count: usize,
    /// What the model is given of them.
    pub model: ModelAttachments,
}

impl Default for AttachmentSettings {
    fn default() -> Self {
        Self {
            max_bytes: 20 * 1024 * 1024,
            max_total_bytes: 50 * 1024 * 1024,
            max_count: 10,
            model: ModelAttachments::Native,
        }
    }
}

impl AttachmentSettings {
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        for (key, value) in [
            ("agent.attachments.max_bytes", self.max_bytes),
            ("agent.attachments.max_total_bytes", self.max_total_bytes),
        ] {
            if value == 0 {
                return Err(InvalidSetting::new(
                    key,
                    format!("{key} must be at least 1"),
                ));
            }
        }
        Ok(())
    }

    /// Bytes the decoded attachments of one message may reach: what a reader of a request body
    /// may accept before the rest is checked (base64 makes 4 characters of 3 bytes).
    pub fn max_encoded_total(&self) -> u64 {
        self.max_total_bytes.saturating_mul(4) / 3 + 1024
    }
}

/// What one run may spend (`[agent.budget]`, and a request's `budget`, which may only lower
/// it). When the next LLM call would go over it, the loop stops calling tools and forces the
/// summary (`forced_finalize` with reason `budget`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Tokens of the run's LLM calls, input and output.
    pub max_tokens: Option<u64>,
    /// USD, from the price table.
    pub max_cost_usd: Option<f64>,
}

impl Budget {
    /// This budget lowered by `request`'s limits: a request never raises one (a higher value
    /// is clamped to the configured one).
    pub fn lowered_by(self, request: Budget) -> Budget {
        Budget {
            max_tokens: lower(self.max_tokens, request.max_tokens, u64::min),
            max_cost_usd: lower(self.max_cost_usd, request.max_cost_usd, f64::min),
        }
    }

    pub fn is_unlimited(&self) -> bool {
        self.max_tokens.is_none() && self.max_cost_usd.is_none()
    }

    /// Checks the limits; `prefix` names where they were written (`agent.budget`, `budget`).
    pub fn validate(&self, prefix: &str) -> Result<(), InvalidSetting> {
        if self.max_tokens == Some(0) {
            let key = format!("{prefix}.max_tokens");
            return Err(InvalidSetting::new(
                key.clone(),
                format!("{key} must be at least 1"),
            ));
        }
        if let Some(cost) = self.max_cost_usd
            && !(cost.is_finite() && cost > 0.0)
        {
            let key = format!("{prefix}.max_cost_usd");
            return Err(InvalidSetting::new(
                key.clone(),
                format!("{key} must be an amount in USD above 0 (got {cost})"),
            ));
        }
        Ok(())
    }
}

fn lower<T: Copy>(configured: Option<T>, requested: Option<T>, min: fn(T, T) -> T) -> Option<T> {
    match (configured, requested) {
        (Some(configured), Some(requested)) => Some(min(configured, requested)),
        (configured, requested) => configured.or(requested),
    }
}

/// `[agent.planning]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PlanningSettings {
    /// Make a plan (goal, sub-tasks, whether to ask first) before the first step.
    pub enabled: bool,
    /// A cheaper or faster model for the plan; default: the run's model.
    pub model: Option<String>,
}

/// `[agent.review]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReviewSettings {
    /// Review the progress after this many tool calls (and at the step limit).
    pub every_n_tool_calls: Option<u32>,
    /// A model for the reviewer; default: the run's model.
    pub model: Option<String>,
}

impl Default for AgentSettings {
    fn default() -> Self {
        Self {
            system_prompt: "You are a helpful copilot. Use the tools to complete the task."
                .to_string(),
            max_iterations: 8,
            history_messages: 10,
            context_tokens: 32_000,
            tool_output_max_chars: 16_000,
            parallel_tools: 4,
            max_consecutive_failures: 2,
            tool_failure_limit: 3,
            tool_timeout_s: 60.0,
            tool_descriptions: None,
            tools_wait_s: 10.0,
            store_retry_s: 10.0,
            ask_user: false,
            planning: PlanningSettings::default(),
            review: ReviewSettings::default(),
            budget: Budget::default(),
            output_schema: None,
            output_name: None,
            output_strict: false,
            output_mode: None,
            output_retries: crate::output::DEFAULT_OUTPUT_RETRIES,
            attachments: Default::default(),
            pricing: crate::cost::Pricing::default(),
            guardrail_mode: Default::default(),
            guardrails: Default::default(),
        }
    }
}

impl AgentSettings {
    /// The typed answer every run of this agent gives (`[agent] output_schema`), checked; its
    /// mode the configured one, else `tool`. A schema still named by its file (not loaded by
    /// the configuration) is an error.
    pub fn typed_output(&self) -> Result<Option<crate::output::TypedOutput>, InvalidSetting> {
        let Some(schema) = &self.output_schema else {
            return Ok(None);
        };
        let schema = match schema {
            crate::output::OutputSchemaSetting::Inline(schema) => {
                serde_json::Value::Object(schema.clone())
            }
            crate::output::OutputSchemaSetting::File(path) => {
                return Err(InvalidSetting::new(
                    "agent.output_schema",
                    format!(
                        "agent.output_schema names the file {} which was not read",
                        path.display()
                    ),
                ));
            }
        };
        let spec = crate::output::OutputSpec {
            name: self
                .output_name
                .clone()
                .unwrap_or_else(|| String::from("answer")),
            schema,
            strict: self.output_strict,
        };
        crate::output::check_spec(&spec, "agent.output_schema")
            .map_err(|invalid| InvalidSetting::new(invalid.key, invalid.message))?;
        Ok(Some(crate::output::TypedOutput {
            spec,
            mode: self.output_mode.unwrap_or(crate::output::OutputMode::Tool),
            retries: self.output_retries,
        }))
    }

    /// A request's own output spec with this agent's mode and retries.
    pub fn typed_output_for(&self, spec: crate::output::OutputSpec) -> crate::output::TypedOutput {
        crate::output::TypedOutput {
            spec,
            mode: self.output_mode.unwrap_or(crate::output::OutputMode::Tool),
            retries: self.output_retries,
        }
    }
}

impl AgentSettings {
    /// Checks the values a TOML parser cannot; the message names the key and what it accepts.
    pub fn validate(&self) -> Result<(), InvalidSetting> {
        let positive = [
            ("agent.max_iterations", self.max_iterations as usize),
            ("agent.parallel_tools", self.parallel_tools),
            (
                "agent.max_consecutive_failures",
                self.max_consecutive_failures as usize,
            ),
            ("agent.tool_failure_limit", self.tool_failure_limit as usize),
        ];
        for (key, value) in positive {
            if value == 0 {
                return Err(InvalidSetting::new(
                    key,
                    format!("{key} must be at least 1"),
                ));
            }
        }
        if self.context_tokens < 256 {
            return Err(InvalidSetting::new(
                "agent.context_tokens",
                format!(
                    "agent.context_tokens must be at least 256 (got {})",
                    self.context_tokens
                ),
            ));
        }
        if self.tool_output_max_chars < 100 {
            return Err(InvalidSetting::new(
                "agent.tool_output_max_chars",
                format!(
                    "agent.tool_output_max_chars must be at least 100 (got {})",
                    self.tool_output_max_chars
                ),
            ));
        }
        check_timeout("agent.tool_timeout_s", self.tool_timeout_s)?;
        self.typed_output()?;
        if self.review.every_n_tool_calls == Some(0) {
            return Err(InvalidSetting::new(
                "agent.review.every_n_tool_calls",
                "agent.review.every_n_tool_calls must be at least 1",
            ));
        }
        self.budget.validate("agent.budget")?;
        self.attachments.validate()?;
        if !(self.tools_wait_s.is_finite() && (0.0..=3600.0).contains(&self.tools_wait_s)) {
            return Err(InvalidSetting::new(
                "agent.tools_wait_s",
                format!(
                    "agent.tools_wait_s must be between 0 and 3600 seconds (got {})",
                    self.tools_wait_s
                ),
            ));
        }
        if !(self.store_retry_s.is_finite() && (0.0..=600.0).contains(&self.store_retry_s)) {
            return Err(InvalidSetting::new(
                "agent.store_retry_s",
                format!(
                    "agent.store_retry_s must be between 0 and 600 seconds (got {})",
                    self.store_retry_s
                ),
            ));
        }
        Ok(())
    }

    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs_f64(self.tool_timeout_s)
    }

    pub fn store_retry(&self) -> Duration {
        Duration::from_secs_f64(self.store_retry_s)
    }
}

/// What to do with a call whose outcome a crash left unknown (`on_unknown_outcome`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownOutcome {
    /// The model gets a tool error with code `outcome_unknown`.
    #[default]
    TellModel,
    /// The run pauses with an approval request for the call.
    Ask,
}

/// Per-tool overrides (`[tools."server.tool"]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolSettings {
    /// Time limit of a call of this tool, in seconds: since the call began, or since it last
    /// reported progress (MCP `notifications/progress`).
    pub timeout_s: Option<f64>,
    /// The longest a call of this tool may take in all, however often it reports progress;
    /// unlimited when absent (`timeout_s` alone then bounds a call that reports nothing).
    pub max_duration_s: Option<f64>,
    /// Whether the tool changes data; default: from its MCP annotations (`readOnlyHint`).
    pub mutating: Option<bool>,
    /// Whether a second call with the same arguments has no further effect, so that a call a
    /// crash cut off may run again; default: from its MCP annotations (`idempotentHint`).
    pub idempotent: Option<bool>,
    /// What happens to a call of a mutating, non-idempotent tool that a crash cut off (it may
    /// or may not have taken effect): the model is told (`tell_model`, the default), or the
    /// run pauses for a human to approve running it again (`ask`).
    pub on_unknown_outcome: UnknownOutcome,
    /// After each successful call, `{tool, input, result, context}` is POSTed here; an answer
    /// `{"note": ..., "refresh": true}` becomes a side effect.
    pub side_effect_webhook: Option<String>,
    /// A successful call ends the run: its result's `summary` (or its text) is the answer, with
    /// no further LLM call.
    pub finalize: bool,
    /// A call pauses the run until a human approves or denies it.
    pub needs_approval: bool,
    /// Not offered until the request was clarified (an answer to a question) or the plan said
    /// no clarification was needed.
    pub requires_clarity: bool,
}

impl ToolSettings {
    pub fn validate(&self, tool: &str) -> Result<(), InvalidSetting> {
        if let Some(seconds) = self.timeout_s {
            check_timeout(&format!("tools.\"{tool}\".timeout_s"), seconds)?;
        }
        if let Some(seconds) = self.max_duration_s {
            check_timeout(&format!("tools.\"{tool}\".max_duration_s"), seconds)?;
        }
        if let Some(url) = &self.side_effect_webhook
            && !(url.starts_with("http://") || url.starts_with("https://"))
        {
            let key = format!("tools.\"{tool}\".side_effect_webhook");
            let message = format!("{key} must be an http(s) URL, got {url:?}");
            return Err(InvalidSetting::new(key, message));
        }
        Ok(())
    }
}

fn check_timeout(key: &str, seconds: f64) -> Result<(), InvalidSetting> {
    if seconds.is_finite() && seconds > 0.0 && seconds <= 86_400.0 {
        Ok(())
    } else {
        Err(InvalidSetting::new(
            key,
            format!("{key} must be a number of seconds between 0 and 86400 (got {seconds})"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_lowers_a_budget_and_never_raises_it() {
        let configured = Budget {
            max_tokens: Some(10_000),
            max_cost_usd: None,
        };
        let lowered = configured.lowered_by(Budget {
            max_tokens: Some(50_000),
            max_cost_usd: Some(0.10),
        });
        assert_eq!(lowered.max_tokens, Some(10_000));
        assert_eq!(lowered.max_cost_usd, Some(0.10));
        let lowered = configured.lowered_by(Budget {
            max_tokens: Some(500),
            max_cost_usd: None,
        });
        assert_eq!(lowered.max_tokens, Some(500));
        assert!(configured.lowered_by(Budget::default()) == configured);
    }

    #[test]
    fn budgets_must_be_positive() {
        let zero = Budget {
            max_tokens: Some(0),
            max_cost_usd: None,
        };
        assert_eq!(
            zero.validate("budget").unwrap_err().key,
            "budget.max_tokens"
        );
        let negative = AgentSettings {
            budget: Budget {
                max_tokens: None,
                max_cost_usd: Some(-1.0),
            },
            ..AgentSettings::default()
        };
        assert_eq!(
            negative.validate().unwrap_err().key,
            "agent.budget.max_cost_usd"
        );
    }

    #[test]
    fn defaults_are_valid() {
        assert_eq!(AgentSettings::default().validate(), Ok(()));
    }

    #[test]
    fn zero_limits_are_refused_with_the_key_named() {
        let settings = AgentSettings {
            parallel_tools: 0,
            ..AgentSettings::default()
        };
        let error = settings.validate().unwrap_err();
        assert_eq!(error.key, "agent.parallel_tools");
        assert!(error.message.contains("agent.parallel_tools"), "{error}");
    }

    #[test]
    fn negative_timeouts_are_refused() {
        let settings = ToolSettings {
            timeout_s: Some(-1.0),
            ..ToolSettings::default()
        };
        assert!(
            settings
                .validate("a.b")
                .unwrap_err()
                .message
                .contains("tools.\"a.b\".timeout_s")
        );
    }
}
