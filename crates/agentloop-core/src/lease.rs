//! A run's hold on its session, kept while the run is driven: the session's lock expires
//! [`SESSION_LEASE`] after it was last renewed, so that a session whose process died is free
//! again; a run at work renews it every third of that.
//!
//! The renewal is part of the run's own future ([`Leased`]), not a task of its own: a task
//! per run was spawned at its start and aborted at its end, each time scheduling a task that
//! woke the runtime's other worker, and it kept its own allocation for the whole run.

use std::{
    pin::Pin,
    sync::Arc,
    task::{Context, Poll},
    time::Duration,
};

use futures::future::BoxFuture;
use tokio::time::{Instant, Interval, MissedTickBehavior};
use uuid::Uuid;

use crate::store::{SESSION_LEASE, Store, StoreError};

/// How often a run at work renews its session's lease.
const RENEW_EVERY: Duration = Duration::from_secs(SESSION_LEASE.as_secs() / 3);

/// How a lease is renewed: once per call, a store call.
type Renew = Box<dyn Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync>;

/// A run's session lease, to renew while the run is driven.
pub(crate) struct LeaseRenewal {
    session_id: Uuid,
    run_id: Uuid,
    renew: Renew,
}

impl LeaseRenewal {
    /// The lease of `run_id` on `session_id`, renewed in `store` for [`SESSION_LEASE`] each time.
    pub(crate) fn in_store(store: Arc<dyn Store>, session_id: Uuid, run_id: Uuid) -> LeaseRenewal {
        LeaseRenewal::with(session_id, run_id, move || {
            let store = store.clone();
            Box::pin(async move {
                store
                    .renew_session_lock(session_id, run_id, SESSION_LEASE)
                    .await
            })
        })
    }

    fn with(
        session_id: Uuid,
        run_id: Uuid,
        renew: impl Fn() -> BoxFuture<'static, Result<(), StoreError>> + Send + Sync + 'static,
    ) -> LeaseRenewal {
        LeaseRenewal {
            session_id,
            run_id,
            renew: Box::new(renew),
        }
    }
}

pin_project_lite::pin_project! {
    /// `work`, with its lease (if any) renewed every [`RENEW_EVERY`] until the work is done.
    pub(crate) struct Leased<F> {
        #[pin]
        work: F,
        lease: Option<Box<Renewing>>,
    }
}

struct Renewing {
    lease: LeaseRenewal,
    ticks: Interval,
    /// The renewal under way.
    renewal: Option<BoxFuture<'static, Result<(), StoreError>>>,
}

impl<F: Future> Leased<F> {
    pub(crate) fn new(work: F, lease: Option<LeaseRenewal>) -> Leased<F> {
        let lease = lease.map(|lease| {
            let mut ticks = tokio::time::interval_at(Instant::now() + RENEW_EVERY, RENEW_EVERY);
            // A run whose task waited long renews once, not once per period it missed.
            ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
            Box::new(Renewing {
                lease,
                ticks,
                renewal: None,
            })
        });
        Leased { work, lease }
    }
}

impl<F: Future> Future for Leased<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let this = self.project();
        if let Poll::Ready(output) = this.work.poll(cx) {
            return Poll::Ready(output);
        }
        if let Some(renewing) = this.lease {
            renewing.poll_renew(cx);
        }
        Poll::Pending
    }
}

impl Renewing {
    /// Renews when it is time, until the next renewal is only a timer away.
    fn poll_renew(&mut self, cx: &mut Context<'_>) {
        loop {
            if let Some(renewal) = &mut self.renewal {
                let Poll::Ready(renewed) = renewal.as_mut().poll(cx) else {
                    return;
                };
                self.renewal = None;
                if let Err(error) = renewed {
                    let (session_id, run_id) = (self.lease.session_id, self.lease.run_id);
                    tracing::warn!(%session_id, %run_id, %error, "cannot renew the session lease");
                }
            }
            if self.ticks.poll_tick(cx).is_pending() {
                return;
            }
            self.renewal = Some((self.lease.renew)());
        }
    }
}

#[cfg(test)]
mod tests;
