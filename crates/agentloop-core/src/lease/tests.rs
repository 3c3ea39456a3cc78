#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};
use std::time::Duration;

use super::*;

/// Counts renewals, started and in flight, each taking `takes` and answering `answer`.
#[derive(Default)]
struct Renewals {
    started: AtomicUsize,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

fn lease(renewals: &Arc<Renewals>, takes: Duration, fails: bool) -> LeaseRenewal {
    let renewals = renewals.clone();
    LeaseRenewal::with(Uuid::now_v7(), Uuid::now_v7(), move || {
        let renewals = renewals.clone();
        Box::pin(async move {
            renewals.started.fetch_add(1, Ordering::SeqCst);
            let now = renewals.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            renewals.most_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(takes).await;
            renewals.in_flight.fetch_sub(1, Ordering::SeqCst);
            if fails {
                Err(StoreError::unavailable("the database went away"))
            } else {
                Ok(())
            }
        })
    })
}

async fn work_for(time: Duration) -> &'static str {
    tokio::time::sleep(time).await;
    "done"
}

#[tokio::test(start_paused = true)]
async fn a_run_at_work_renews_its_lease_every_third_of_it_and_stops_when_done() {
    let renewals = Arc::new(Renewals::default());
    // 99 s of work: renewed at 30, 60 and 90 s.
    let work = work_for(SESSION_LEASE + SESSION_LEASE / 10);
    let output = Leased::new(work, Some(lease(&renewals, Duration::ZERO, false))).await;

    assert_eq!(output, "done");
    assert_eq!(renewals.started.load(Ordering::SeqCst), 3);
    tokio::time::sleep(SESSION_LEASE).await;
    assert_eq!(
        renewals.started.load(Ordering::SeqCst),
        3,
        "renewed after the work ended"
    );
}

#[tokio::test(start_paused = true)]
async fn a_renewal_that_fails_leaves_the_work_going_and_is_tried_again() {
    let renewals = Arc::new(Renewals::default());
    let work = work_for(RENEW_EVERY * 2 + RENEW_EVERY / 2);
    let output = Leased::new(work, Some(lease(&renewals, Duration::ZERO, true))).await;

    assert_eq!(output, "done");
    assert_eq!(renewals.started.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn a_slow_renewal_is_not_joined_by_another() {
    let renewals = Arc::new(Renewals::default());
    // Each renewal takes 40 s, longer than the period: started at 30 s, then at its end (70 s),
    // then at 110 s; never two at once.
    let work = work_for(Duration::from_secs(115));
    let lease = lease(&renewals, Duration::from_secs(40), false);
    let output = Leased::new(work, Some(lease)).await;

    assert_eq!(output, "done");
    assert_eq!(renewals.started.load(Ordering::SeqCst), 3);
    assert_eq!(renewals.most_in_flight.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn work_without_a_lease_is_only_the_work() {
    let output = Leased::new(work_for(SESSION_LEASE * 2), None).await;
    assert_eq!(output, "done");
}
