//! [`JsonToolCalling`]: tool calling for models that have none. The tools are described in the
//! prompt and the model answers one JSON object per turn; the loop above sees ordinary tool
//! calls and answers, so everything else behaves as in native mode.

mod parse;
mod prompt;

use std::fmt;
use std::sync::Arc;

use agentloop_core::protocol::{ChatMessage, ToolCall, Usage};
use agentloop_core::{CallPurpose, Llm, LlmError, ModelReply, ModelRequest, TextSink, ToolChoice};
use async_trait::async_trait;
use uuid::Uuid;

use agentloop_core::ObjectError;
use parse::{Action, ActionProblem, parse_reply};

/// Wraps an [`Llm`] that cannot call tools natively (`llm.tool_calling = "json"`).
///
/// The inner model gets no `tools`; it reads them in a second system message and replies
/// `{"action": "tool", "tool", "parameters", "reasoning"}` or `{"action": "finalize",
/// "answer"}`. A reply that cannot be read is sent back once with the problem; a second
/// unreadable reply becomes an empty reply, which the loop handles like any degenerate one.
pub struct JsonToolCalling {
    inner: Arc<dyn Llm>,
}

impl JsonToolCalling {
    pub fn new(inner: Arc<dyn Llm>) -> Self {
        Self { inner }
    }

    async fn ask(&self, request: &ModelRequest) -> Result<ModelReply, LlmError> {
        // Raw JSON is not for the user: the readable part is passed on once it is parsed.
        let mut discard = |_: &str| {};
        self.inner.complete(request, &mut discard).await
    }

    /// A step or the forced summary: the action protocol, one retry for an unreadable reply.
    async fn step(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        let finalize_only = request.tool_choice == ToolChoice::None;
        let mut converted = prompt::convert(request);
        let first = self.ask(&converted).await?;
        let error = match read(&first, finalize_only) {
            Ok(action) => {
                return Ok(into_reply(
                    action,
                    first.finish_reason,
                    first.usage,
                    on_text,
                ));
            }
            Err(error) => error,
        };
        tracing::debug!(%error, "the model's JSON reply could not be read; asking once more");
        let unreadable = ChatMessage::assistant(first.content.unwrap_or_default());
        let correction = ChatMessage::user(prompt::correction(&error.to_string(), finalize_only));
        converted.messages.push(Arc::new(unreadable));
        converted.messages.push(Arc::new(correction));
        let second = self.ask(&converted).await?;
        let usage = sum(first.usage, second.usage);
        match read(&second, finalize_only) {
            Ok(action) => Ok(into_reply(action, second.finish_reason, usage, on_text)),
            Err(error) => {
                tracing::warn!(%error, "the model's JSON reply could not be read twice");
                // Neither text nor calls: the loop counts it as a degenerate reply.
                Ok(ModelReply {
                    content: None,
                    tool_calls: Vec::new(),
                    finish_reason: second.finish_reason,
                    usage,
                    model: None,
                    id: second.id,
                })
            }
        }
    }
}

#[async_trait]
impl Llm for JsonToolCalling {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        match request.purpose {
            // A call that can only give a run's typed answer: the value is its whole reply,
            // with no action around it.
            CallPurpose::Step | CallPurpose::Finalize
                if request.output.is_some() && request.tools.is_empty() =>
            {
                let converted = prompt::convert_without_protocol(request);
                self.inner.complete(&converted, on_text).await
            }
            CallPurpose::Step | CallPurpose::Finalize => self.step(request, on_text).await,
            // These ask for JSON of their own and read the reply themselves: only the native
            // tool calling is taken out of the request.
            CallPurpose::Plan
            | CallPurpose::Review
            | CallPurpose::Guardrail
            | CallPurpose::Sampling => {
                let converted = prompt::convert_without_protocol(request);
                self.inner.complete(&converted, on_text).await
            }
        }
    }
}

impl fmt::Debug for JsonToolCalling {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonToolCalling").finish_non_exhaustive()
    }
}

fn read(reply: &ModelReply, finalize_only: bool) -> Result<Action, ObjectError<ActionProblem>> {
    let action = parse_reply(reply.content.as_deref().unwrap_or_default())?;
    if finalize_only && matches!(action, Action::Tool { .. }) {
        return Err(ObjectError::Refused(ActionProblem::ToolsNotAllowed));
    }
    Ok(action)
}

/// The reply the loop expects; its human-readable text goes to `on_text` once.
fn into_reply(
    action: Action,
    finish_reason: Option<String>,
    usage: Option<Usage>,
    on_text: TextSink<'_>,
) -> ModelReply {
    let (content, tool_calls) = match action {
        Action::Tool {
            tool,
            parameters,
            reasoning,
        } => {
            let call = ToolCall {
                id: call_id(),
                name: tool,
                arguments: serde_json::Value::Object(parameters).to_string(),
            };
            let reasoning = (!reasoning.is_empty()).then_some(reasoning);
            (reasoning, vec![call])
        }
        Action::Finalize { answer } => (Some(answer), Vec::new()),
    };
    if let Some(text) = &content {
        on_text(text);
    }
    ModelReply {
        content,
        tool_calls,
        finish_reason,
        usage,
        model: None,
        id: None,
    }
}

/// Unique within a run, shaped like a provider's ids.
fn call_id() -> String {
    let id: String = Uuid::new_v4()
        .simple()
        .to_string()
        .chars()
        .take(24)
        .collect();
    format!("call_{id}")
}

fn sum(a: Option<Usage>, b: Option<Usage>) -> Option<Usage> {
    match (a, b) {
        (Some(mut a), Some(b)) => {
            a.add(b);
            Some(a)
        }
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests;
