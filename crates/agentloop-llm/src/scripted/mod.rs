//! A model that answers from a script (`llm.provider = "scripted"`, `llm.script = "FILE"`):
//! no server and no key, for demos and for testing an agent's tools, policies and prompts.
//!
//! Each request is answered from the scenario its question matches (see [`script`] for the
//! format). The step taken is the number of assistant turns since that question in the
//! request's messages: the first LLM call of a run gets step 1, the call after its tool results
//! step 2, and so on. The model keeps no state, so concurrent runs of a server, resumed runs
//! and sessions with history each get their own steps.

pub mod script;

use std::path::{Path, PathBuf};
use std::time::Duration;

use agentloop_core::{
    CallPurpose, InvalidSetting, Llm, LlmError, ModelReply, ModelRequest, TextSink,
    protocol::{ChatMessage, Role, ToolCall},
    provider_safe_name,
};
use async_trait::async_trait;

use script::{Failure, Scenario, Script, Step};

/// The scripted model.
#[derive(Debug, Clone)]
pub struct ScriptedModel {
    script: Script,
    /// Where the script came from, for errors.
    source: PathBuf,
}

impl ScriptedModel {
    /// Reads the script at `path` (TOML, or JSON when the name ends in `.json`).
    pub fn load(path: &Path) -> Result<ScriptedModel, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            invalid(format!(
                "cannot read the script {}: {error}",
                path.display()
            ))
        })?;
        Self::from_text(&text, path)
    }

    /// A script given as text; `name` is how errors name it, and its extension says whether the
    /// text is JSON (`.json`) or TOML.
    pub fn from_text(text: &str, name: &Path) -> Result<ScriptedModel, LlmError> {
        let script = script::parse(text, name).map_err(|error| {
            invalid(format!(
                "the script {} is not usable: {error}",
                name.display()
            ))
        })?;
        Ok(ScriptedModel {
            script,
            source: name.to_path_buf(),
        })
    }

    /// The scenario for the request and the index of the question it answers in its messages.
    fn scenario<'a>(
        &'a self,
        messages: &[&ChatMessage],
    ) -> Result<(usize, &'a Scenario, usize), LlmError> {
        let questions: Vec<usize> = (0..messages.len())
            .rev()
            .filter(|&i| messages[i].role == Role::User)
            .collect();
        let Some(&last) = questions.first() else {
            return Err(LlmError::NoAnswer(format!(
                "the scripted model (script {}) got a request without a user message",
                self.source.display()
            )));
        };
        // The run's question first: a scenario made for it, else the catch-all one; then an
        // earlier question (the run's own, when a steering message came after it).
        let pick = |at: usize, catch_all: bool| {
            let text = messages[at].text_content();
            self.script
                .scenarios
                .iter()
                .enumerate()
                .find(|(_, s)| s.when.is_some() != catch_all && s.matches(text))
                .map(|(index, scenario)| (index, scenario, at))
        };
        pick(last, false)
            .or_else(|| pick(last, true))
            .or_else(|| questions[1..].iter().find_map(|&at| pick(at, false)))
            .ok_or_else(|| {
                LlmError::NoAnswer(format!(
                    "no scenario of the script {} matches the question {:?}: add one with a \
                     `when` it contains, or one without `when` for any question",
                    self.source.display(),
                    agentloop_core::machine::one_line(messages[last].text_content(), 120)
                ))
            })
    }

    fn answer(&self, request: &ModelRequest) -> Result<Answer, LlmError> {
        let messages: Vec<&ChatMessage> = request.messages.iter().map(|m| m.as_ref()).collect();
        let (index, scenario, question) = self.scenario(&messages)?;
        let label = scenario.label(index);
        let fixed = |reply: &Option<String>, key: &str, what: &str| {
            reply.clone().map(Answer::Text).ok_or_else(|| {
                LlmError::NoAnswer(format!(
                    "the {label} of the script {} has no `{key}`, the reply to {what}",
                    self.source.display()
                ))
            })
        };
        match request.purpose {
            CallPurpose::Plan => return fixed(&scenario.plan, "plan", "planning calls"),
            CallPurpose::Review => return fixed(&scenario.review, "review", "review calls"),
            CallPurpose::Guardrail => {
                return Err(LlmError::NoAnswer(format!(
                    "the scripted model of {} does not answer `llm` guardrails; give the \
                     guardrail a model of its own",
                    self.source.display()
                )));
            }
            CallPurpose::Sampling => {
                return Err(LlmError::NoAnswer(format!(
                    "the scripted model of {} does not answer MCP servers' sampling requests; \
                     give the server a sampling_model of its own",
                    self.source.display()
                )));
            }
            CallPurpose::Step | CallPurpose::Finalize => {}
        }
        let turn = messages[question + 1..]
            .iter()
            .filter(|message| message.role == Role::Assistant)
            .count();
        match scenario.steps.get(turn) {
            Some(step) => Ok(Answer::Step(step.clone(), turn)),
            None => Err(LlmError::NoAnswer(format!(
                "the scripted model ran out of steps: the {label} of the script {} has {} \
                 step(s), and this run asks for step {} (its last message: {}). Add a step, or \
                 end the scenario with a step of text only",
                self.source.display(),
                scenario.steps.len(),
                turn + 1,
                describe_last(&messages)
            ))),
        }
    }
}

