//! The durable outbox of push notifications (A2A's, for a task's state changes): where a
//! task's client asked to be told (`PushTarget`), and the notifications to send, queued once
//! per target and state change (keyed by the event seq of the change), claimed for a while by
//! the instance that sends them, retried with backoff, and marked sent. A claim left by an
//! instance that died runs out, and another instance sends the notification.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

use crate::StoreError;

/// Where a run's state changes are pushed (A2A's `TaskPushNotificationConfig`).
#[derive(Debug, Clone, PartialEq)]
pub struct PushTarget {
    pub run_id: Uuid,
    /// The config's id, unique in its run.
    pub id: String,
    pub user_id: String,
    pub url: String,
    /// Sent as `X-A2A-Notification-Token`, and the key of the HMAC signature.
    pub token: Option<String>,
    /// `Authorization: {scheme} {credentials}` on each notification.
    pub auth_scheme: Option<String>,
    pub auth_credentials: Option<String>,
    /// Only state changes at events after this seq are sent (the run's last event when the
    /// target was set on a task already under way).
    pub after_seq: u64,
}

/// A notification claimed for sending.
#[derive(Debug, Clone, PartialEq)]
pub struct PushDelivery {
    pub target: PushTarget,
    /// The seq of the event that changed the state: with the run and the target, the
    /// notification's id.
    pub seq: u64,
    /// The JSON body.
    pub payload: String,
    /// Tries so far, this one included.
    pub attempts: u32,
}

/// The store of push targets and the outbox.
#[async_trait]
pub trait PushOutbox: Send + Sync {
    /// Sets (or replaces) a target of its run.
    async fn put_push_target(&self, target: &PushTarget) -> Result<(), StoreError>;

    /// The targets of a run.
    async fn push_targets(&self, run_id: Uuid) -> Result<Vec<PushTarget>, StoreError>;

    /// Deletes a target (and what it has in the outbox); false when there was none.
    async fn delete_push_target(&self, run_id: Uuid, id: &str) -> Result<bool, StoreError>;

    /// Targets whose run may still change state.
    async fn open_push_targets(&self) -> Result<Vec<PushTarget>, StoreError>;

    /// Queues the notifications `(seq, payload)` of a target (each once: one queued already is
    /// left as it is); `finished`: its run reached a final state, nothing more will come.
    async fn queue_pushes(
        &self,
        run_id: Uuid,
        target_id: &str,
        pushes: &[(u64, String)],
        finished: bool,
    ) -> Result<(), StoreError>;

    /// Claims the next notification due (the oldest of its target not sent yet) for `owner`
    /// until `until`; none when nothing is due.
    async fn claim_push(
        &self,
        owner: &str,
        now: DateTime<Utc>,
        until: DateTime<Utc>,
    ) -> Result<Option<PushDelivery>, StoreError>;

    /// The notification was received.
    async fn push_sent(&self, delivery: &PushDelivery, at: DateTime<Utc>)
    -> Result<(), StoreError>;

    /// The notification failed: tried again at `retry_at`, or never (`None`: given up).
    async fn push_failed(
        &self,
        delivery: &PushDelivery,
        retry_at: Option<DateTime<Utc>>,
        at: DateTime<Utc>,
    ) -> Result<(), StoreError>;
}
