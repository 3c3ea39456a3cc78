use std::sync::Arc;

use agentloop_core::{EventSink, RunOutcome, Store, protocol::Event};
use uuid::Uuid;

use super::follower::{Reader, Started};
use super::linger::REAP_EVERY;
use super::log::{Log, Read};
use super::registry::{Active, LiveRuns};
use super::run::LiveRun;
use super::*;
use agentloop_core::protocol::EventKind;
use futures::StreamExt;

fn delta(seq: u64, bytes: usize) -> Event {
    Event {
        run_id: Uuid::nil(),
        seq,
        parent_run_id: None,
        kind: EventKind::AssistantDelta {
            text: "x".repeat(bytes),
        },
    }
}

fn seqs(read: Read) -> Vec<u64> {
    match read {
        Read::Events(events) => events.iter().map(|event| event.seq).collect(),
        _ => Vec::new(),
    }
}

#[test]
fn without_followers_only_the_newest_events_not_saved_stay() {
    let mut log = Log::new(0, true);
    for seq in 1..=100 {
        log.push(delta(seq, 10_000));
    }
    assert!(log.bytes <= RECENT_BYTES, "{}", log.bytes);
    assert_eq!(log.events.back().map(|held| held.event.seq), Some(100));
    // A client asking for a trimmed event reads the store.
    assert_eq!(log.attach(1), None);
    assert!(log.attach(100).is_some());
}

#[test]
fn events_the_store_has_leave_memory_unless_a_follower_still_needs_them() {
    let mut log = Log::new(0, true);
    // A step saved, then sent: nobody follows, nothing is held.
    log.saved(3);
    for seq in 1..=3 {
        log.push(delta(seq, 100));
    }
    assert_eq!((log.events.len(), log.bytes), (0, 0));
    assert_eq!(log.attach(1), None, "read from the store");
    // Live text, not saved yet, stays for a client that comes now.
    log.push(delta(4, 100));
    log.push(delta(5, 100));
    assert_eq!(log.events.len(), 2);
    let late = log.attach(4).unwrap();
    // Saved with the next step: the follower still has to read it.
    log.saved(6);
    log.push(delta(6, 100));
    assert_eq!(seqs(log.read(late)), [4, 5, 6]);
    assert_eq!((log.events.len(), log.bytes), (0, 0), "read and saved");
    // Of a saved step, a follower behind keeps what it has not read, and only that.
    log.saved(8);
    log.push(delta(7, 100));
    log.push(delta(8, 100));
    assert_eq!(seqs(log.read(late)), [7, 8]);
    assert!(log.events.is_empty());
}

#[test]
fn a_follower_keeps_what_it_has_not_read_then_lets_go() {
    let mut log = Log::new(0, true);
    let id = log.attach(1).unwrap();
    for seq in 1..=100 {
        log.push(delta(seq, 10_000));
    }
    assert_eq!(log.events.len(), 100);
    let mut read = Vec::new();
    while let Read::Events(events) = log.read(id) {
        read.extend(events.iter().map(|event| event.seq));
    }
    assert_eq!(read, (1..=100).collect::<Vec<_>>());
    assert!(log.bytes <= RECENT_BYTES);
    log.detach(id);
    assert!(log.followers.is_empty());
}

#[test]
fn a_follower_too_far_behind_is_dropped_and_the_others_keep_going() {
    let mut log = Log::new(0, true);
    let slow = log.attach(1).unwrap();
    let fast = log.attach(1).unwrap();
    let mut dropped = 0;
    let mut fast_read = Vec::new();
    for seq in 1..=1000 {
        dropped += log.push(delta(seq, 10_000));
        fast_read.extend(seqs(log.read(fast)));
    }
    assert_eq!(dropped, 1);
    assert!(matches!(log.read(slow), Read::Dropped));
    assert_eq!(fast_read, (1..=1000).collect::<Vec<_>>());
    assert!(log.bytes <= MAX_BACKLOG_BYTES);
}

