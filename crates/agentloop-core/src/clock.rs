//! Time as agentloop records it: UTC, to the millisecond, so that what a store keeps reads back
//! equal to what was emitted.

use chrono::{DateTime, SubsecRound, Utc};

pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}

/// Where time comes from, for what must be tested without waiting for it (a store's leases and
/// the order of its sessions): [`SystemClock`] in production, a clock the test moves otherwise.
pub trait Clock: Send + Sync {
    fn now(&self) -> DateTime<Utc>;
}

/// The system's clock, to the millisecond.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        now()
    }
}
