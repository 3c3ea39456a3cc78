//! Where messages sent to a run while it works (steering) wait for its driver: one inbox per
//! run in progress in this process, open while the run is driven. The driver feeds each
//! message to the machine as `Input::Steer` (`machine/steering.rs` says when it joins the
//! conversation).

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use tokio::sync::mpsc;
use uuid::Uuid;

/// The inboxes of the runs driven in this process.
#[derive(Default)]
pub struct SteeringBoard {
    inboxes: Mutex<HashMap<Uuid, mpsc::UnboundedSender<String>>>,
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
        match self.lock().get(&run_id) {
            Some(inbox) if inbox.send(text.to_string()).is_ok() => Ok(()),
            _ => Err(SteerError::NotRunning(run_id)),
        }
    }

    /// Opens the inbox of `run_id` for its driver; it closes when dropped.
    pub(crate) fn open(self: &Arc<Self>, run_id: Uuid) -> Inbox {
        let (sender, receiver) = mpsc::unbounded_channel();
        self.lock().insert(run_id, sender);
        Inbox {
            board: self.clone(),
            run_id,
            receiver,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<Uuid, mpsc::UnboundedSender<String>>> {
        // A map of senders cannot be left half-changed by a panic.
        self.inboxes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// The messages sent to one run, for its driver.
pub(crate) struct Inbox {
    board: Arc<SteeringBoard>,
    run_id: Uuid,
    receiver: mpsc::UnboundedReceiver<String>,
}

impl Inbox {
    /// The next message; pending forever once none can come.
    pub(crate) async fn recv(&mut self) -> String {
        match self.receiver.recv().await {
            Some(text) => text,
            None => std::future::pending().await,
        }
    }
}

impl Drop for Inbox {
    fn drop(&mut self) {
        self.board.lock().remove(&self.run_id);
    }
}