/// A run with `store` (or none), never driven: the test plays its driver.
fn run_with(store: Option<Arc<dyn Store>>) -> Arc<LiveRun> {
    Arc::new(LiveRun::new(
        Uuid::now_v7(),
        "user",
        Uuid::now_v7(),
        0,
        store,
    ))
}

#[tokio::test]
async fn followers_of_a_run_that_never_began_get_its_refusal_or_an_end() {
    let run = run_with(None);
    let attached = run.events(0);
    let waiting = tokio::spawn({
        let run = run.clone();
        async move { run.begun().await }
    });
    run.refused(&crate::error::ApiError::conflict("session_busy", "busy"));
    assert_eq!(waiting.await.unwrap().unwrap_err().code, "session_busy");
    assert_eq!(run.begun().await.unwrap_err().code, "session_busy");
    let events: Vec<Event> = tokio::time::timeout(Duration::from_secs(5), attached.collect())
        .await
        .unwrap();
    assert!(events.is_empty());
}

/// What a run's task does at the end, but lingering.
async fn finish(run: &LiveRun, outcome: RunOutcome, active: Active) {
    let status = run.end(outcome);
    drop(active);
    run.release_if_saved(status).await;
}

/// A store in memory that knows no run.
async fn empty_store() -> Arc<dyn Store> {
    Arc::new(
        agentloop::SqlStore::connect("sqlite::memory:")
            .await
            .unwrap(),
    )
}

