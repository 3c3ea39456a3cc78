//! Steering: messages the user sends while the run works (seed 001's "user interruption").
//! They wait in the state until the next LLM call of a step or of the summary, join the
//! conversation then, in the order they came (`user_message` each), and the run goes on. They
//! never cut into a tool batch, and a run whose model answers while messages wait answers them
//! in the same run.
//!
//! The machine takes a message only when a further LLM call will read it: not while the run's
//! last allowed step or its summary is under way (`SteerError::TooLate`), nor when it is paused
//! or ended. A message it took that no LLM call read (the run failed, was cancelled, or a
//! finalize tool answered) is kept in the session after the run's answer, as the user's next
//! message.

use agentloop_protocol::{ChatMessage, EventKind, MessageKind};
use uuid::Uuid;

use super::{RunMachine, state::Phase};

/// Why a message cannot be sent to a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    #[error("the message is empty")]
    Empty,
    /// The run is not driven in this process: it ended, is paused, or works elsewhere.
    #[error("run {0} is not working in this process")]
    NotRunning(Uuid),
    /// The run makes no further LLM call that would read the message: its last allowed step
    /// or its summary is under way.
    #[error(
        "run {0} is making its last LLM call and will not read this message; send it as a new \
         message once the run ends"
    )]
    TooLate(Uuid),
}

impl RunMachine {
    /// Queues a message of the user, or says why the run cannot take it.
    pub(super) fn steer(&mut self, text: String) -> Result<(), SteerError> {
        let run_id = self.run_id();
        let text = text.trim().to_string();
        if text.is_empty() {
            return Err(SteerError::Empty);
        }
        match self.state.phase {
            Phase::AwaitingInput { .. } | Phase::Finished { .. } => {
                return Err(SteerError::NotRunning(run_id));
            }
            Phase::AwaitingFinalize { .. } | Phase::AwaitingOutput { .. } => {
                return Err(SteerError::TooLate(run_id));
            }
            // The model may answer without calling tools: the run ends with that answer.
            Phase::AwaitingStep if self.state.iteration >= self.state.input.max_iterations => {
                return Err(SteerError::TooLate(run_id));
            }
            _ => {}
        }
        self.state.steering.push(text);
        Ok(())
    }

    /// Whether messages of the user wait for the next LLM call.
    pub(super) fn has_steering(&self) -> bool {
        !self.state.steering.is_empty()
    }

    /// Adds the waiting messages to the conversation, each with its `user_message` event.
    pub(super) fn apply_steering(&mut self) {
        for text in std::mem::take(&mut self.state.steering) {
            self.emit(EventKind::UserMessage { text: text.clone() });
            self.push_message(
                MessageKind::Dialogue,
                ChatMessage::user(text),
                serde_json::Value::Null,
            );
        }
    }
}
