//! A run's events as an A2A task (protocol 1.0, the protobuf's JSON): the `Task` object and,
//! by the same fold, the stream's updates (`statusUpdate`, `artifactUpdate`). Pure: events
//! in, JSON out; folding a run's stored events gives the same task as following it live.
//!
//! | agentloop | A2A |
//! | --- | --- |
//! | the run's first event, or the first after an answer | `TASK_STATE_WORKING` |
//! | `tool_selected`, `tool_executed` | a `TASK_STATE_WORKING` update whose message says so (the event in its `metadata.agentloop`) |
//! | `final_response` | the `answer` artifact, appended chunk by chunk |
//! | `input_required` | `TASK_STATE_INPUT_REQUIRED`, the question (or the calls to approve) as its message |
//! | `done` | the whole `answer` artifact (`lastChunk`; a `DataPart` for a typed answer), then `COMPLETED`, `FAILED`, `CANCELED` or `REJECTED` (a guardrail), `metadata.usage` |

use agentloop_core::protocol::{Event, EventKind, InputKind, RunStatus, Usage};
use serde_json::{Map, Value, json};
use uuid::Uuid;

/// The id of the artifact that holds the run's answer.
pub const ANSWER: &str = "answer";

/// Where a task stands (`TaskState`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    Completed,
    Failed,
    Canceled,
    Rejected,
}

impl TaskState {
    pub fn wire(self) -> &'static str {
        match self {
            TaskState::Submitted => "TASK_STATE_SUBMITTED",
            TaskState::Working => "TASK_STATE_WORKING",
            TaskState::InputRequired => "TASK_STATE_INPUT_REQUIRED",
            TaskState::Completed => "TASK_STATE_COMPLETED",
            TaskState::Failed => "TASK_STATE_FAILED",
            TaskState::Canceled => "TASK_STATE_CANCELED",
            TaskState::Rejected => "TASK_STATE_REJECTED",
        }
    }

    /// A state the task never leaves.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Canceled | TaskState::Rejected
        )
    }

    /// The state of a run's status.
    pub fn of(status: RunStatus) -> TaskState {
        match status {
            RunStatus::Running => TaskState::Working,
            RunStatus::AwaitingInput => TaskState::InputRequired,
            RunStatus::Completed => TaskState::Completed,
            RunStatus::Failed => TaskState::Failed,
            RunStatus::Cancelled => TaskState::Canceled,
            RunStatus::Blocked => TaskState::Rejected,
        }
    }
}

/// One task being built from its run's events.
#[derive(Debug)]
pub struct TaskFold {
    run_id: Uuid,
    session_id: Uuid,
    /// The user's message that began the task, for its history.
    question: Option<String>,
    state: TaskState,
    /// The status's message (a question, the calls to approve, an error), and its seq.
    message: Option<Value>,
    answer: String,
    output: Option<Value>,
    usage: Option<Usage>,
    error: Option<String>,
    /// A top-level `done` came: the run ended or paused.
    ended: bool,
    /// The seq of the last event folded (the task's `metadata.agentloop.seq`: a subscriber's
    /// updates are the events after it).
    seq: u64,
}

impl TaskFold {
    pub fn new(run_id: Uuid, session_id: Uuid, question: Option<String>) -> TaskFold {
        TaskFold {
            run_id,
            session_id,
            question,
            state: TaskState::Submitted,
            message: None,
            answer: String::new(),
            output: None,
            usage: None,
            error: None,
            ended: false,
            seq: 0,
        }
    }

    pub fn state(&self) -> TaskState {
        self.state
    }

