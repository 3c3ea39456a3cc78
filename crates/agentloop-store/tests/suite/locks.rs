use std::time::Duration;

use agentloop_core::{SessionLock, StepRecord, Store};
use uuid::Uuid;

use super::Fixture;
use super::data::*;

const LONG: Duration = Duration::from_secs(60);
/// A lease that is over once the store's clock moved [`OUTLIVE`] on.
const SHORT: Duration = Duration::from_millis(5);
const OUTLIVE: Duration = Duration::from_millis(50);

async fn holder(fixture: &Fixture, session_id: Uuid) -> Option<Uuid> {
    let info = fixture.store.session(session_id).await.unwrap().unwrap();
    info.active_run_id
}

pub async fn a_session_lock_is_exclusive_until_released_or_expired(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());

    assert_eq!(
        store.lock_session(session_id, a, LONG).await.unwrap(),
        SessionLock::Acquired
    );
    assert_eq!(holder(fixture, session_id).await, Some(a));
    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Busy { run_id: a }
    );
    // The holder may take it again (a resumed run).
    assert_eq!(
        store.lock_session(session_id, a, SHORT).await.unwrap(),
        SessionLock::Acquired
    );

    fixture.clock.advance(OUTLIVE);
    assert_eq!(
        holder(fixture, session_id).await,
        None,
        "an expired lease holds nothing"
    );
    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Acquired,
        "a lease that ran out can be taken over"
    );
    assert_eq!(
        store.lock_session(session_id, a, LONG).await.unwrap(),
        SessionLock::Busy { run_id: b }
    );
}

pub async fn renewing_extends_only_the_holders_lease(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let (a, b) = (Uuid::new_v4(), Uuid::new_v4());

    store.lock_session(session_id, a, SHORT).await.unwrap();
    store.renew_session_lock(session_id, a, LONG).await.unwrap();
    // Another run's renewal changes nothing.
    store
        .renew_session_lock(session_id, b, Duration::ZERO)
        .await
        .unwrap();
    fixture.clock.advance(OUTLIVE);
    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Busy { run_id: a },
        "the renewed lease outlives the first one"
    );

    // A renewal sets the lease from now: a zero lease lets the session go at once.
    store
        .renew_session_lock(session_id, a, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Acquired
    );
}

pub async fn a_session_without_a_row_is_always_acquired(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = Uuid::new_v4();
    for run_id in [Uuid::new_v4(), Uuid::new_v4()] {
        assert_eq!(
            store.lock_session(session_id, run_id, LONG).await.unwrap(),
            SessionLock::Acquired
        );
        store
            .renew_session_lock(session_id, run_id, LONG)
            .await
            .unwrap();
    }
    assert_eq!(store.session(session_id).await.unwrap(), None);
}

pub async fn the_last_step_releases_the_lock_of_its_run_only(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let a = run(fixture, session_id).await;
    let b = run(fixture, session_id).await;

    store.lock_session(session_id, a, LONG).await.unwrap();
    // A step that does not end the run keeps the lock.
    store.save_step(&step(a, session_id)).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, Some(a));

    let end = StepRecord {
        end: Some(completed(None)),
        ..step(a, session_id)
    };
    store.save_step(&end).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, None);

    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Acquired
    );
    // `a` ending again (a retried save) must not free the session `b` now holds.
    store.save_step(&end).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, Some(b));
}