enum Answer {
    Text(String),
    /// The step and its index in the scenario.
    Step(Step, usize),
}

#[async_trait]
impl Llm for ScriptedModel {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let (step, turn) = match self.answer(request)? {
            Answer::Text(text) => {
                on_text(&text);
                return Ok(reply(Some(text), Vec::new()));
            }
            Answer::Step(step, turn) => (step, turn),
        };
        if let Some(ms) = step.delay_ms {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        if let Some(failure) = &step.fail {
            return Err(failure_error(failure));
        }
        if let Some(text) = step.text.as_deref() {
            // In a few pieces, as a streaming model sends it.
            for piece in text.split_inclusive(' ') {
                on_text(piece);
            }
        }
        let tool_calls = step
            .tool_calls
            .iter()
            .enumerate()
            .map(|(i, call)| ToolCall {
                id: format!("call_{}_{}", turn + 1, i + 1),
                name: offered_name(&call.name, request),
                arguments: call.arguments_text(),
            })
            .collect();
        let tool_calls = if request.tool_choice == agentloop_core::ToolChoice::None {
            Vec::new()
        } else {
            tool_calls
        };
        Ok(reply(step.text, tool_calls))
    }
}

fn reply(content: Option<String>, tool_calls: Vec<ToolCall>) -> ModelReply {
    let finish = if tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    ModelReply {
        content,
        tool_calls,
        finish_reason: Some(finish.to_string()),
        usage: None,
        model: None,
        id: None,
    }
}

/// The name the model uses for `name`: as written when a tool of the request has it, else its
/// provider-safe spelling (`server.tool` → `server__tool`).
fn offered_name(name: &str, request: &ModelRequest) -> String {
    if request.tools.iter().any(|tool| tool.name == name) {
        return name.to_string();
    }
    provider_safe_name(name)
}

fn failure_error(failure: &Failure) -> LlmError {
    let message = failure
        .message
        .clone()
        .unwrap_or_else(|| format!("scripted failure (HTTP {})", failure.status));
    match failure.status {
        401 | 403 => LlmError::Unauthorized {
            url: "scripted".into(),
            status: failure.status,
            message,
            key_env: "(none: the model is scripted)".into(),
        },
        429 => LlmError::RateLimited {
            retries: 0,
            message,
        },
        500..=599 => LlmError::Server {
            status: failure.status,
            retries: 0,
            message,
        },
        status => LlmError::Rejected { status, message },
    }
}

fn describe_last(messages: &[&ChatMessage]) -> String {
    match messages.last() {
        Some(message) if message.role == Role::Tool => format!(
            "a tool result, {:?}",
            agentloop_core::machine::one_line(message.text_content(), 80)
        ),
        Some(message) => format!(
            "{} {:?}",
            message.role.as_str(),
            agentloop_core::machine::one_line(message.text_content(), 80)
        ),
        None => "none".into(),
    }
}