    /// Whether the run ended or paused (its top-level `done`): a stream ends here.
    #[cfg(test)]
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// The stream responses (`{statusUpdate}`, `{artifactUpdate}`) `event` adds.
    /// `error_message` tells what a client is told of an error event.
    pub fn push(&mut self, event: &Event, error_message: impl Fn(&Event) -> String) -> Vec<Value> {
        self.seq = self.seq.max(event.seq);
        if event.parent_run_id.is_some() {
            return Vec::new();
        }
        let mut out = Vec::new();
        // A tool's question (elicitation) does not pause the run: its call waits.
        let pausing = match &event.kind {
            EventKind::InputRequired { kind, .. } => *kind != InputKind::Elicitation,
            EventKind::Done { .. } | EventKind::Error { .. } => true,
            _ => false,
        };
        if !pausing && matches!(self.state, TaskState::Submitted | TaskState::InputRequired) {
            self.ended = false;
            self.state = TaskState::Working;
            self.message = None;
            out.push(self.status_update(None));
        }
        match &event.kind {
            EventKind::ToolSelected { tool, .. } => {
                let message = self.agent_message(event, format!("Calling {tool}"), event);
                out.push(self.status_update(Some(message)));
            }
            EventKind::ToolExecuted { tool, status, .. } => {
                let status = serde_json::to_value(status).unwrap_or_default();
                let status = status.as_str().unwrap_or("done").to_string();
                let message = self.agent_message(event, format!("{tool}: {status}"), event);
                out.push(self.status_update(Some(message)));
            }
            EventKind::FinalResponse { delta } => {
                let append = !self.answer.is_empty();
                self.answer.push_str(delta);
                out.push(self.artifact_update(vec![json!({"text": delta})], append, false));
            }
            // The task keeps working; the question and where to answer it go with a status
            // update (its answer is `POST /v1/runs/{id}/input` with `elicitation`).
            EventKind::InputRequired {
                elicitation: Some(elicitation),
                ..
            } => {
                let mut message = self.text_message(event.seq, &elicitation.message);
                if let Some(parts) = message["parts"].as_array_mut() {
                    parts.push(json!({"data": {
                        "kind": "elicitation",
                        "elicitation": elicitation,
                        "answer": format!("POST /v1/runs/{}/input with `elicitation`", self.run_id),
                    }}));
                }
                out.push(self.status_update(Some(message)));
            }
            EventKind::InputRequired {
                kind,
                question,
                calls,
                ..
            } => {
                self.state = TaskState::InputRequired;
                let text = match (kind, question) {
                    (_, Some(question)) => question.clone(),
                    (InputKind::Approval, None) => {
                        let listed: Vec<String> = calls
                            .iter()
                            .map(|call| format!("{}({})", call.tool, call.arguments))
                            .collect();
                        format!(
                            "Approve {}? Answer yes or no (or a data part {{\"approve\": [call \
                             ids], \"deny\": [call ids]}}).",
                            listed.join(", ")
                        )
                    }
                    (_, None) => String::from("The agent needs input."),
                };
                let mut message = self.text_message(event.seq, &text);
                if let Some(parts) = message["parts"].as_array_mut() {
                    parts.push(json!({"data": {
                        "kind": match kind {
                            InputKind::Approval => "approval",
                            InputKind::Clarification => "clarification",
                            InputKind::Elicitation => "elicitation",
                        },
                        "calls": calls,
                    }}));
                }
                self.message = Some(message.clone());
                out.push(self.status_update(Some(message)));
            }
            EventKind::Error { .. } => self.error = Some(error_message(event)),
            EventKind::Done {
                status,
                usage,
                output,
                ..
            } => {
                self.ended = true;
                self.usage = Some(*usage);
                if *status == RunStatus::AwaitingInput || *status == RunStatus::Running {
                    return out;
                }
                self.output.clone_from(output);
                if let Some(parts) = self.answer_parts() {
                    out.push(self.artifact_update(parts, false, true));
                }
                self.state = TaskState::of(*status);
                self.message = self
                    .error
                    .clone()
                    .filter(|_| self.state == TaskState::Failed)
                    .map(|text| self.text_message(event.seq, &text));
                out.push(self.status_update(self.message.clone()));
            }
            _ => {}
        }
        out
    }

