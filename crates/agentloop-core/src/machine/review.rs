//! Review: every `agent.review.every_n_tool_calls` tool calls, and once at the step limit, a
//! reviewer call reads the plan, the tool history and the latest results and answers one
//! validated JSON verdict: `continue`, `replan` (a new plan), `ask_user` (a question) or `stop`
//! (a reason). A verdict that does not validate is sent back once; a second failure counts as
//! `continue` and is noted in the trace.

use std::sync::LazyLock;

use agentloop_protocol::{FinalizeReason, Plan};
use schemars::JsonSchema;
use serde::Deserialize;

use super::{
    Phase, RunMachine, Step,
    guidance::{ReviewEntry, render_plan},
    planning::{PlanProblem, check_plan},
    schemas::{self, Compiled},
    text::{one_line, records_digest},
};
use crate::{
    catalog::SchemaViolations,
    json_text::{ObjectError, find_object},
    llm::{CallPurpose, ModelReply},
    tool::schema_for,
};

/// A reviewer's verdict; its JSON Schema is derived from this type: each action needs its field.
#[derive(Debug, Deserialize, JsonSchema)]
#[schemars(extend("allOf" = [
    {"if": {"properties": {"action": {"const": "replan"}}},
     "then": {"required": ["plan"]}},
    {"if": {"properties": {"action": {"const": "ask_user"}}},
     "then": {"required": ["question"], "properties": {"question": {"minLength": 1}}}},
    {"if": {"properties": {"action": {"const": "stop"}}},
     "then": {"required": ["reason"], "properties": {"reason": {"minLength": 1}}}}
]))]
pub(crate) struct Verdict {
    action: Action,
    reason: Option<String>,
    question: Option<String>,
    plan: Option<Plan>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Action {
    Continue,
    Replan,
    AskUser,
    Stop,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Action::Continue => "continue",
            Action::Replan => "replan",
            Action::AskUser => "ask_user",
            Action::Stop => "stop",
        }
    }
}

impl RunMachine {
    /// Whether a review is due before the next step (`at_cap`: the step limit is reached).
    pub(super) fn review_due(&self, at_cap: bool) -> bool {
        let Some(every) = self.settings.review.every_n_tool_calls else {
            return false;
        };
        if at_cap {
            !self.state.guidance.reviewed_at_cap && self.state.tools_used > 0
        } else {
            self.state.guidance.calls_since_review >= every
        }
    }

    pub(super) fn begin_review(&mut self, at_cap: bool) -> Step {
        self.state.guidance.calls_since_review = 0;
        self.state.guidance.reviewed_at_cap |= at_cap;
        self.state.phase = Phase::AwaitingReview;
        self.review_request()
    }

    pub(super) fn review_request(&self) -> Step {
        let model = self.settings.review.model.clone();
        Step::CallModel(self.json_request(CallPurpose::Review, model, self.review_instruction()))
    }

    pub(super) fn on_review_reply(&mut self, reply: ModelReply) -> Step {
        let text = reply.content.unwrap_or_default();
        let verdict = match parse_verdict(&text) {
            Ok(verdict) => verdict,
            Err(problem) if self.keep_for_retry(text, &problem) => return self.review_request(),
            Err(problem) => {
                self.state.guidance.log.notes.push(format!(
                    "A review was skipped: the reviewer's reply was invalid twice ({}).",
                    one_line(&problem.to_string(), 300)
                ));
                return self.next_iteration();
            }
        };
        self.state.guidance.retry = None;
        let at_cap = self.state.iteration >= self.state.input.max_iterations;
        self.state.guidance.log.reviews.push(ReviewEntry {
            iteration: self.state.iteration,
            after_tool_calls: self.state.tools_used,
            action: verdict.action.as_str().to_string(),
            reason: verdict.reason.clone(),
            question: verdict.question.clone(),
        });
        match verdict.action {
            Action::Continue => self.next_iteration(),
            Action::Replan => {
                let question = verdict
                    .plan
                    .as_ref()
                    .filter(|plan| plan.needs_clarification)
                    .and_then(|plan| plan.clarification_question.clone());
                if let Some(plan) = verdict.plan {
                    self.set_plan(plan);
                }
                match question {
                    // The new plan needs the user first (at the cap, the summary asks).
                    Some(question) if !at_cap => self.ask(question, "review"),
                    Some(question) => {
                        self.state.guidance.finalize_note =
                            Some(format!("End the answer by asking the user: {question}"));
                        self.next_iteration()
                    }
                    None => self.next_iteration(),
                }
            }
            Action::AskUser => {
                let question = verdict.question.unwrap_or_default();
                if at_cap {
                    // No step is left to use the answer: the summary asks it instead.
                    self.state.guidance.finalize_note =
                        Some(format!("End the answer by asking the user: {question}"));
                    self.next_iteration()
                } else {
                    self.ask(question, "review")
                }
            }
            Action::Stop => {
                let reason = verdict.reason.unwrap_or_default();
                self.state.guidance.finalize_note =
                    Some(format!("The reviewer stopped the work: {reason}"));
                self.force_finalize(FinalizeReason::ReviewStop)
            }
        }
    }

