//! Push notifications of tasks' state changes, from the durable outbox (`PushOutbox`): every
//! instance looks at the targets whose runs may still change (each time the store has news of
//! a run, and every half second), queues each state change once (the outbox's key is the
//! event's seq), then sends what is due, one notification claimed at a time. A notification
//! is a POST of its JSON (A2A's `StreamResponse`: a `statusUpdate`, the `task` for a final
//! state) with `X-A2A-Notification-Token` (the config's token), an HMAC-SHA256 of the body
//! keyed by that token (`X-Agentloop-Signature: sha256=HEX`), the config's `Authorization`,
//! and a stable `X-A2A-Notification-Id` (the same on a retry) a receiver can dedupe on.
//! A failure is tried again with backoff (1 s, doubling, at most 5 min) and given up after
//! `MAX_ATTEMPTS`. A notification whose sender was killed mid-send is sent again once its
//! claim runs out, so a receiver may (rarely) get one twice, always with the same id.

use std::{sync::Arc, time::Duration};

use agentloop_core::{PushDelivery, PushOutbox, Store};
use chrono::Utc;
use sha2::{Digest, Sha256};
use tokio::task::JoinHandle;
use uuid::Uuid;

use super::task;

/// How often the targets are looked at when the store gives no news.
const SCAN_EVERY: Duration = Duration::from_millis(500);
/// How long a claimed notification is the claimer's alone.
const CLAIM: Duration = Duration::from_secs(15);
/// How long a receiver has to answer.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// Tries before a notification is given up.
const MAX_ATTEMPTS: u32 = 10;
/// The longest wait between two tries.
const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Starts sending the outbox's notifications; stops when the handle is aborted.
pub fn start(store: Arc<dyn Store>, outbox: Arc<dyn PushOutbox>) -> JoinHandle<()> {
    let owner = format!("push-{}", Uuid::now_v7());
    tokio::spawn(async move {
        let client = match reqwest::Client::builder().timeout(SEND_TIMEOUT).build() {
            Ok(client) => client,
            Err(error) => {
                tracing::error!(%error, "push notifications cannot be sent: no HTTP client");
                return;
            }
        };
        let mut news = store.run_news();
        loop {
            if let Err(error) = queue(store.as_ref(), outbox.as_ref()).await {
                tracing::warn!(%error, "cannot queue push notifications");
            }
            loop {
                let now = Utc::now();
                let until = now + chrono::Duration::from_std(CLAIM).unwrap_or_default();
                match outbox.claim_push(&owner, now, until).await {
                    Ok(Some(delivery)) => send(&client, outbox.as_ref(), delivery).await,
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(%error, "cannot claim a push notification");
                        break;
                    }
                }
            }
            match &mut news {
                Some(news) => {
                    let _ = tokio::time::timeout(SCAN_EVERY, news.recv()).await;
                }
                None => tokio::time::sleep(SCAN_EVERY).await,
            }
        }
    })
}

/// Queues the state changes of every open target not queued yet.
async fn queue(
    store: &dyn Store,
    outbox: &dyn PushOutbox,
) -> Result<(), agentloop_core::StoreError> {
    for target in outbox.open_push_targets().await? {
        let Some(run) = store.run(target.run_id).await? else {
            continue;
        };
        let events = store.events(target.run_id, 0).await?;
        let (changes, finished) = task::state_changes(
            run.id,
            run.session_id,
            Some(run.query.clone()),
            &events,
            |event| match &event.kind {
                agentloop_core::protocol::EventKind::Error { code, .. } => {
                    code.user_message().to_string()
                }
                _ => String::new(),
            },
        );
        let pushes: Vec<(u64, String)> = changes
            .into_iter()
            .filter(|(seq, _)| *seq > target.after_seq)
            .map(|(seq, payload)| (seq, payload.to_string()))
            .collect();
        outbox
            .queue_pushes(target.run_id, &target.id, &pushes, finished)
            .await?;
    }
    Ok(())
}

/// Sends one notification and records how it went.
async fn send(client: &reqwest::Client, outbox: &dyn PushOutbox, delivery: PushDelivery) {
    let target = &delivery.target;
    let id = format!("{}:{}:{}", target.run_id, target.id, delivery.seq);
    let mut request = client
        .post(&target.url)
        .header("content-type", "application/json")
        .header("x-a2a-notification-id", &id);
    if let Some(token) = &target.token {
        request = request.header("x-a2a-notification-token", token).header(
            "x-agentloop-signature",
            format!(
                "sha256={}",
                hex(&hmac_sha256(token.as_bytes(), delivery.payload.as_bytes()))
            ),
        );
    }
    if let Some(scheme) = &target.auth_scheme {
        let value = match &target.auth_credentials {
            Some(credentials) => format!("{scheme} {credentials}"),
            None => scheme.clone(),
        };
        request = request.header("authorization", value);
    }
    let outcome = request.body(delivery.payload.clone()).send().await;
    let now = Utc::now();
    let recorded = match outcome {
        Ok(response) if response.status().is_success() => outbox.push_sent(&delivery, now).await,
        failed => {
            let why = match failed {
                Ok(response) => format!("HTTP {}", response.status()),
                Err(error) => error.to_string(),
            };
            let retry_at = (delivery.attempts < MAX_ATTEMPTS).then(|| {
                let wait = backoff(delivery.attempts);
                now + chrono::Duration::from_std(wait).unwrap_or_default()
            });
            tracing::warn!(notification = %id, url = %target.url, %why, attempts = delivery.attempts,
                given_up = retry_at.is_none(), "a push notification was not received");
            outbox.push_failed(&delivery, retry_at, now).await
        }
    };
    if let Err(error) = recorded {
        tracing::warn!(notification = %id, %error, "cannot record how a push notification went");
    }
}

/// The wait before try `attempts + 1`: 1 s, doubling, at most `MAX_BACKOFF`.
fn backoff(attempts: u32) -> Duration {
    let seconds = 1u64 << attempts.saturating_sub(1).min(16);
    Duration::from_secs(seconds).min(MAX_BACKOFF)
}

/// HMAC-SHA256 (RFC 2104) of `message` keyed by `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > block.len() {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|byte| byte ^ 0x36));
    inner.update(message);
    let inner = inner.finalize();
    let mut outer = Sha256::new();
    outer.update(block.map(|byte| byte ^ 0x5c));
    outer.update(inner);
    let mut digest = [0u8; 32];
    digest.copy_from_slice(&outer.finalize());
    digest
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_signature_is_rfc_4231s_hmac_sha256() {
        // RFC 4231, test case 2.
        let digest = hmac_sha256(b"Jefe", b"what do ya want for nothing?");
        assert_eq!(
            hex(&digest),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }

    #[test]
    fn the_backoff_doubles_from_a_second_up_to_five_minutes() {
        assert_eq!(backoff(1), Duration::from_secs(1));
        assert_eq!(backoff(2), Duration::from_secs(2));
        assert_eq!(backoff(4), Duration::from_secs(8));
        assert_eq!(backoff(30), MAX_BACKOFF);
    }
}
