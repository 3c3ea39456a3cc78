//! Clarification: the run asks the user a question and pauses (`input_required` of kind
//! `clarification`) until the answer comes. The question comes from the plan, from a reviewer,
//! or from the model's `ask_user` call; the answer joins the conversation (as the `ask_user`
//! result, or as the user's reply to the question) and the trace.

use agentloop_protocol::{ChatMessage, InputKind, MessageKind};
use serde_json::json;

use super::{
    RunMachine, Step,
    batch::SlotState,
    guidance::{Clarification, PendingQuestion},
};

impl RunMachine {
    /// Pauses the run with `question` (from the plan or a reviewer); the question is part of the
    /// conversation from now on.
    pub(super) fn ask(&mut self, question: String, source: &str) -> Step {
        let message = ChatMessage::assistant(question.clone());
        self.push_message(
            MessageKind::Dialogue,
            message,
            json!({"clarification_question": source}),
        );
        self.state.guidance.question = Some(PendingQuestion {
            text: question.clone(),
            source: source.to_string(),
        });
        self.pause(InputKind::Clarification, Some(question), Vec::new())
    }

    /// The questions the batch's `ask_user` calls wait on, one per line.
    pub(super) fn batch_question(&self) -> Option<String> {
        let questions: Vec<&str> = self
            .state
            .phase
            .batch()
            .into_iter()
            .flat_map(|batch| &batch.slots)
            .filter_map(|slot| match &slot.state {
                SlotState::Asking { question } => Some(question.as_str()),
                _ => None,
            })
            .collect();
        (!questions.is_empty()).then(|| questions.join("\n"))
    }

    /// The question the paused run waits on, if it waits on one.
    pub(super) fn open_question(&self) -> Option<String> {
        self.batch_question().or_else(|| {
            self.state
                .guidance
                .question
                .as_ref()
                .map(|q| q.text.clone())
        })
    }

    /// Continues the paused run with the user's answer to its question.
    pub(super) fn answer(&mut self, answer: &str) -> Step {
        self.state.guidance.clarified = true;
        if let Some(question) = self.state.guidance.question.take() {
            self.state.guidance.log.clarifications.push(Clarification {
                question: question.text,
                answer: answer.to_string(),
                source: question.source,
            });
            let message = ChatMessage::user(answer.to_string());
            self.push_message(
                MessageKind::Dialogue,
                message,
                json!({"clarification_answer": true}),
            );
            return self.next_iteration();
        }
        let mut batch = self.state.phase.take_batch().unwrap_or_default();
        for slot in &mut batch.slots {
            let SlotState::Asking { question } = &slot.state else {
                continue;
            };
            let question = question.clone();
            let message = json!({"answer": answer}).to_string();
            slot.state = self.answered_here(
                &slot.call,
                &slot.arguments,
                answer.to_string(),
                None,
                message,
            );
            self.state.guidance.log.clarifications.push(Clarification {
                question,
                answer: answer.to_string(),
                source: "ask_user".to_string(),
            });
        }
        self.state.phase.put_batch(batch);
        self.release_batch()
    }

    /// What follows a batch's checks (or a human's approvals): its questions, else its calls.
    pub(super) fn continue_batch(&mut self) -> Step {
        match self.batch_question() {
            Some(question) => self.pause(InputKind::Clarification, Some(question), Vec::new()),
            None => self.release_batch(),
        }
    }
}