fn invalid(message: String) -> LlmError {
    LlmError::InvalidConfig(InvalidSetting::new("llm.script", message))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentloop_core::{ToolChoice, ToolSpec};

    use super::*;

    const SCRIPT: &str = r#"
        [[scenarios]]
        name = "sum"
        when = "add"
        [[scenarios.steps]]
        text = "Adding."
        tool_calls = [{ name = "calc.add", arguments = { a = 2, b = 40 } }]
        [[scenarios.steps]]
        text = "It is 42."
        [[scenarios]]
        name = "broken"
        when = "break"
        [[scenarios.steps]]
        fail = { status = 503, message = "overloaded" }
        [[scenarios]]
        [[scenarios.steps]]
        text = "Hello."
    "#;

    fn request(messages: Vec<ChatMessage>) -> ModelRequest {
        ModelRequest {
            model: None,
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: vec![Arc::new(ToolSpec {
                name: "calc__add".into(),
                description: String::new(),
                parameters: Arc::new(serde_json::json!({"type": "object"})),
            })],
            tool_choice: ToolChoice::Auto,
            purpose: CallPurpose::Step,
            output: None,
        }
    }

    async fn complete(
        model: &ScriptedModel,
        messages: Vec<ChatMessage>,
    ) -> (Result<ModelReply, LlmError>, String) {
        let mut streamed = String::new();
        let mut sink = |text: &str| streamed.push_str(text);
        let reply = model.complete(&request(messages), &mut sink).await;
        (reply, streamed)
    }

    #[tokio::test]
    async fn steps_follow_the_turns_of_the_matching_scenario() {
        let model = ScriptedModel::from_text(SCRIPT, Path::new("s.toml")).unwrap();
        let question = ChatMessage::user("Please add 2 and 40");
        let (first, streamed) = complete(&model, vec![question.clone()]).await;
        let first = first.unwrap();
        assert_eq!(streamed, "Adding.");
        assert_eq!(first.tool_calls[0].name, "calc__add");
        assert_eq!(first.tool_calls[0].arguments, r#"{"a":2,"b":40}"#);
        let turn = ChatMessage::assistant_tool_calls(None, first.tool_calls.clone());
        let result = ChatMessage::tool_result("call_1_1", "42");
        let (second, _) =
            complete(&model, vec![question.clone(), turn.clone(), result.clone()]).await;
        assert_eq!(second.unwrap().text(), Some("It is 42."));

        let answered = ChatMessage::assistant("It is 42.");
        let (third, _) = complete(&model, vec![question, turn, result, answered]).await;
        let message = third.unwrap_err().to_string();
        assert!(message.contains("ran out of steps"), "{message}");
        assert!(message.contains("scenario \"sum\""), "{message}");
        assert!(
            message.contains("has 2 step(s), and this run asks for step 3"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn other_questions_take_the_catch_all_and_failures_are_provider_errors() {
        let model = ScriptedModel::from_text(SCRIPT, Path::new("s.toml")).unwrap();
        let (hello, _) = complete(&model, vec![ChatMessage::user("hi")]).await;
        assert_eq!(hello.unwrap().text(), Some("Hello."));
        let (broken, _) = complete(&model, vec![ChatMessage::user("break it")]).await;
        assert!(
            matches!(broken, Err(LlmError::Server { status: 503, .. })),
            "{broken:?}"
        );
    }

    #[tokio::test]
    async fn without_a_catch_all_an_unmatched_question_is_named() {
        let script = "[[scenarios]]\nwhen = \"add\"\n[[scenarios.steps]]\ntext = \"x\"\n";
        let model = ScriptedModel::from_text(script, Path::new("mine.toml")).unwrap();
        let (reply, _) = complete(&model, vec![ChatMessage::user("hello there")]).await;
        let message = reply.unwrap_err().to_string();
        assert!(
            message.contains(
                "no scenario of the script mine.toml matches the question \"hello there\""
            ),
            "{message}"
        );
    }
}
