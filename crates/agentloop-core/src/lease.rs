//! A run's hold on its session, kept while the run is driven: the session's lock expires
//! [`SESSION_LEASE`] after it was last renewed, so that a session whose process died is free
//! again; a run at work renews it every third of that.

use std::sync::Arc;

use uuid::Uuid;

use crate::store::{SESSION_LEASE, Store};

/// Renews a run's session lease while it lives; stops when dropped.
pub(crate) struct LeaseRenewal(tokio::task::JoinHandle<()>);

impl LeaseRenewal {
    pub(crate) fn start(store: Arc<dyn Store>, session_id: Uuid, run_id: Uuid) -> LeaseRenewal {
        LeaseRenewal(tokio::spawn(renew_lease(store, session_id, run_id)))
    }
}

impl Drop for LeaseRenewal {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn renew_lease(store: Arc<dyn Store>, session_id: Uuid, run_id: Uuid) {
    let mut ticks = tokio::time::interval(SESSION_LEASE / 3);
    ticks.tick().await;
    loop {
        ticks.tick().await;
        if let Err(error) = store
            .renew_session_lock(session_id, run_id, SESSION_LEASE)
            .await
        {
            tracing::warn!(%session_id, %run_id, %error, "cannot renew the session lease");
        }
    }
}
