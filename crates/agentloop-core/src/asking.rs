//! What a tool call may ask of its run while it runs: a question for the user (MCP
//! elicitation) and a completion of the run's model (MCP sampling).
//!
//! A call asks through its [`ToolContext`](crate::ToolContext) ([`CallAsks`]); the run's driver
//! reads the asks of its batch. A question becomes a live `input_required` event (kind
//! `elicitation`), saved at once, and waits on the [`QuestionBoard`] of this process for the
//! user's answer ([`QuestionBoard::answer`], `POST /v1/runs/{id}/input`). The run does not
//! pause: the call itself waits, and its time limit (`timeout_s`) waits with it. A sampling
//! request is answered by the run's model, counted in the run's usage and budget.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use agentloop_protocol::{
    ElicitationAction, ElicitationAnswer, ElicitationMode, ElicitationPurpose,
};
use serde_json::Value;
use tokio::sync::{mpsc::UnboundedSender, oneshot, watch};
use uuid::Uuid;

use crate::llm::{ModelReply, ModelRequest};

/// What a call asks the user, before the run names it.
#[derive(Debug, Clone, PartialEq)]
pub struct Question {
    /// The MCP server that asks.
    pub server: String,
    pub mode: ElicitationMode,
    pub message: String,
    /// `form`: the JSON Schema of the answer.
    pub requested_schema: Option<Value>,
    /// `url`: where the user answers.
    pub url: Option<String>,
    pub purpose: ElicitationPurpose,
}

/// A completion a call asks of the run's model.
#[derive(Debug, Clone)]
pub struct SamplingRequest {
    /// The messages, system prompt first; `model` set to use another model than the run's.
    pub request: ModelRequest,
    /// The most the reply may spend (MCP `maxTokens`): counted against the run's budget
    /// before the call is made.
    pub max_tokens: u64,
}

/// Why a sampling request got no completion.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum SamplingRefused {
    /// The run's budget cannot pay for it.
    #[error("the run's budget does not allow another LLM call")]
    OverBudget,
    /// The model failed.
    #[error("the model failed: {0}")]
    Failed(String),
    /// No run listens (a call outside a run), or it ended.
    #[error("no run answers sampling requests for this call")]
    NoRun,
}

/// One ask of a call, with where its answer goes.
pub(crate) enum Ask {
    Question {
        question: Question,
        reply: oneshot::Sender<ElicitationAnswer>,
    },
    Sampling {
        request: Box<SamplingRequest>,
        reply: oneshot::Sender<Result<ModelReply, SamplingRefused>>,
    },
    /// A log message of the call's server, kept for the call's record.
    Log(agentloop_protocol::ToolLog),
}

/// An ask and the call it comes from.
pub(crate) struct CallAsk {
    pub(crate) call_id: String,
    pub(crate) tool: String,
    pub(crate) ask: Ask,
}

/// How a running call reaches its run (in its [`ToolContext`](crate::ToolContext)).
#[derive(Debug, Clone)]
pub struct CallAsks {
    call_id: String,
    tool: String,
    sender: UnboundedSender<CallAsk>,
    /// How many of the call's questions are open: its time limit waits while one is.
    open: Arc<watch::Sender<usize>>,
}

impl std::fmt::Debug for CallAsk {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("CallAsk")
            .field("call_id", &self.call_id)
            .field("tool", &self.tool)
            .finish_non_exhaustive()
    }
}

impl CallAsks {
    pub(crate) fn new(
        call_id: &str,
        tool: &str,
        sender: UnboundedSender<CallAsk>,
        open: Arc<watch::Sender<usize>>,
    ) -> Self {
        Self {
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            sender,
            open,
        }
    }

    /// Asks the user `question` and waits for the answer; `decline` when the run is gone.
    /// The caller bounds the wait (dropping the future withdraws the question).
    pub async fn elicit(&self, question: Question) -> ElicitationAnswer {
        let (reply, answer) = oneshot::channel();
        let ask = CallAsk {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            ask: Ask::Question { question, reply },
        };
        if self.sender.send(ask).is_err() {
            return ElicitationAnswer::decline();
        }
        let _open = Open::new(&self.open);
        answer
            .await
            .unwrap_or_else(|_| ElicitationAnswer::decline())
    }

    /// Keeps `log` in the call's record; nothing when the run is gone.
    pub fn log(&self, log: agentloop_protocol::ToolLog) {
        let _ = self.sender.send(CallAsk {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            ask: Ask::Log(log),
        });
    }

