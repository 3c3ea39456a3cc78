//! The planning phase and the plan's life. One LLM call before the loop makes a plan; the reply
//! must hold a JSON object that passes the plan's JSON Schema and names its sub-tasks
//! consistently. An invalid plan is sent back once with the problem; a second failure lets the
//! run go on without a plan (the trace says so). The model keeps the plan current with the
//! built-in `write_plan` tool.

use std::{fmt::Display, sync::Arc};

use agentloop_protocol::{ChatMessage, EventKind, Plan, SubTask, SubTaskStatus};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::{
    Phase, RunMachine, Step,
    guidance::{JsonRetry, render_plan},
    schemas,
    text::one_line,
};
use crate::{
    catalog::SchemaViolations,
    json_text::{ObjectError, find_object},
    llm::{CallPurpose, ModelReply, ModelRequest, ToolChoice},
};

/// Why a plan (or a reviewer's verdict, or a plan update) was not taken. The model reads it and
/// tries again.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PlanProblem {
    #[error(transparent)]
    Schema(#[from] SchemaViolations),
    #[error("the {what} cannot be read: {source}")]
    Unreadable {
        what: &'static str,
        source: serde_json::Error,
    },
    #[error("two sub-tasks have the id {0:?}")]
    DuplicateId(String),
    #[error("sub-task {0:?} depends on itself")]
    DependsOnItself(String),
    #[error("sub-task {task:?} depends on {dependency:?}, which is not a sub-task")]
    UnknownDependency { task: String, dependency: String },
    #[error("there is no sub-task {0:?}; to add it, give it a description")]
    NoSuchTask(String),
}

impl PlanProblem {
    pub(crate) fn unreadable(what: &'static str) -> impl FnOnce(serde_json::Error) -> Self {
        move |source| PlanProblem::Unreadable { what, source }
    }
}

