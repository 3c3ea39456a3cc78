//! Where messages sent to a run while it works (steering) wait for its driver: one inbox per
//! run in progress in this process, open while the run is driven. The driver feeds each
//! message to the machine as `Input::Steer` and hands the machine's answer back to the sender
//! (`machine/steering.rs` says when a message is taken and when it joins the conversation).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::{Notify, oneshot};
use uuid::Uuid;

pub use crate::machine::SteerError;

/// The inboxes of the runs driven in this process.
#[derive(Default)]
pub struct SteeringBoard {
    inboxes: Mutex<HashMap<Uuid, Arc<Mailbox>>>,
}

impl SteeringBoard {
    /// Sends `text` to the run `run_id`, which must be driven in this process, and waits for
    /// the run's answer: taken (it joins the conversation before the run's next LLM call), or
    /// refused and why. The message is posted when this is called; the future waits for the
    /// answer only.
    pub fn send(
        &self,
        run_id: Uuid,
        text: &str,
    ) -> impl Future<Output = Result<(), SteerError>> + Send + 'static {
        let posted = self.post(run_id, text);
        async move {
            // An inbox closed with the message in it: the run ended, or paused, first.
            posted?.await.unwrap_or(Err(SteerError::NotRunning(run_id)))
        }
    }

    fn post(&self, run_id: Uuid, text: &str) -> Result<oneshot::Receiver<Answer>, SteerError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SteerError::Empty);
        }
        let mailbox = self
            .lock()
            .get(&run_id)
            .cloned()
            .ok_or(SteerError::NotRunning(run_id))?;
        let (reply, answer) = oneshot::channel();
        mailbox.put(Letter {
            text: text.to_string(),
            reply,
        });
        Ok(answer)
    }

    /// Opens the inbox of `run_id` for its driver; it closes when dropped.
    pub(crate) fn open(self: &Arc<Self>, run_id: Uuid) -> Inbox {
        let mailbox = Arc::new(Mailbox::default());
        self.lock().insert(run_id, mailbox.clone());
        Inbox {
            board: self.clone(),
            run_id,
            mailbox,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, Arc<Mailbox>>> {
        // A map of mailboxes cannot be left half-changed by a panic.
        self.inboxes.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The run's answer to a message.
type Answer = Result<(), SteerError>;

/// A message, and where the run's answer to it goes.
pub(crate) struct Letter {
    pub(crate) text: String,
    reply: oneshot::Sender<Answer>,
}

impl Letter {
    /// Tells the sender what the run did with the message.
    pub(crate) fn answer(self, answer: Answer) {
        // A sender that stopped waiting does not need the answer.
        let _ = self.reply.send(answer);
    }
}

/// Where one run's messages wait. A queue and a wake-up, not a channel: every run has an inbox
/// and few are ever sent a message, and tokio's channel takes some 1.3 KB per run as it opens
/// (its shared state and a first block of 32 slots); this takes about a tenth of that. Each
/// message brings its own one-shot channel for the answer.
#[derive(Default)]
struct Mailbox {
    messages: Mutex<VecDeque<Letter>>,
    arrived: Notify,
}

impl Mailbox {
    fn put(&self, letter: Letter) {
        self.queue().push_back(letter);
        // Kept as a permit when the driver is not waiting: its next wait returns at once.
        self.arrived.notify_one();
    }

    fn take(&self) -> Option<Letter> {
        self.queue().pop_front()
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<Letter>> {
        // A queue of strings cannot be left half-changed by a panic.
        self.messages.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The messages sent to one run, for its driver.
pub(crate) struct Inbox {
    board: Arc<SteeringBoard>,
    run_id: Uuid,
    mailbox: Arc<Mailbox>,
}

impl Inbox {
    /// The next message, in the order they were sent. Cancel-safe: a message is taken only
    /// when it is returned, so a `select!` that drops this future loses none.
    pub(crate) async fn recv(&mut self) -> Letter {
        loop {
            if let Some(letter) = self.mailbox.take() {
                return letter;
            }
            self.mailbox.arrived.notified().await;
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.board.lock().remove(&self.run_id);
    }
}

#[cfg(test)]
mod tests;