/// A completed outcome of `run`.
fn completed(run: &LiveRun) -> RunOutcome {
    serde_json::from_value(serde_json::json!({
        "run_id": run.id, "session_id": run.session_id, "status": "completed",
        "iterations": 1, "tools_used": 0, "should_refresh": false,
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }))
    .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_finished_run_keeps_its_outcome_a_moment_and_its_place_a_minute() {
    let registry = LiveRuns::new(10);
    let finish = async |registry: &Arc<LiveRuns>| {
        let run = run_with(None);
        registry.lock_runs().insert(run.id, run.clone());
        let active = Active {
            registry: registry.clone(),
            user: run.user_id.clone(),
        };
        finish(&run, completed(&run), active).await;
        registry.linger(run.clone());
        run
    };
    let waited_on = finish(&registry).await;
    let request = waited_on.ended.subscribe();
    tokio::time::sleep(REAP_EVERY / 2).await;
    let alone = finish(&registry).await;
    assert!(alone.outcome().await.is_some(), "asked just after the end");

    tokio::time::sleep(OUTCOME_KEPT + REAP_EVERY * 2).await;
    assert!(alone.outcome().await.is_none(), "forgotten");
    assert!(
        waited_on.ended.borrow().is_some(),
        "kept while a request waits for it"
    );
    drop(request);
    tokio::time::sleep(REAP_EVERY * 2).await;
    assert!(
        waited_on.ended.borrow().is_none(),
        "forgotten once it has it"
    );
    assert!(registry.get(waited_on.id).is_some() && registry.get(alone.id).is_some());

    tokio::time::sleep(LINGER - OUTCOME_KEPT - REAP_EVERY * 4).await;
    assert!(
        registry.get(waited_on.id).is_none(),
        "let go after a minute"
    );
    assert!(registry.get(alone.id).is_some(), "finished later");
    tokio::time::sleep(REAP_EVERY * 2).await;
    assert!(registry.get(alone.id).is_none());
    assert!(registry.lingering.is_reaped(), "the reaper ended");

    // A run that finishes later starts another.
    let later = finish(&registry).await;
    tokio::time::sleep(LINGER + REAP_EVERY * 2).await;
    assert!(registry.get(later.id).is_none());
}

#[tokio::test]
async fn a_run_whose_driver_saw_its_end_saved_lets_go_of_its_events_without_the_store() {
    // The store has no such run: asked, it keeps the run's events in memory.
    let store = empty_store().await;
    let registry = LiveRuns::new(10);
    for saved_through in [0, 1, 2] {
        let run = run_with(Some(store.clone()));
        run.emit(delta(1, 10));
        run.emit(delta(2, 10));
        run.saved(saved_through);
        let outcome = completed(&run);
        let active = Active {
            registry: registry.clone(),
            user: run.user_id.clone(),
        };
        finish(&run, outcome, active).await;
        assert_eq!(
            run.lock_log().released,
            saved_through == 2,
            "{saved_through}"
        );
    }
}

#[test]
fn a_released_log_holds_nothing_and_sends_followers_to_the_store() {
    let mut log = Log::new(5, true);
    let id = log.attach(6).unwrap();
    log.push(delta(6, 10));
    log.release();
    assert_eq!((log.events.len(), log.bytes), (0, 0));
    assert!(matches!(log.read(id), Read::Released));
    assert!(log.followers.is_empty());
    assert_eq!(log.attach(7), None);
}

#[test]
fn without_a_store_every_event_stays() {
    let mut log = Log::new(0, false);
    for seq in 1..=1000 {
        log.push(delta(seq, 10_000));
    }
    assert_eq!(log.events.len(), 1000);
    assert!(log.attach(1).is_some());
}

#[test]
fn batches_are_bounded_but_never_empty() {
    let mut log = Log::new(0, true);
    let id = log.attach(1).unwrap();
    log.push(delta(1, 3 * BATCH_BYTES));
    log.push(delta(2, 10));
    assert_eq!(seqs(log.read(id)), [1]);
    assert_eq!(seqs(log.read(id)), [2]);
    assert!(matches!(log.read(id), Read::CaughtUp));
}

#[tokio::test]
async fn a_request_that_streams_a_run_follows_it_from_before_its_first_event() {
    // The store has no such run: what the stream gets came from memory.
    let store = empty_store().await;
    let streamed = Started::for_reader(run_with(Some(store.clone())), Reader::Events);
    let answered = Started::for_reader(run_with(Some(store)), Reader::Outcome);
    for started in [&streamed, &answered] {
        // The run's first step, saved with its beginning, is sent before the request reads.
        started.run.saved(2);
        started.run.emit(delta(1, 10));
        started.run.emit(delta(2, 10));
    }
    assert_eq!(streamed.run.held().events, 2);
    assert_eq!(answered.run.held().events, 0, "nobody follows it");
    assert!(streamed.reads_events() && !answered.reads_events());

    let run = streamed.run.clone();
    let events = streamed.events();
    run.progress.send_modify(|p| p.finished = true);
    let seqs: Vec<u64> = events.map(|event| event.seq).collect().await;
    assert_eq!(seqs, [1, 2]);
    assert_eq!(run.held().events, 0, "read, and saved");
}

#[tokio::test]
async fn a_follower_attached_for_a_request_that_never_reads_is_let_go() {
    let started = Started::for_reader(run_with(Some(empty_store().await)), Reader::Events);
    let run = started.run.clone();
    assert_eq!(run.followers(), 1);
    drop(started);
    assert_eq!(run.followers(), 0);
}

/// A run's task lives as long as the run, ten thousand of them at once: it must hold the
/// driver's future once (an `async` block that awaited it, or called the closure making it,
/// kept it, or the closure, twice).
#[tokio::test]
async fn a_runs_task_holds_its_drivers_future_once() {
    const DRIVER_BYTES: usize = 4096;
    let registry = LiveRuns::new(10);
    let run = run_with(None);
    let room = [7u8; DRIVER_BYTES];
    let task = registry.task(run.clone(), move |live: Arc<LiveRun>, _sink| async move {
        tokio::task::yield_now().await;
        assert_eq!(std::hint::black_box(&room)[DRIVER_BYTES - 1], 7);
        completed(&live)
    });
    let bytes = std::mem::size_of_val(&task);
    println!("a task around a driver of {DRIVER_BYTES} bytes: {bytes} bytes");
    assert!(
        (DRIVER_BYTES..DRIVER_BYTES + 512).contains(&bytes),
        "{bytes} bytes"
    );
    task.await;
    assert!(run.is_finished());
    assert!(run.outcome().await.is_some());
}
