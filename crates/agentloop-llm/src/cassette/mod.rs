//! Cassettes: the LLM exchanges of a session saved to a JSON file (`llm.record`, `agentloop run
//! --record FILE`) and answered from it with no network (`llm.replay`, `--replay FILE`).
//!
//! Both are `Llm` wrappers: [`Recorder`] wraps the real client of any provider and saves each
//! request as agentloop sends it (model, messages, tools, tool choice, purpose) with the reply
//! as it came (the streamed pieces, tool calls, finish reason, usage) or its error; [`Player`]
//! replaces the client and answers each request from the recording, failing with the first
//! difference (a JSON path) when the request is not the recorded one. The wrappers see no HTTP,
//! so no key or header can reach a cassette; values of the API key's variables are also
//! replaced by `[redacted]` should a prompt or a tool result carry one.

mod diff;

use std::{
    path::{Path, PathBuf},
    sync::{Arc, Mutex, PoisonError},
};

use agentloop_core::{
    CallPurpose, InvalidSetting, Llm, LlmError, ModelReply, ModelRequest, TextSink, ToolChoice,
    protocol::{ToolCall, Usage},
};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

pub use diff::{Difference, first_difference};

/// The file format's version, in its `agentloop_cassette` key.
const VERSION: u32 = 1;
const REDACTED: &str = "[redacted]";

/// A cassette file.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Cassette {
    pub agentloop_cassette: u32,
    /// The provider and model that answered.
    pub provider: String,
    pub model: String,
    pub exchanges: Vec<Exchange>,
}

/// One LLM call: the request as sent, and the reply or the error.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Exchange {
    pub request: Value,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reply: Option<RecordedReply>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RecordedError>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedReply {
    /// The text as it was streamed, piece by piece.
    #[serde(default)]
    pub streamed: Vec<String>,
    #[serde(default)]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default)]
    pub finish_reason: Option<String>,
    #[serde(default)]
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RecordedError {
    pub code: String,
    pub message: String,
}

/// The request as a cassette keeps it (and compares it).
pub fn request_json(request: &ModelRequest) -> Value {
    let purpose = match request.purpose {
        CallPurpose::Step => "step",
        CallPurpose::Finalize => "summary",
        CallPurpose::Plan => "plan",
        CallPurpose::Review => "review",
        CallPurpose::Guardrail => "guardrail",
        CallPurpose::Sampling => "sampling",
    };
    let tool_choice = match request.tool_choice {
        ToolChoice::Auto => "auto",
        ToolChoice::None => "none",
    };
    let tools: Vec<Value> = request
        .tools
        .iter()
        .map(|tool| {
            json!({"name": tool.name, "description": tool.description,
                   "parameters": tool.parameters.as_ref()})
        })
        .collect();
    let messages: Vec<Value> = request
        .messages
        .iter()
        .map(|message| serde_json::to_value(message.as_ref()).unwrap_or(Value::Null))
        .collect();
    json!({"model": request.model, "purpose": purpose, "tool_choice": tool_choice,
           "messages": messages, "tools": tools})
}

fn cassette_error(key: &str, message: String) -> LlmError {
    LlmError::InvalidConfig(InvalidSetting::new(key, message))
}

/// Saves every exchange of the wrapped client to a cassette, rewriting the file after each so
/// that a run cut short keeps what it did.
pub struct Recorder {
    inner: Arc<dyn Llm>,
    path: PathBuf,
    secrets: Vec<String>,
    cassette: Mutex<Cassette>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("path", &self.path)
            .finish()
    }
}

impl Recorder {
    /// Starts the cassette at `path` (written at once, empty, so that a path that cannot be
    /// written fails now); `secrets` are values never to write (the API key).
    pub fn new(
        inner: Arc<dyn Llm>,
        path: &Path,
        provider: &str,
        model: &str,
        secrets: Vec<String>,
    ) -> Result<Recorder, LlmError> {
        let recorder = Recorder {
            inner,
            path: path.to_path_buf(),
            // Short values would redact common words; keys are long.
            secrets: secrets
                .into_iter()
                .filter(|s| s.trim().len() >= 8)
                .collect(),
            cassette: Mutex::new(Cassette {
                agentloop_cassette: VERSION,
                provider: provider.to_string(),
                model: model.to_string(),
                exchanges: Vec::new(),
            }),
        };
        let empty = recorder
            .cassette
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        recorder.write(&empty)?;
        Ok(recorder)
    }

    fn write(&self, cassette: &Cassette) -> Result<(), LlmError> {
        let mut text = serde_json::to_string_pretty(cassette)
            .map_err(|error| cassette_error("llm.record", error.to_string()))?;
        for secret in &self.secrets {
            text = text.replace(secret.as_str(), REDACTED);
        }
        text.push('\n');
        let temporary = self.path.with_extension("partial");
        std::fs::write(&temporary, text)
            .and_then(|()| std::fs::rename(&temporary, &self.path))
            .map_err(|error| {
                cassette_error(
                    "llm.record",
                    format!("cannot write the cassette {}: {error}", self.path.display()),
                )
            })
    }
}

