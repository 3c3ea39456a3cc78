//! Where messages sent to a run while it works (steering) wait for its driver: one inbox per
//! run in progress in this process, open while the run is driven. The driver feeds each
//! message to the machine as `Input::Steer` (`machine/steering.rs` says when it joins the
//! conversation).

use std::{
    collections::{HashMap, VecDeque},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use tokio::sync::Notify;
use uuid::Uuid;

/// The inboxes of the runs driven in this process.
#[derive(Default)]
pub struct SteeringBoard {
    inboxes: Mutex<HashMap<Uuid, Arc<Mailbox>>>,
}

/// Why a message cannot be sent to a run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SteerError {
    #[error("the message is empty")]
    Empty,
    /// The run is not driven in this process: it ended, is paused, or works elsewhere.
    #[error("run {0} is not working in this process")]
    NotRunning(Uuid),
}

impl SteeringBoard {
    /// Sends `text` to the run `run_id`, which must be driven in this process.
    pub fn send(&self, run_id: Uuid, text: &str) -> Result<(), SteerError> {
        let text = text.trim();
        if text.is_empty() {
            return Err(SteerError::Empty);
        }
        let mailbox = self
            .lock()
            .get(&run_id)
            .cloned()
            .ok_or(SteerError::NotRunning(run_id))?;
        mailbox.put(text.to_string());
        Ok(())
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

/// Where one run's messages wait. A queue and a wake-up, not a channel: every run has an inbox
/// and few are ever sent a message, and tokio's channel takes some 1.3 KB per run as it opens
/// (its shared state and a first block of 32 slots); this takes about a tenth of that.
#[derive(Default)]
struct Mailbox {
    messages: Mutex<VecDeque<String>>,
    arrived: Notify,
}

impl Mailbox {
    fn put(&self, text: String) {
        self.queue().push_back(text);
        // Kept as a permit when the driver is not waiting: its next wait returns at once.
        self.arrived.notify_one();
    }

    fn take(&self) -> Option<String> {
        self.queue().pop_front()
    }

    fn queue(&self) -> MutexGuard<'_, VecDeque<String>> {
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
    pub(crate) async fn recv(&mut self) -> String {
        loop {
            if let Some(text) = self.mailbox.take() {
                return text;
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
