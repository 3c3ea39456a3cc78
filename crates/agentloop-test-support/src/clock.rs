//! A clock that stands still until the test moves it: lease and ordering tests advance it
//! instead of sleeping.

use std::{
    sync::{Mutex, PoisonError},
    time::Duration,
};

use agentloop_core::Clock;
use chrono::{DateTime, SubsecRound, Utc};

#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    /// A clock that reads the real time now, to the millisecond, until moved.
    pub fn new() -> ManualClock {
        ManualClock::starting_at(Utc::now().trunc_subsecs(3))
    }

    pub fn starting_at(now: DateTime<Utc>) -> ManualClock {
        ManualClock {
            now: Mutex::new(now),
        }
    }

    /// Moves the clock `by` forward.
    pub fn advance(&self, by: Duration) {
        let by = chrono::Duration::from_std(by).unwrap_or(chrono::Duration::MAX);
        let mut now = self.now.lock().unwrap_or_else(PoisonError::into_inner);
        *now = now.checked_add_signed(by).unwrap_or(*now);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