/// The arguments of `write_plan`: its JSON Schema is derived from this type.
/// Arguments of the built-in `write_plan` tool.
pub(crate) fn write_plan_schema() -> Value {
    crate::tool::schema_for::<PlanUpdate>()
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PlanUpdate {
    /// A new goal, when it changed.
    #[schemars(length(min = 1))]
    goal: Option<String>,
    /// Sub-tasks to change (by id) or to add (a new id, with a description).
    sub_tasks: Vec<TaskUpdate>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct TaskUpdate {
    #[schemars(length(min = 1))]
    id: String,
    status: Option<SubTaskStatus>,
    #[schemars(length(min = 1))]
    description: Option<String>,
    depends_on: Option<Vec<String>>,
}

impl RunMachine {
    /// Asks the model for a plan before the first step.
    pub(super) fn begin_planning(&mut self) -> Step {
        self.state.phase = Phase::AwaitingPlan;
        self.plan_request()
    }

    pub(super) fn plan_request(&self) -> Step {
        let model = self.settings.planning.model.clone();
        Step::CallModel(self.json_request(CallPurpose::Plan, model, self.plan_instruction()))
    }

    pub(super) fn on_plan_reply(&mut self, reply: ModelReply) -> Step {
        let text = reply.content.unwrap_or_default();
        let plan = match parse_plan(&text) {
            Ok(plan) => plan,
            Err(problem) if self.keep_for_retry(text, &problem) => return self.plan_request(),
            Err(problem) => {
                self.state.guidance.log.notes.push(format!(
                    "No plan: the planner's reply was invalid twice ({}); the run went on without \
                     a plan.",
                    one_line(&problem.to_string(), 300)
                ));
                return self.next_iteration();
            }
        };
        self.state.guidance.retry = None;
        let question = plan
            .needs_clarification
            .then(|| plan.clarification_question.clone())
            .flatten();
        self.set_plan(plan);
        match question {
            Some(question) => self.ask(question, "plan"),
            None => {
                self.state.guidance.clarified = true;
                self.next_iteration()
            }
        }
    }

    /// Makes `plan` the run's plan and reports it.
    pub(super) fn set_plan(&mut self, plan: Plan) {
        self.emit(EventKind::PlanUpdated { plan: plan.clone() });
        self.state.guidance.plan = Some(plan);
    }

    /// Applies a `write_plan` call; the text is the tool's result.
    pub(super) fn write_plan(&mut self, arguments: &Value) -> Result<String, PlanProblem> {
        let update: PlanUpdate = serde_json::from_value(arguments.clone())
            .map_err(PlanProblem::unreadable("plan update"))?;
        let mut plan = self.state.guidance.plan.clone().unwrap_or_else(|| Plan {
            goal: self.state.input.query.clone(),
            sub_tasks: Vec::new(),
            needs_clarification: false,
            clarification_question: None,
        });
        if let Some(goal) = update.goal {
            plan.goal = goal;
        }
        for change in update.sub_tasks {
            match plan.sub_tasks.iter_mut().find(|task| task.id == change.id) {
                Some(task) => {
                    if let Some(status) = change.status {
                        task.status = status;
                    }
                    if let Some(description) = change.description {
                        task.description = description;
                    }
                    if let Some(depends_on) = change.depends_on {
                        task.depends_on = depends_on;
                    }
                }
                None => {
                    let description = change
                        .description
                        .ok_or_else(|| PlanProblem::NoSuchTask(change.id.clone()))?;
                    plan.sub_tasks.push(SubTask {
                        id: change.id,
                        description,
                        status: change.status.unwrap_or(SubTaskStatus::Pending),
                        depends_on: change.depends_on.unwrap_or_default(),
                    });
                }
            }
        }
        check_plan(&plan)?;
        let text = format!("Plan updated.\n{}", render_plan(&plan));
        self.set_plan(plan);
        Ok(text)
    }

    /// The instruction of the planning call: the plan's shape, and the tools it can count on.
    fn plan_instruction(&self) -> String {
        let mut tools = String::new();
        for (spec, gated) in self.plannable_specs() {
            let first_line = spec.description.lines().next().unwrap_or_default();
            tools.push_str(&format!(
                "- {}: {}{}\n",
                spec.name,
                one_line(first_line, 160),
                if gated {
                    " (only once the request is clear)"
                } else {
                    ""
                }
            ));
        }
        if tools.is_empty() {
            tools.push_str("(none)\n");
        }
        format!(
            "Before doing anything, make a plan for the user's latest request. You will carry it \
             out afterwards with these tools:\n{tools}\nAnswer with one JSON object and nothing \
             else, in this shape:\n{{\"goal\": \"what the user wants\", \"sub_tasks\": [{{\"id\": \
             \"1\", \"description\": \"one step\", \"status\": \"pending\", \"depends_on\": []}}], \
             \"needs_clarification\": false, \"clarification_question\": null}}\nSet \
             needs_clarification to true, with one short clarification_question, only when the \
             request is ambiguous in a way that changes what to do (which person, which project, \
             which period) and the conversation does not settle it."
        )
    }

    /// A JSON reply (plan or verdict) that did not validate. The first time it is kept, to be
    /// shown to the model with the problem (`true`: ask again); the second time it is given up.
    pub(super) fn keep_for_retry(&mut self, reply: String, problem: &impl Display) -> bool {
        if self.state.guidance.retry.take().is_some() {
            return false;
        }
        self.state.guidance.retry = Some(JsonRetry {
            reply,
            problem: problem.to_string(),
        });
        true
    }

    /// A call whose reply must be one JSON object (a plan, a review): the stable system prompt,
    /// the conversation, then `instruction`; on the second attempt, the rejected reply and what
    /// was wrong with it.
    pub(super) fn json_request(
        &self,
        purpose: CallPurpose,
        model: Option<String>,
        instruction: String,
    ) -> ModelRequest {
        let mut closing = vec![Arc::new(ChatMessage::system(instruction))];
        if let Some(retry) = &self.state.guidance.retry {
            closing.push(Arc::new(ChatMessage::assistant(retry.reply.clone())));
            closing.push(Arc::new(ChatMessage::user(format!(
                "That reply was not valid: {}. Answer again with only the corrected JSON object.",
                retry.problem
            ))));
        }
        let mut request = self.compose(closing, false, ToolChoice::None, purpose);
        request.model = model.or_else(|| self.state.input.model.clone());
        request
    }
}

/// Reads and checks a plan from the model's reply: the first JSON object that is a valid plan.
pub(crate) fn parse_plan(text: &str) -> Result<Plan, ObjectError<PlanProblem>> {
    find_object(text, |value| {
        schemas::validate_plan(&value)?;
        let plan: Plan = serde_json::from_value(value).map_err(PlanProblem::unreadable("plan"))?;
        check_plan(&plan)?;
        Ok(plan)
    })
}

/// What a schema cannot say: ids are unique, and dependencies name other sub-tasks.
pub(crate) fn check_plan(plan: &Plan) -> Result<(), PlanProblem> {
    for (index, task) in plan.sub_tasks.iter().enumerate() {
        if plan.sub_tasks[..index].iter().any(|t| t.id == task.id) {
            return Err(PlanProblem::DuplicateId(task.id.clone()));
        }
        for dependency in &task.depends_on {
            if dependency == &task.id {
                return Err(PlanProblem::DependsOnItself(task.id.clone()));
            }
            if !plan.sub_tasks.iter().any(|t| &t.id == dependency) {
                return Err(PlanProblem::UnknownDependency {
                    task: task.id.clone(),
                    dependency: dependency.clone(),
                });
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fenced_plan_with_prose_is_read() {
        let text = "Here is my plan:\n```json\n{\"goal\": \"Q4\", \"sub_tasks\": [{\"id\": \"1\", \
                    \"description\": \"search\"}], \"needs_clarification\": false}\n```\nDone.";
        let plan = parse_plan(text).unwrap();
        assert_eq!(plan.goal, "Q4");
        assert_eq!(plan.sub_tasks[0].status, SubTaskStatus::Pending);
    }

    #[test]
    fn inconsistent_plans_are_refused_with_the_reason() {
        let twice = r#"{"goal": "g", "needs_clarification": false, "sub_tasks": [
            {"id": "1", "description": "a"}, {"id": "1", "description": "b"}]}"#;
        assert!(
            parse_plan(twice)
                .unwrap_err()
                .to_string()
                .contains("two sub-tasks")
        );
        let dangling = r#"{"goal": "g", "needs_clarification": false, "sub_tasks": [
            {"id": "1", "description": "a", "depends_on": ["7"]}]}"#;
        assert!(
            parse_plan(dangling)
                .unwrap_err()
                .to_string()
                .contains("not a sub-task")
        );
        assert!(
            parse_plan("I will search first.")
                .unwrap_err()
                .to_string()
                .contains("no JSON object")
        );
    }
}