    /// The task as it stands.
    pub fn task(&self) -> Value {
        let mut task = json!({
            "id": self.run_id.to_string(),
            "contextId": self.session_id.to_string(),
            "status": self.status(self.message.clone()),
        });
        if let Some(parts) = self.answer_parts() {
            task["artifacts"] = json!([self.artifact(parts)]);
        }
        if let Some(question) = &self.question {
            task["history"] = json!([{
                "messageId": format!("{}-question", self.run_id),
                "contextId": self.session_id.to_string(),
                "taskId": self.run_id.to_string(),
                "role": "ROLE_USER",
                "parts": [{"text": question}],
            }]);
        }
        task["metadata"] = json!({"agentloop": {"seq": self.seq}});
        if let Some(usage) = &self.usage {
            task["metadata"]["usage"] = json!(usage);
        }
        task
    }

    /// The answer's parts: the typed value as data, else the text (none before there is one).
    fn answer_parts(&self) -> Option<Vec<Value>> {
        match (&self.output, self.answer.is_empty()) {
            (Some(output), _) => Some(vec![json!({"data": output})]),
            (None, false) => Some(vec![json!({"text": self.answer})]),
            (None, true) => None,
        }
    }

    fn artifact(&self, parts: Vec<Value>) -> Value {
        json!({"artifactId": ANSWER, "name": ANSWER, "parts": parts})
    }

    fn status(&self, message: Option<Value>) -> Value {
        let mut status = json!({"state": self.state.wire()});
        if let Some(message) = message {
            status["message"] = message;
        }
        status
    }

    fn status_update(&self, message: Option<Value>) -> Value {
        let mut update = json!({
            "taskId": self.run_id.to_string(),
            "contextId": self.session_id.to_string(),
            "status": self.status(message),
        });
        if self.state.is_final()
            && let Some(usage) = &self.usage
        {
            update["metadata"] = json!({"usage": usage});
        }
        json!({"statusUpdate": update})
    }

    fn artifact_update(&self, parts: Vec<Value>, append: bool, last: bool) -> Value {
        json!({"artifactUpdate": {
            "taskId": self.run_id.to_string(),
            "contextId": self.session_id.to_string(),
            "artifact": self.artifact(parts),
            "append": append,
            "lastChunk": last,
        }})
    }

    /// An agent message of one text part, its id from the event's seq.
    fn text_message(&self, seq: u64, text: &str) -> Value {
        json!({
            "messageId": format!("{}-{seq}", self.run_id),
            "contextId": self.session_id.to_string(),
            "taskId": self.run_id.to_string(),
            "role": "ROLE_AGENT",
            "parts": [{"text": text}],
        })
    }

    /// A progress message: `text`, with agentloop's event in its metadata.
    fn agent_message(&self, event: &Event, text: String, about: &Event) -> Value {
        let mut message = self.text_message(event.seq, &text);
        let mut metadata = Map::new();
        metadata.insert(
            "agentloop".to_string(),
            serde_json::to_value(about).unwrap_or_default(),
        );
        message["metadata"] = Value::Object(metadata);
        message
    }
}

/// The state changes of a run's events, each once: the seq of the event that changed the state
/// and what a push notification of it says (a `statusUpdate`, the whole `task` for a final
/// state); and whether the run reached a final state.
pub fn state_changes(
    run_id: Uuid,
    session_id: Uuid,
    question: Option<String>,
    events: &[Event],
    error_message: impl Fn(&Event) -> String,
) -> (Vec<(u64, Value)>, bool) {
    let mut fold = TaskFold::new(run_id, session_id, question);
    let mut changes = Vec::new();
    for event in events {
        let before = fold.state;
        let out = fold.push(event, &error_message);
        if fold.state == before {
            continue;
        }
        let payload = match fold.state.is_final() {
            true => json!({"task": fold.task()}),
            false => out
                .into_iter()
                .rev()
                .find(|update| update.get("statusUpdate").is_some())
                .unwrap_or_else(|| fold.status_update(None)),
        };
        changes.push((event.seq, payload));
    }
    (changes, fold.state.is_final())
}

#[cfg(test)]
#[path = "task_tests.rs"]
mod tests;