    fn review_instruction(&self) -> String {
        let plan = match &self.state.guidance.plan {
            Some(plan) => render_plan(plan),
            None => "(no plan)\n".to_string(),
        };
        let history = if self.state.records.is_empty() {
            "(none)\n".to_string()
        } else {
            records_digest(&self.state.records)
        };
        format!(
            "Stop working on the request for a moment and review the progress so far, as a \
             critical reviewer.\nThe plan:\n{plan}\nThe tool calls so far:\n{history}\nStep {} of \
             at most {}.\nDecide what happens next and answer with one JSON object and nothing \
             else:\n- {{\"action\": \"continue\", \"reason\": \"...\"}} when the work is on \
             track;\n- {{\"action\": \"replan\", \"reason\": \"...\", \"plan\": {{\"goal\": \
             \"...\", \"sub_tasks\": [{{\"id\": \"1\", \"description\": \"...\", \"status\": \
             \"pending\", \"depends_on\": []}}], \"needs_clarification\": false}}}} when the plan \
             no longer fits what was found;\n- {{\"action\": \"ask_user\", \"question\": \
             \"...\"}} when only the user can settle what to do;\n- {{\"action\": \"stop\", \
             \"reason\": \"...\"}} when going on cannot help (the data is not there, the tools \
             keep failing, or the request is answered).",
            self.state.iteration, self.state.input.max_iterations
        )
    }
}

static VERDICT: LazyLock<Compiled> = LazyLock::new(|| schemas::compile(&schema_for::<Verdict>()));

/// Checks a reviewer's verdict (`{action: continue|replan|ask_user|stop, reason, plan,
/// question}`, each action with its field) against the schema derived from [`Verdict`].
pub(crate) fn validate_verdict(value: &serde_json::Value) -> Result<(), SchemaViolations> {
    schemas::check(&VERDICT, value)
}

fn parse_verdict(text: &str) -> Result<Verdict, ObjectError<PlanProblem>> {
    find_object(text, |value| {
        validate_verdict(&value)?;
        let verdict: Verdict =
            serde_json::from_value(value).map_err(PlanProblem::unreadable("verdict"))?;
        if let Some(plan) = &verdict.plan {
            check_plan(plan)?;
        }
        Ok(verdict)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts_are_read_and_checked() {
        let stop = parse_verdict("{\"action\": \"stop\", \"reason\": \"no Q4 data\"}").unwrap();
        assert_eq!(stop.action, Action::Stop);
        assert_eq!(stop.reason.as_deref(), Some("no Q4 data"));
        let error = parse_verdict("{\"action\": \"ask_user\"}")
            .unwrap_err()
            .to_string();
        assert!(error.contains("question"), "{error}");
        let bad_plan = r#"{"action": "replan", "plan": {"goal": "g", "needs_clarification": false,
            "sub_tasks": [{"id": "1", "description": "a", "depends_on": ["1"]}]}}"#;
        assert!(
            parse_verdict(bad_plan)
                .unwrap_err()
                .to_string()
                .contains("depends on itself")
        );
    }
}