    /// Asks the run's model for a completion, counted in the run's usage.
    pub async fn sample(&self, request: SamplingRequest) -> Result<ModelReply, SamplingRefused> {
        let (reply, answer) = oneshot::channel();
        let ask = CallAsk {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            ask: Ask::Sampling {
                request: Box::new(request),
                reply,
            },
        };
        self.sender.send(ask).map_err(|_| SamplingRefused::NoRun)?;
        answer.await.unwrap_or(Err(SamplingRefused::NoRun))
    }
}

/// Counts a question open while it lives.
struct Open<'a>(&'a watch::Sender<usize>);

impl<'a> Open<'a> {
    fn new(open: &'a watch::Sender<usize>) -> Self {
        open.send_modify(|count| *count += 1);
        Self(open)
    }
}

impl Drop for Open<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|count| *count = count.saturating_sub(1));
    }
}

/// Why an answer was not taken.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AnswerError {
    /// No question of the run is open in this process.
    #[error("run {0} has no open question (elicitation) in this process")]
    NoQuestion(Uuid),
    /// The answer names a question the run does not have open.
    #[error("run {run_id} has no open question {id}")]
    UnknownQuestion { run_id: Uuid, id: String },
    /// Several questions are open and the answer names none.
    #[error("several questions are open ({0}); name one in elicitation.id")]
    Ambiguous(String),
    /// The content does not fit the question.
    #[error("{0}")]
    Invalid(String),
}

/// An open question: what it accepts, and where its answer goes.
struct Pending {
    mode: ElicitationMode,
    schema: Option<Value>,
    reply: oneshot::Sender<ElicitationAnswer>,
}

/// The open questions of the runs driven in this process, by run and question id.
#[derive(Default)]
pub struct QuestionBoard {
    runs: Mutex<HashMap<Uuid, HashMap<String, Pending>>>,
}

impl QuestionBoard {
    /// Hands `answer` to the question it names (or to the run's only one), checked against
    /// the question first: `accept` on a form carries content valid against the requested
    /// schema, whose defaults fill what it leaves out. Returns the question's id.
    pub fn answer(
        &self,
        run_id: Uuid,
        mut answer: ElicitationAnswer,
    ) -> Result<String, AnswerError> {
        let mut runs = self.lock();
        let questions = runs
            .get_mut(&run_id)
            .ok_or(AnswerError::NoQuestion(run_id))?;
        // Questions whose call stopped waiting are gone.
        questions.retain(|_, pending| !pending.reply.is_closed());
        let id = match &answer.id {
            Some(id) => id.clone(),
            None => {
                let mut ids: Vec<&String> = questions.keys().collect();
                ids.sort();
                match ids.as_slice() {
                    [] => return Err(AnswerError::NoQuestion(run_id)),
                    [only] => (*only).clone(),
                    several => {
                        let names: Vec<&str> = several.iter().map(|id| id.as_str()).collect();
                        return Err(AnswerError::Ambiguous(names.join(", ")));
                    }
                }
            }
        };
        let pending = questions
            .get(&id)
            .ok_or_else(|| AnswerError::UnknownQuestion {
                run_id,
                id: id.clone(),
            })?;
        answer.content = checked_content(pending, &answer)?;
        answer.id = Some(id.clone());
        if let Some(pending) = questions.remove(&id) {
            // A call that stopped waiting just now has nothing left to answer.
            let _ = pending.reply.send(answer);
        }
        Ok(id)
    }

