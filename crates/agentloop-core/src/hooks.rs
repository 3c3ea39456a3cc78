//! Hooks around tool calls (seed 003's before/after hooks, seed 000's side effects): before a
//! call runs, a hook may rewrite its arguments or skip it; after a call succeeded, a hook may
//! report a side effect — a note the model and the user read, and whether the user's view
//! should refresh. Side effects run exactly once per successful call: repeated calls are not
//! executed, so they have none.

use async_trait::async_trait;
use serde_json::Value;

use crate::{
    settings::ToolSettings,
    tool::{ToolContext, ToolOutput},
};

/// What a before-call hook decides.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BeforeCall {
    Proceed,
    /// The call does not run; the model reads the reason.
    Skip {
        reason: String,
    },
}

/// A call that succeeded, as after-call hooks see it.
#[derive(Debug)]
pub struct CompletedCall<'a> {
    /// Internal tool name.
    pub tool: &'a str,
    pub arguments: &'a Value,
    pub output: &'a ToolOutput,
    pub context: &'a ToolContext,
    pub settings: &'a ToolSettings,
}

/// What a side effect reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SideEffect {
    /// Added to the conversation as `[Side Effect] note` and sent as a `side_effect` event.
    pub note: Option<String>,
    /// Asks the client to refresh its view (`done.should_refresh`).
    pub refresh: bool,
}

/// A side effect that failed: the message becomes a `[Side Effect Error]` note for the model
/// and the user; the cause, when there is one, is the error's `source()`.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct SideEffectError {
    pub message: String,
    #[source]
    pub cause: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl SideEffectError {
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            cause: None,
        }
    }

    /// The same error, caused by `cause`.
    pub fn caused_by(mut self, cause: impl std::error::Error + Send + Sync + 'static) -> Self {
        self.cause = Some(Box::new(cause));
        self
    }
}

/// Runs around every tool call of an agent.
#[async_trait]
pub trait ToolHook: Send + Sync {
    async fn before_call(
        &self,
        tool: &str,
        arguments: &mut Value,
        context: &ToolContext,
    ) -> BeforeCall {
        let _ = (tool, arguments, context);
        BeforeCall::Proceed
    }

    /// An error does not fail the call nor the run: it becomes a `[Side Effect Error]` note.
    async fn after_call(&self, call: &CompletedCall<'_>) -> Result<SideEffect, SideEffectError> {
        let _ = call;
        Ok(SideEffect::default())
    }
}
