//! Finished runs stay registered a while ([`LINGER`]: a cancel that comes late is told so, a
//! client that reattaches finds the run), and keep their outcome a moment ([`OUTCOME_KEPT`], for
//! a request that asks just after the end), longer while requests wait for it. One task per
//! registry lets them go, in the order they finished, at most [`REAP_EVERY`] late: not a task
//! and two timers for each run, which a server that finishes hundreds of runs a second kept by
//! the ten thousand.

use std::{collections::VecDeque, sync::Arc, time::Duration};

use tokio::time::Instant;

use super::run::LiveRun;
use super::{LINGER, OUTCOME_KEPT, lock};

/// How often the lingering runs are looked at.
pub(super) const REAP_EVERY: Duration = Duration::from_secs(1);

/// The finished runs of a registry, oldest first.
#[derive(Default)]
pub(super) struct Lingering {
    state: std::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Every finished run still registered, with when it finished.
    ended: VecDeque<(Instant, Arc<LiveRun>)>,
    /// The finished runs that still hold their outcome.
    outcomes: VecDeque<(Instant, Arc<LiveRun>)>,
    /// A task reaps them.
    reaping: bool,
}

/// What a round of reaping found.
pub(super) struct Reaped {
    /// Runs that finished [`LINGER`] ago or more: to unregister.
    pub(super) expired: Vec<Arc<LiveRun>>,
    /// Whether any run still lingers: the reaper goes on.
    pub(super) more: bool,
}

impl Lingering {
    /// Keeps `run`, which finished at `now`. True when no task reaps yet: the caller starts one.
    pub(super) fn push(&self, run: Arc<LiveRun>, now: Instant) -> bool {
        let mut state = lock(&self.state);
        state.ended.push_back((now, run.clone()));
        state.outcomes.push_back((now, run));
        !std::mem::replace(&mut state.reaping, true)
    }

    /// Forgets the outcomes kept [`OUTCOME_KEPT`] that no request waits for, and hands back the
    /// runs that lingered [`LINGER`]. Once none lingers, the reaper is done (the next finished
    /// run starts another).
    pub(super) fn reap(&self, now: Instant) -> Reaped {
        let mut state = lock(&self.state);
        let mut waited_on = Vec::new();
        while let Some((at, _)) = state.outcomes.front()
            && now.duration_since(*at) >= OUTCOME_KEPT
        {
            let Some((at, run)) = state.outcomes.pop_front() else {
                break;
            };
            if run.ended.receiver_count() == 0 {
                run.ended.send_replace(None);
            } else if now.duration_since(at) < LINGER {
                waited_on.push((at, run));
            }
            // Still waited on after all that time: the requests keep it; the run goes.
        }
        // Looked at again next round, still before the younger ones.
        for kept in waited_on.into_iter().rev() {
            state.outcomes.push_front(kept);
        }
        let mut expired = Vec::new();
        while let Some((at, _)) = state.ended.front()
            && now.duration_since(*at) >= LINGER
        {
            if let Some((_, run)) = state.ended.pop_front() {
                expired.push(run);
            }
        }
        let more = !state.ended.is_empty();
        state.reaping = more;
        Reaped { expired, more }
    }
}

#[cfg(test)]
impl Lingering {
    /// No task reaps.
    pub(super) fn is_reaped(&self) -> bool {
        !lock(&self.state).reaping
    }
}
