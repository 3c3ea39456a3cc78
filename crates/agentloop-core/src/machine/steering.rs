//! Steering: messages the user sends while the run works (seed 001's "user interruption").
//! They wait in the state until the next LLM call of a step or of the summary, join the
//! conversation then, in the order they came (`user_message` each), and the run goes on. They
//! never cut into a tool batch, and a run whose model answers while messages wait answers them
//! in the same run.

use agentloop_protocol::{ChatMessage, EventKind, MessageKind};

use super::{RunMachine, state::Phase};

impl RunMachine {
    /// Queues a message of the user; ignored by a run that is paused or ended (the caller
    /// refuses those).
    pub(super) fn steer(&mut self, text: String) {
        if matches!(
            self.state.phase,
            Phase::AwaitingInput { .. } | Phase::Finished { .. }
        ) {
            return;
        }
        let text = text.trim().to_string();
        if !text.is_empty() {
            self.state.steering.push(text);
        }
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
