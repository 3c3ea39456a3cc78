//! The background pruner of a server with `[store.retention]`: a pass at start, then one every
//! `interval_s`, each pass batch after batch (see `SqlStore::prune`), so that runs saving their
//! steps never wait long. A pass that fails (the database away) is logged and tried again at the
//! next interval; the pruner never stops the server.

use std::sync::Arc;
use std::time::Duration;

use agentloop_store::{Retention, SqlStore};
use tokio::task::JoinHandle;

/// Starts the pruner; `None` when no rule is set. Aborted by dropping nothing: the caller aborts
/// the handle at shutdown.
pub(crate) fn spawn(store: Arc<SqlStore>, rules: Retention) -> Option<JoinHandle<()>> {
    if !rules.is_set() {
        return None;
    }
    let every = Duration::from_secs(rules.interval_s);
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            match store.prune(&rules).await {
                Ok(pruned) if pruned.runs > 0 => tracing::info!(
                    runs = pruned.runs,
                    events = pruned.events,
                    checkpoint_rows = pruned.checkpoint_rows,
                    tool_outputs = pruned.tool_outputs,
                    "pruned finished runs (store.retention)"
                ),
                Ok(_) => {}
                Err(error) => tracing::warn!(
                    %error,
                    "pruning finished runs failed; trying again in {} s",
                    rules.interval_s
                ),
            }
        }
    }))
}
