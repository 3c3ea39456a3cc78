//! The calls of a server's tools in flight, and the runs they belong to: where a request the
//! server sends while a call runs (elicitation, sampling) is taken.
//!
//! MCP does not say which call a server's request belongs to (over stdio nothing links them),
//! so agentloop gives it to the call of the server's that started last. When calls of several
//! runs are in flight on the server, nobody can tell whose user to ask: the request is
//! refused (an elicitation declined, a sampling request refused) rather than shown to the
//! wrong user.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentloop_core::CallAsks;
use uuid::Uuid;

#[derive(Debug, Clone, Default)]
pub(crate) struct CallsInFlight {
    calls: Arc<Mutex<Calls>>,
}

#[derive(Debug, Default)]
struct Calls {
    next: u64,
    /// In the order they started.
    in_flight: Vec<InFlight>,
}

#[derive(Debug)]
struct InFlight {
    key: u64,
    run_id: Uuid,
    asks: CallAsks,
}

/// Why a server's request found no call to take it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Unrouted {
    /// No call of a run is in flight.
    NoCall,
    /// Calls of several runs are in flight.
    SeveralRuns,
}

impl Unrouted {
    pub(crate) fn reason(self) -> &'static str {
        match self {
            Unrouted::NoCall => "no tool call of a run is in flight on this server",
            Unrouted::SeveralRuns => {
                "calls of several runs are in flight on this server; agentloop cannot tell which \
                 run's user to ask"
            }
        }
    }
}

impl CallsInFlight {
    /// Counts a call in flight until the guard is dropped; a call outside a run (no `asks`)
    /// is not counted.
    pub(crate) fn enter(&self, run_id: Uuid, asks: Option<CallAsks>) -> Entered {
        let Some(asks) = asks else {
            return Entered {
                calls: None,
                key: 0,
            };
        };
        let mut calls = self.lock();
        calls.next += 1;
        let key = calls.next;
        calls.in_flight.push(InFlight { key, run_id, asks });
        Entered {
            calls: Some(self.clone()),
            key,
        }
    }

    /// The call a request the server sends now belongs to: the last one that started, when
    /// every call in flight is of the same run.
    pub(crate) fn asker(&self) -> Result<CallAsks, Unrouted> {
        let calls = self.lock();
        let last = calls.in_flight.last().ok_or(Unrouted::NoCall)?;
        if calls
            .in_flight
            .iter()
            .any(|call| call.run_id != last.run_id)
        {
            return Err(Unrouted::SeveralRuns);
        }
        Ok(last.asks.clone())
    }

    /// The server's call in flight when it has exactly one: what the server logs now is of it.
    pub(crate) fn only(&self) -> Option<CallAsks> {
        match self.lock().in_flight.as_slice() {
            [only] => Some(only.asks.clone()),
            _ => None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Calls> {
        // Entries are only pushed and removed whole.
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Removes its call when dropped.
pub(crate) struct Entered {
    calls: Option<CallsInFlight>,
    key: u64,
}

impl Drop for Entered {
    fn drop(&mut self) {
        if let Some(calls) = &self.calls {
            calls.lock().in_flight.retain(|call| call.key != self.key);
        }
    }
}
