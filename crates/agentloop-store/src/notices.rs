//! News of runs: the id of each run that saved a step, so that a client following a run
//! through the store reads its new events at once instead of asking every half second.
//!
//! In one process, every step saved through this store is announced after it commits. On
//! PostgreSQL the step's transaction also sends `NOTIFY agentloop_runs, '<run id>'` (delivered
//! when it commits), and one listener per store, started by the first follower, passes on the
//! news of every instance on the same database. A listener that loses its connection connects
//! again; news missed meanwhile are made up by the followers' slow poll.

use std::sync::Arc;
#[cfg(feature = "postgres")]
use std::sync::Mutex;
#[cfg(feature = "postgres")]
use std::time::Duration;

#[cfg(feature = "postgres")]
use sqlx::postgres::PgListener;
use tokio::sync::broadcast;
#[cfg(feature = "postgres")]
use tokio_util::task::AbortOnDropHandle;
use uuid::Uuid;

/// The PostgreSQL channel of the news (the trigger of migration 10 notifies on it).
#[cfg(feature = "postgres")]
pub(crate) const CHANNEL: &str = "agentloop_runs";

/// News kept for a follower that lags; one that falls further behind reads the store anyway.
const BACKLOG: usize = 1024;
/// A listener that cannot connect tries again after this.
#[cfg(feature = "postgres")]
const RECONNECT: Duration = Duration::from_secs(1);
/// A connection attempt gives up after this.
#[cfg(feature = "postgres")]
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

pub(crate) struct Notices {
    sender: broadcast::Sender<Uuid>,
    /// PostgreSQL: where the listener connects.
    #[cfg(feature = "postgres")]
    listen_url: Option<String>,
    #[cfg(feature = "postgres")]
    listener: Mutex<Option<AbortOnDropHandle<()>>>,
}

impl Notices {
    /// `listen_url`: a PostgreSQL database's, to hear the other instances; only this process's
    /// news without (or when built without PostgreSQL, which has no other URL).
    pub(crate) fn new(listen_url: Option<String>) -> Arc<Notices> {
        #[cfg(not(feature = "postgres"))]
        let _ = listen_url;
        Arc::new(Notices {
            sender: broadcast::channel(BACKLOG).0,
            #[cfg(feature = "postgres")]
            listen_url,
            #[cfg(feature = "postgres")]
            listener: Mutex::new(None),
        })
    }

    /// Says that `run_id` saved a step (in this process).
    pub(crate) fn announce(&self, run_id: Uuid) {
        // No follower: nobody to tell.
        let _ = self.sender.send(run_id);
    }

    /// The news from now on; on PostgreSQL, starts the listener if it is not running.
    pub(crate) fn subscribe(self: &Arc<Self>) -> broadcast::Receiver<Uuid> {
        #[cfg(feature = "postgres")]
        if let Some(url) = &self.listen_url {
            let mut listener = self
                .listener
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            if listener.is_none()
                && let Ok(runtime) = tokio::runtime::Handle::try_current()
            {
                let task = runtime.spawn(listen(url.clone(), self.sender.clone()));
                *listener = Some(AbortOnDropHandle::new(task));
            }
        }
        self.sender.subscribe()
    }
}

/// Passes on the news of every instance, connecting again whenever the connection is lost.
#[cfg(feature = "postgres")]
async fn listen(url: String, sender: broadcast::Sender<Uuid>) {
    loop {
        let connected = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let mut listener = PgListener::connect(&url).await?;
            listener.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(listener)
        })
        .await;
        let mut listener = match connected {
            Ok(Ok(listener)) => listener,
            Ok(Err(error)) => {
                tracing::warn!(%error, "cannot listen for the news of runs; trying again");
                tokio::time::sleep(RECONNECT).await;
                continue;
            }
            Err(_) => {
                tracing::warn!("cannot listen for the news of runs (timed out); trying again");
                continue;
            }
        };
        loop {
            match listener.try_recv().await {
                Ok(Some(notice)) => {
                    if let Ok(run_id) = notice.payload().parse() {
                        let _ = sender.send(run_id);
                    }
                }
                // The connection was lost: the listener connects again on the next call.
                Ok(None) => tracing::debug!("the news of runs connection was lost"),
                Err(error) => {
                    tracing::warn!(%error, "lost the news of runs; connecting again");
                    tokio::time::sleep(RECONNECT).await;
                    break;
                }
            }
        }
    }
}