    /// The ids of the questions `run_id` has open.
    pub fn open_questions(&self, run_id: Uuid) -> Vec<String> {
        let mut runs = self.lock();
        let Some(questions) = runs.get_mut(&run_id) else {
            return Vec::new();
        };
        questions.retain(|_, pending| !pending.reply.is_closed());
        let mut ids: Vec<String> = questions.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Opens the questions of `run_id` for its driver; they close when the guard is dropped.
    pub(crate) fn open(self: &Arc<Self>, run_id: Uuid) -> RunQuestions {
        self.lock().entry(run_id).or_default();
        RunQuestions {
            board: self.clone(),
            run_id,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, HashMap<String, Pending>>> {
        // Entries are only inserted and removed whole.
        self.runs.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The questions of one run on the board, removed with it.
pub(crate) struct RunQuestions {
    board: Arc<QuestionBoard>,
    run_id: Uuid,
}

impl RunQuestions {
    pub(crate) fn put(
        &self,
        id: String,
        question: &Question,
        reply: oneshot::Sender<ElicitationAnswer>,
    ) {
        let pending = Pending {
            mode: question.mode,
            schema: question.requested_schema.clone(),
            reply,
        };
        self.board
            .lock()
            .entry(self.run_id)
            .or_default()
            .insert(id, pending);
    }
}

impl Drop for RunQuestions {
    fn drop(&mut self) {
        self.board.lock().remove(&self.run_id);
    }
}

/// The content `answer` gives the server: with `accept` on a form, the content with the
/// schema's defaults filled in, checked against the schema; nothing otherwise.
fn checked_content(
    pending: &Pending,
    answer: &ElicitationAnswer,
) -> Result<Option<Value>, AnswerError> {
    if answer.action != ElicitationAction::Accept || pending.mode == ElicitationMode::Url {
        return Ok(None);
    }
    let content = answer
        .content
        .clone()
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    let Some(schema) = &pending.schema else {
        return Ok(Some(content));
    };
    fill_in(content, schema).map(Some)
}

/// `content` with the defaults of `schema`'s properties filled in where it leaves them out,
/// checked against `schema` (MCP: clients apply the defaults of the requested schema).
pub fn fill_in(content: Value, schema: &Value) -> Result<Value, AnswerError> {
    let Value::Object(mut fields) = content else {
        return Err(AnswerError::Invalid(
            "elicitation.content: the answer must be a JSON object".to_owned(),
        ));
    };
    if let Some(Value::Object(properties)) = schema.get("properties") {
        for (name, property) in properties {
            if let Some(default) = property.get("default")
                && !fields.contains_key(name)
            {
                fields.insert(name.clone(), default.clone());
            }
        }
    }
    let content = Value::Object(fields);
    let validator = jsonschema::validator_for(schema).map_err(|error| {
        AnswerError::Invalid(format!("the requested schema does not compile: {error}"))
    })?;
    let problems: Vec<String> = validator
        .iter_errors(&content)
        .map(|error| {
            let path = error.instance_path().to_string();
            if path.is_empty() {
                error.to_string()
            } else {
                format!("at {path}: {error}")
            }
        })
        .collect();
    if problems.is_empty() {
        Ok(content)
    } else {
        Err(AnswerError::Invalid(format!(
            "elicitation.content does not fit the requested schema: {}",
            problems.join("; ")
        )))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "score": {"type": "number"},
            },
            "required": ["score"],
        })
    }

    #[test]
    fn defaults_fill_what_the_answer_leaves_out() {
        let filled = fill_in(json!({"score": 1.5, "age": 7}), &schema());
        assert_eq!(
            filled,
            Ok(json!({"name": "John Doe", "age": 7, "score": 1.5}))
        );
    }

    #[test]
    fn an_answer_that_does_not_fit_is_refused() {
        let Err(AnswerError::Invalid(why)) = fill_in(json!({"age": "old"}), &schema()) else {
            panic!("an answer without its required field passed");
        };
        assert!(why.contains("score"), "{why}");
        assert!(fill_in(json!([1]), &schema()).is_err());
    }

    fn question() -> Question {
        Question {
            server: "s".to_owned(),
            mode: ElicitationMode::Form,
            message: "Who?".to_owned(),
            requested_schema: Some(schema()),
            url: None,
            purpose: ElicitationPurpose::Question,
        }
    }

    #[tokio::test]
    async fn an_answer_reaches_the_only_open_question() {
        let board = Arc::new(QuestionBoard::default());
        let run_id = Uuid::new_v4();
        let questions = board.open(run_id);
        let (reply, answer) = oneshot::channel();
        questions.put("c1/1".to_owned(), &question(), reply);
        let refused = board.answer(
            run_id,
            ElicitationAnswer {
                id: None,
                action: ElicitationAction::Accept,
                content: Some(json!({"name": "x"})),
            },
        );
        assert!(
            matches!(refused, Err(AnswerError::Invalid(_))),
            "{refused:?}"
        );
        let taken = board.answer(
            run_id,
            ElicitationAnswer {
                id: None,
                action: ElicitationAction::Accept,
                content: Some(json!({"score": 2})),
            },
        );
        assert_eq!(taken, Ok("c1/1".to_owned()));
        let Ok(answer) = answer.await else {
            panic!("no answer")
        };
        assert_eq!(
            answer.content,
            Some(json!({"name": "John Doe", "age": 30, "score": 2}))
        );
        assert_eq!(
            board.answer(run_id, ElicitationAnswer::decline()),
            Err(AnswerError::NoQuestion(run_id))
        );
        drop(questions);
        assert!(board.open_questions(run_id).is_empty());
    }
}
