//! What planning, clarification and review add to a run: the plan, whether the request was
//! clarified, the question a paused run waits on, and a log of each phase for the trace. Kept
//! whole in a paused run's snapshot.

use agentloop_protocol::{Plan, ToolExecutionRecord};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::text::one_line;

/// Tool calls the `<ToolCallHistory>` block shows (the latest ones).
const HISTORY_LINES: usize = 20;

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Guidance {
    pub plan: Option<Plan>,
    /// The user answered a question, or the plan said the request was clear: tools marked
    /// `requires_clarity` are offered.
    pub clarified: bool,
    /// The question a paused run waits on, when it came from the plan or a reviewer (`ask_user`
    /// calls wait in their batch).
    pub question: Option<PendingQuestion>,
    /// Tool calls since the last review.
    pub calls_since_review: u32,
    /// The review at the step limit was made.
    pub reviewed_at_cap: bool,
    /// What the forced summary must also say (the reviewer's reason to stop, or its question).
    pub finalize_note: Option<String>,
    /// A JSON reply (plan or review) that did not validate, and why: the second attempt shows
    /// both to the model.
    pub retry: Option<JsonRetry>,
    pub log: GuidanceLog,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct PendingQuestion {
    pub text: String,
    /// `plan` or `review`.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct JsonRetry {
    pub reply: String,
    pub problem: String,
}

/// What the trace of the run keeps of planning, clarification and review.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct GuidanceLog {
    pub notes: Vec<String>,
    pub clarifications: Vec<Clarification>,
    pub reviews: Vec<ReviewEntry>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Clarification {
    pub question: String,
    pub answer: String,
    /// `plan`, `review` or `ask_user`.
    pub source: String,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct ReviewEntry {
    pub iteration: u32,
    pub after_tool_calls: u32,
    pub action: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
}

impl Guidance {
    /// Whether the trace has anything of this to keep.
    pub fn is_empty(&self) -> bool {
        self.plan.is_none()
            && self.log.notes.is_empty()
            && self.log.clarifications.is_empty()
            && self.log.reviews.is_empty()
    }

    /// Adds the plan and the log to the trace's metadata.
    pub fn extend_trace(&self, metadata: &mut Value) {
        if let Some(plan) = &self.plan {
            metadata["plan"] = json!(plan);
        }
        if !self.log.clarifications.is_empty() {
            metadata["clarifications"] = json!(self.log.clarifications);
        }
        if !self.log.reviews.is_empty() {
            metadata["reviews"] = json!(self.log.reviews);
        }
        if !self.log.notes.is_empty() {
            metadata["notes"] = json!(self.log.notes);
        }
    }

    /// Lines of the trace's text: the notes and what the user answered.
    pub fn trace_lines(&self) -> String {
        let mut out = String::new();
        for note in &self.log.notes {
            out.push_str(&format!("Note: {note}\n"));
        }
        for clarification in &self.log.clarifications {
            out.push_str(&format!(
                "Asked: {} Answered: {}\n",
                one_line(&clarification.question, 200),
                one_line(&clarification.answer, 200)
            ));
        }
        for review in &self.log.reviews {
            out.push_str(&format!(
                "Review after {} tool calls: {}{}\n",
                review.after_tool_calls,
                review.action,
                review
                    .reason
                    .as_deref()
                    .map(|reason| format!(" ({})", one_line(reason, 200)))
                    .unwrap_or_default()
            ));
        }
        out
    }
}

/// The plan as the model reads it.
pub(crate) fn render_plan(plan: &Plan) -> String {
    let mut out = format!("Goal: {}\n", plan.goal);
    for task in &plan.sub_tasks {
        out.push_str(&format!(
            "- [{}] {}: {}",
            task.status.as_str(),
            task.id,
            task.description
        ));
        if !task.depends_on.is_empty() {
            out.push_str(&format!(" (after {})", task.depends_on.join(", ")));
        }
        out.push('\n');
    }
    out
}

/// The block injected after the stable system prompt: the plan, and what the tools did so far.
pub(crate) fn plan_block(plan: &Plan, records: &[ToolExecutionRecord]) -> String {
    let mut out = format!("<Plan>\n{}</Plan>\n<ToolCallHistory>\n", render_plan(plan));
    if records.is_empty() {
        out.push_str("No tool calls yet.\n");
    }
    let skip = records.len().saturating_sub(HISTORY_LINES);
    if skip > 0 {
        out.push_str(&format!("({skip} earlier calls not shown)\n"));
    }
    for (number, record) in records.iter().enumerate().skip(skip) {
        let detail = record
            .result
            .as_deref()
            .or(record.error.as_deref())
            .unwrap_or_default();
        let cost = record
            .cost_usd
            .map(|cost| format!(", ${cost:.4}"))
            .unwrap_or_default();
        out.push_str(&format!(
            "{}. {} ({}, {}ms{cost}): {}\n",
            number + 1,
            record.tool,
            record.status.as_str(),
            record.duration_ms,
            one_line(detail, 100)
        ));
    }
    out.push_str("</ToolCallHistory>\nKeep the plan current with write_plan as you progress.");
    out
}

#[cfg(test)]
mod tests {
    use agentloop_protocol::{SubTask, SubTaskStatus, ToolStatus};

    use super::*;

    fn plan() -> Plan {
        Plan {
            goal: "Report Q4".into(),
            sub_tasks: vec![
                SubTask {
                    id: "1".into(),
                    description: "Find the notes".into(),
                    status: SubTaskStatus::Done,
                    depends_on: vec![],
                },
                SubTask {
                    id: "2".into(),
                    description: "Summarise".into(),
                    status: SubTaskStatus::Pending,
                    depends_on: vec!["1".into()],
                },
            ],
            needs_clarification: false,
            clarification_question: None,
        }
    }

    fn record(index: usize) -> ToolExecutionRecord {
        ToolExecutionRecord {
            call_id: format!("c{index}"),
            iteration: 1,
            tool: "notes.search".into(),
            arguments: json!({}),
            started_at: chrono::Utc::now(),
            duration_ms: 3,
            status: ToolStatus::Success,
            result: Some(format!("result\nnumber {index}")),
            structured_result: None,
            error: None,
            cost_usd: None,
            logs: Vec::new(),
        }
    }

    #[test]
    fn the_block_shows_the_plan_and_the_latest_calls_on_one_line_each() {
        let records: Vec<_> = (0..25).map(record).collect();
        let block = plan_block(&plan(), &records);
        assert!(block.starts_with("<Plan>\nGoal: Report Q4\n"), "{block}");
        assert!(block.contains("- [done] 1: Find the notes\n"), "{block}");
        assert!(
            block.contains("- [pending] 2: Summarise (after 1)\n"),
            "{block}"
        );
        assert!(block.contains("(5 earlier calls not shown)"), "{block}");
        assert!(!block.contains("number 4\n"), "{block}");
        assert!(
            block.contains("25. notes.search (success, 3ms): result number 24\n"),
            "{block}"
        );
        assert!(block.contains("</ToolCallHistory>"), "{block}");
    }

    #[test]
    fn a_call_with_a_cost_shows_it_beside_its_duration() {
        let mut priced = record(0);
        priced.duration_ms = 1200;
        priced.cost_usd = Some(0.0023);
        let block = plan_block(&plan(), &[priced, record(1)]);
        assert!(
            block.contains("1. notes.search (success, 1200ms, $0.0023): result number 0\n"),
            "{block}"
        );
        assert!(
            block.contains("2. notes.search (success, 3ms): result number 1\n"),
            "{block}"
        );
    }

    #[test]
    fn an_empty_history_says_so() {
        assert!(plan_block(&plan(), &[]).contains("No tool calls yet."));
    }
}
