use std::time::Duration;

use agentloop_core::protocol::{RunStatus, SessionMessage};
use agentloop_core::{Clock, RunEnd, SessionLock, StepRecord, Store};
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

/// The last step of a run with its answer, and a step that pauses a run with a message, write
/// the session once: its `updated_at` forward and its lock, released or held.
pub async fn a_step_that_ends_or_pauses_with_messages_moves_the_session_and_its_lock(
    fixture: &Fixture,
) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let a = run(fixture, session_id).await;
    let b = run(fixture, session_id).await;
    let updated_at = format!("SELECT updated_at FROM sessions WHERE id = '{session_id}'");

    store.lock_session(session_id, a, LONG).await.unwrap();
    fixture.clock.advance(Duration::from_millis(5));
    let ended = StepRecord {
        messages: vec![answer(session_id, a, "Three.")],
        end: Some(completed(None)),
        ..step(a, session_id)
    };
    store.save_step(&ended).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, None);
    let ended_at = fixture.clock.now().timestamp_millis();
    assert_eq!(fixture.count(&updated_at).await, ended_at);

    // `b` holds the session now: another last step of `a`, with a message of no later time,
    // moves neither.
    store.lock_session(session_id, b, LONG).await.unwrap();
    let late = StepRecord {
        messages: vec![answer(session_id, a, "Three, again.")],
        ..ended.clone()
    };
    store.save_step(&late).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, Some(b));
    assert_eq!(fixture.count(&updated_at).await, ended_at);

    fixture.clock.advance(Duration::from_millis(5));
    let paused = StepRecord {
        messages: vec![SessionMessage {
            created_at: fixture.clock.now(),
            ..question(session_id, b, "Which ones?")
        }],
        end: Some(RunEnd {
            output: None,
            status: RunStatus::AwaitingInput,
            ..completed(None)
        }),
        ..step(b, session_id)
    };
    store.save_step(&paused).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, Some(b));
    assert_eq!(
        fixture.count(&updated_at).await,
        fixture.clock.now().timestamp_millis()
    );
    let expiry = format!("SELECT lock_expires_at FROM sessions WHERE id = '{session_id}'");
    assert_eq!(
        fixture.count(&expiry).await,
        i64::MAX,
        "held with no expiry"
    );
}

/// `unlock_session` (a run that could not start gives its session back) frees the session only
/// while the run holds it.
pub async fn unlocking_frees_the_session_of_its_holder_only(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let a = run(fixture, session_id).await;
    let b = run(fixture, session_id).await;

    store.lock_session(session_id, a, LONG).await.unwrap();
    store.unlock_session(session_id, b).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, Some(a));
    store.unlock_session(session_id, a).await.unwrap();
    assert_eq!(holder(fixture, session_id).await, None);
    assert_eq!(
        store.lock_session(session_id, b, LONG).await.unwrap(),
        SessionLock::Acquired
    );
}
