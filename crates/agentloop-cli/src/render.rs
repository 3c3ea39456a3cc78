//! The live view of a run on stderr: one line per step, a spinner while waiting.

use std::{io::IsTerminal, time::Duration};

use agentloop::EventKind;
use indicatif::{ProgressBar, ProgressStyle};

/// Renders events as readable lines on stderr. On a terminal, a spinner shows what the run is
/// waiting for; elsewhere (pipes, CI logs) only the lines are written.
pub struct StepView {
    enabled: bool,
    spinner: Option<ProgressBar>,
    /// The first model of the run whose calls had no price (`llm_call` with a null cost).
    unpriced: Option<String>,
}

impl StepView {
    pub fn new(enabled: bool) -> Self {
        let spinner = (enabled && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::new_spinner();
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            bar.enable_steady_tick(Duration::from_millis(100));
            bar
        });
        Self {
            enabled,
            spinner,
            unpriced: None,
        }
    }

    /// What the run is waiting for now.
    pub fn status(&self, message: &str) {
        if let Some(spinner) = &self.spinner {
            spinner.set_message(message.to_string());
        }
    }

    /// A line that stays, above the spinner.
    pub fn note(&self, message: &str) {
        self.line(message);
    }

    pub fn warn(&self, message: &str) {
        self.line(&format!("warning: {message}"));
    }

    /// Stops the spinner for good (the answer is being printed).
    pub fn clear(&mut self) {
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
    }

    pub fn show(&mut self, event: &EventKind) {
        if !self.enabled {
            return;
        }
        match event {
            EventKind::Thinking { iteration } => {
                self.status(&format!("step {iteration}: waiting for the model"));
            }
            EventKind::LlmCall {
                model,
                cost_usd: None,
                ..
            } if self.unpriced.is_none() => {
                self.unpriced = Some(model.clone().unwrap_or_else(|| "the model".to_string()));
            }
            EventKind::ToolSelected {
                iteration,
                tool,
                arguments,
                ..
            } => {
                let arguments = agentloop::core::machine::one_line(&arguments.to_string(), 120);
                self.line(&format!("[{iteration}] → {tool} {arguments}"));
                self.status(&format!("step {iteration}: running {tool}"));
            }
            EventKind::ToolExecuted {
                tool,
                status,
                duration_ms,
                error,
                ..
            } => {
                let mark = match status {
                    agentloop::ToolStatus::Success => "✓",
                    agentloop::ToolStatus::Error => "✗",
                    agentloop::ToolStatus::Blocked => "⊘",
                    agentloop::ToolStatus::Skipped => "↺",
                };
                let detail = error
                    .as_deref()
                    .map(|error| format!(": {}", agentloop::core::machine::one_line(error, 160)))
                    .unwrap_or_default();
                self.line(&format!(
                    "    {mark} {tool} {} in {duration_ms} ms{detail}",
                    status.as_str()
                ));
            }
            EventKind::SideEffect { tool, note, .. } => {
                self.line(&format!("    ↳ {tool}: {note}"));
            }
            // On the spinner: progress passes, it does not stay.
            EventKind::ToolProgress {
                tool,
                progress,
                total,
                message,
                ..
            } => {
                let done = match total {
                    Some(total) if *total > 0.0 => format!("{:.0}%", progress / total * 100.0),
                    _ => format!("{progress}"),
                };
                let message = message
                    .as_deref()
                    .map(|m| format!(": {m}"))
                    .unwrap_or_default();
                self.status(&format!("{tool} {done}{message}"));
            }
            EventKind::InputRequired {
                calls,
                question,
                elicitation,
                ..
            } => {
                self.clear();
                if elicitation.is_some() {
                    // The prompt shows it.
                    return;
                }
                match question {
                    Some(question) if calls.is_empty() => eprintln!("? {question}"),
                    _ => eprintln!(
                        "! {} waiting for your approval",
                        count(calls.len() as u64, "call")
                    ),
                }
            }
            EventKind::PlanUpdated { plan } => {
                let mut text = format!("plan: {}", plan.goal);
                for task in &plan.sub_tasks {
                    let mark = match task.status {
                        agentloop::core::protocol::SubTaskStatus::Done => "✓",
                        agentloop::core::protocol::SubTaskStatus::Blocked => "⊘",
                        agentloop::core::protocol::SubTaskStatus::Pending => "·",
                    };
                    text.push_str(&format!("\n    {mark} {} {}", task.id, task.description));
                }
                self.line(&text);
            }
            EventKind::DuplicateDetected { tool, .. } => {
                self.line(&format!("    ↺ {tool}: repeated call, not run again"));
            }
            EventKind::ForcedFinalize { reason } => {
                self.line(&format!(
                    "! no more tool calls ({}): asking for the answer",
                    reason.as_str()
                ));
                self.status("waiting for the answer");
            }
            EventKind::GuardrailTripped {
                name,
                on,
                reason,
                action,
            } => {
                let then = match action {
                    agentloop::core::protocol::GuardrailAction::Retry => "asking again",
                    agentloop::core::protocol::GuardrailAction::Block => "blocked",
                };
                self.line(&format!(
                    "⊘ guardrail {name} ({}): {}; {then}",
                    on.as_str(),
                    agentloop::core::machine::one_line(reason, 160)
                ));
            }
            EventKind::AnswerRetracted { name } => {
                self.line(&format!(
                    "⊘ the text above was retracted (guardrail {name})"
                ));
            }
            EventKind::Error { message, .. } => {
                self.clear();
                eprintln!("error: {message}");
            }
            EventKind::Done {
                status,
                iterations,
                tools_used,
                usage,
                ..
            } => {
                self.clear();
                eprintln!(
                    "{} after {}, {}, {}, {}",
                    status.as_str(),
                    count(u64::from(*iterations), "step"),
                    count(u64::from(*tools_used), "tool call"),
                    count(usage.total(), "token"),
                    cost_text(usage, self.unpriced.as_deref())
                );
            }
            _ => {}
        }
    }

    /// A sub-agent's event: its tool calls, indented under the call that started it.
    pub fn show_nested(&self, event: &EventKind) {
        if !self.enabled {
            return;
        }
        match event {
            EventKind::ToolSelected {
                tool, arguments, ..
            } => {
                let arguments = agentloop::core::machine::one_line(&arguments.to_string(), 100);
                self.line(&format!("      ↳ {tool} {arguments}"));
                self.status(&format!("sub-agent running {tool}"));
            }
            EventKind::ToolExecuted {
                tool,
                status,
                duration_ms,
                ..
            } => {
                self.line(&format!(
                    "        {tool} {} in {duration_ms} ms",
                    status.as_str()
                ));
            }
            EventKind::Thinking { .. } => self.status("sub-agent waiting for the model"),
            _ => {}
        }
    }

    fn line(&self, text: &str) {
        match &self.spinner {
            Some(spinner) => spinner.println(text),
            None if self.enabled => eprintln!("{text}"),
            None => {}
        }
    }
}

/// An error and its causes on one line, without repeating a cause already in the message.
pub fn error_chain(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// What a run cost, for people: `$0.0123`, or why it is not known (`unpriced` names a model
/// without a price, when the run saw one).
pub fn cost_text(usage: &agentloop::Usage, unpriced: Option<&str>) -> String {
    match (usage.cost_complete, usage.cost_usd) {
        (true, Some(cost)) => format!("${cost:.4}"),
        _ => match unpriced {
            Some(model) => format!("cost unknown: no price for {model}"),
            None => "cost unknown".to_string(),
        },
    }
}

/// "1 step", "2 steps".
pub fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    #[test]
    fn the_cost_is_shown_or_said_to_be_unknown_with_the_model_without_a_price() {
        let mut usage = agentloop::Usage::nothing_spent();
        usage.cost_usd = Some(0.012_34);
        assert_eq!(super::cost_text(&usage, None), "$0.0123");
        usage.cost_complete = false;
        assert_eq!(
            super::cost_text(&usage, Some("gpt-5")),
            "cost unknown: no price for gpt-5"
        );
        assert_eq!(super::cost_text(&usage, None), "cost unknown");
    }
}
