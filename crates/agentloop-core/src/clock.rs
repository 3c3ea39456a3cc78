//! Time as agentloop records it: UTC, to the millisecond, so that what a store keeps reads back
//! equal to what was emitted.

use chrono::{DateTime, SubsecRound, Utc};

pub fn now() -> DateTime<Utc> {
    Utc::now().trunc_subsecs(3)
}