#[async_trait]
impl Llm for Recorder {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let mut streamed = Vec::new();
        let result = {
            let mut sink = |text: &str| {
                streamed.push(text.to_string());
                on_text(text);
            };
            self.inner.complete(request, &mut sink).await
        };
        let exchange = Exchange {
            request: request_json(request),
            reply: result.as_ref().ok().map(|reply| RecordedReply {
                streamed,
                content: reply.content.clone(),
                tool_calls: reply.tool_calls.clone(),
                finish_reason: reply.finish_reason.clone(),
                usage: reply.usage,
            }),
            error: result.as_ref().err().map(|error| RecordedError {
                code: error.code().as_str().to_string(),
                message: error.to_string(),
            }),
        };
        let snapshot = {
            let mut cassette = self.cassette.lock().unwrap_or_else(PoisonError::into_inner);
            cassette.exchanges.push(exchange);
            cassette.clone()
        };
        if let Err(error) = self.write(&snapshot) {
            tracing::warn!(%error, "the cassette misses an exchange");
        }
        result
    }
}

/// Answers from a cassette, with no network.
pub struct Player {
    path: PathBuf,
    cassette: Cassette,
    /// Which exchanges were answered.
    used: Mutex<Vec<bool>>,
}

impl std::fmt::Debug for Player {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Player").field("path", &self.path).finish()
    }
}

impl Player {
    pub fn load(path: &Path) -> Result<Player, LlmError> {
        let text = std::fs::read_to_string(path).map_err(|error| {
            cassette_error(
                "llm.replay",
                format!("cannot read the cassette {}: {error}", path.display()),
            )
        })?;
        let cassette: Cassette = serde_json::from_str(&text).map_err(|error| {
            cassette_error(
                "llm.replay",
                format!("{} is not an agentloop cassette: {error}", path.display()),
            )
        })?;
        if cassette.agentloop_cassette != VERSION {
            return Err(cassette_error(
                "llm.replay",
                format!(
                    "{} is a cassette of version {}; this agentloop reads version {VERSION}",
                    path.display(),
                    cassette.agentloop_cassette
                ),
            ));
        }
        let used = Mutex::new(vec![false; cassette.exchanges.len()]);
        Ok(Player {
            path: path.to_path_buf(),
            cassette,
            used,
        })
    }

    /// The exchange answering `request`: the next one in order when it matches, else any
    /// unanswered one that matches (runs of a server may interleave).
    fn take(&self, request: &Value) -> Result<&Exchange, LlmError> {
        let mut used = self.used.lock().unwrap_or_else(PoisonError::into_inner);
        let exchanges = &self.cassette.exchanges;
        let Some(next) = used.iter().position(|done| !done) else {
            return Err(LlmError::NoAnswer(format!(
                "the cassette {} has {} exchange(s), all answered, and the run asks for one \
                 more: record the session again (--record)",
                self.path.display(),
                exchanges.len()
            )));
        };
        let found = std::iter::once(next)
            .chain((next + 1..exchanges.len()).filter(|&i| !used[i]))
            .find(|&i| first_difference(&exchanges[i].request, request).is_none());
        match found {
            Some(index) => {
                used[index] = true;
                Ok(&exchanges[index])
            }
            None => {
                let difference = first_difference(&exchanges[next].request, request)
                    .map(|difference| difference.to_string())
                    .unwrap_or_default();
                Err(LlmError::NoAnswer(format!(
                    "the request differs from the recording: exchange {} of {} in the cassette \
                     {} differs {difference}. Record the session again (--record) if the \
                     change is intended",
                    next + 1,
                    exchanges.len(),
                    self.path.display()
                )))
            }
        }
    }
}

#[async_trait]
impl Llm for Player {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let exchange = self.take(&request_json(request))?;
        match (&exchange.reply, &exchange.error) {
            (Some(reply), _) => {
                for piece in &reply.streamed {
                    on_text(piece);
                }
                Ok(ModelReply {
                    content: reply.content.clone(),
                    tool_calls: reply.tool_calls.clone(),
                    finish_reason: reply.finish_reason.clone(),
                    usage: reply.usage,
                    model: None,
                    id: None,
                })
            }
            (None, Some(error)) => Err(LlmError::NoAnswer(format!(
                "the recorded call failed ({}): {}",
                error.code, error.message
            ))),
            (None, None) => Err(LlmError::NoAnswer(format!(
                "an exchange of the cassette {} has neither reply nor error",
                self.path.display()
            ))),
        }
    }
}
