use agentloop_core::{PushOutbox, PushTarget};
use chrono::{Duration, Utc};

use super::Fixture;
use super::data::*;

fn target(run_id: uuid::Uuid, id: &str) -> PushTarget {
    PushTarget {
        run_id,
        id: id.to_string(),
        user_id: "alice".to_string(),
        url: "http://127.0.0.1:9/hook".to_string(),
        token: Some("secret".to_string()),
        auth_scheme: Some("Bearer".to_string()),
        auth_credentials: Some("abc".to_string()),
        after_seq: 2,
    }
}

pub async fn push_targets_are_set_listed_replaced_and_deleted(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    store.put_push_target(&target(run_id, "a")).await.unwrap();
    store.put_push_target(&target(run_id, "b")).await.unwrap();
    let replaced = PushTarget {
        url: "https://example.com/other".to_string(),
        ..target(run_id, "a")
    };
    store.put_push_target(&replaced).await.unwrap();
    let targets = store.push_targets(run_id).await.unwrap();
    assert_eq!(targets.len(), 2);
    assert!(targets.contains(&replaced), "{targets:?}");
    assert_eq!(store.open_push_targets().await.unwrap().len(), 2);
    assert!(store.delete_push_target(run_id, "b").await.unwrap());
    assert!(!store.delete_push_target(run_id, "b").await.unwrap());
    assert_eq!(store.push_targets(run_id).await.unwrap(), [replaced]);
}

pub async fn a_push_is_queued_once_claimed_by_one_and_sent_in_order(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    store
        .put_push_target(&target(run_id, "hook"))
        .await
        .unwrap();
    let pushes = [(3, "{\"n\":3}".to_string()), (7, "{\"n\":7}".to_string())];
    store
        .queue_pushes(run_id, "hook", &pushes, false)
        .await
        .unwrap();
    // Queued again (another instance saw the same changes): nothing doubles.
    store
        .queue_pushes(run_id, "hook", &pushes, true)
        .await
        .unwrap();
    assert!(store.open_push_targets().await.unwrap().is_empty());

    let now = Utc::now();
    let until = now + Duration::seconds(30);
    let first = store.claim_push("one", now, until).await.unwrap().unwrap();
    assert_eq!(
        (first.seq, first.payload.as_str(), first.attempts),
        (3, "{\"n\":3}", 1)
    );
    assert_eq!(first.target.token.as_deref(), Some("secret"));
    // Claimed: nobody else takes it, nor the next of its target before it is sent.
    assert_eq!(store.claim_push("two", now, until).await.unwrap(), None);
    // Failed: due again later, then taken again.
    store
        .push_failed(&first, Some(now + Duration::seconds(1)), now)
        .await
        .unwrap();
    assert_eq!(store.claim_push("two", now, until).await.unwrap(), None);
    let later = now + Duration::seconds(2);
    let again = store
        .claim_push("two", later, later + Duration::seconds(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((again.seq, again.attempts), (3, 2));
    store.push_sent(&again, later).await.unwrap();
    let next = store
        .claim_push("two", later, later + Duration::seconds(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(next.seq, 7);
    // A claim that ran out (its instance died) is taken by another instance.
    let after = later + Duration::seconds(31);
    let taken = store
        .claim_push("three", after, after + Duration::seconds(30))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((taken.seq, taken.attempts), (7, 2));
    // Given up: never claimed again.
    store.push_failed(&taken, None, after).await.unwrap();
    let much_later = after + Duration::seconds(3600);
    assert_eq!(
        store
            .claim_push("four", much_later, much_later + Duration::seconds(30))
            .await
            .unwrap(),
        None
    );
}
