//! Instances, adoption and cancel requests: what lets a run outlive its process.

use std::time::Duration;

use agentloop_core::{Instance, InstanceKind, StepRecord, Store, StoreError};
use agentloop_store::SqlStore;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

const LEASE: Duration = Duration::from_secs(10);

fn server(id: &str) -> Instance {
    Instance {
        id: id.to_string(),
        kind: InstanceKind::Server,
        name: format!("host:{id}"),
    }
}

/// Two instances race to adopt the runs of a third that fell silent: each run is won by
/// exactly one of them, and the silent one can no longer write its runs.
pub async fn exactly_one_instance_adopts_each_run_left_behind(fixture: &Fixture) {
    let store = &fixture.store;
    store.register_instance(&server("old")).await.unwrap();
    let session_id = session(fixture, "alice").await;
    let mut runs = Vec::new();
    for _ in 0..12 {
        let run = agentloop_core::NewRun {
            owner: Some("old".into()),
            save_chat: false,
            ..new_run(session_id, false)
        };
        store.start_run(&run).await.unwrap();
        runs.push(run.id);
    }
    assert!(
        store.orphaned_runs(LEASE, 100).await.unwrap().is_empty(),
        "an instance that just showed signs of life keeps its runs"
    );

    // The old instance falls silent for longer than the lease; two others start.
    fixture.clock.advance(LEASE * 2);
    let other = SqlStore::connect(&fixture.url)
        .await
        .unwrap()
        .with_clock(fixture.clock.clone());
    store.register_instance(&server("a")).await.unwrap();
    other.register_instance(&server("b")).await.unwrap();
    let orphans = store.orphaned_runs(LEASE, 100).await.unwrap();
    assert_eq!(orphans.len(), runs.len());
    assert!(
        orphans
            .iter()
            .all(|orphan| orphan.owner == "old" && !orphan.handed_over)
    );

    // For each run, both try at the same time, through pools of their own.
    let mut results = Vec::new();
    for &run_id in &runs {
        let (a, b) = tokio::join!(
            store.adopt_run(run_id, "a", LEASE),
            other.adopt_run(run_id, "b", LEASE)
        );
        results.push((a.unwrap(), b.unwrap()));
    }
    for (run_id, (a, b)) in runs.iter().zip(&results) {
        assert!(a ^ b, "run {run_id}: a won {a}, b won {b}");
    }
    assert!(store.orphaned_runs(LEASE, 100).await.unwrap().is_empty());

    // The old owner wakes up: its next step of an adopted run is refused, and writes nothing.
    let late = StepRecord {
        owner: Some("old".into()),
        events: vec![delta(runs[0], 1, "too late")],
        ..step(runs[0], session_id)
    };
    assert!(matches!(
        store.save_step(&late).await,
        Err(StoreError::NotOwner(_))
    ));
    assert!(store.events(runs[0], 0).await.unwrap().is_empty());
    let winner = if results[0].0 { "a" } else { "b" };
    let step_of_winner = StepRecord {
        owner: Some(winner.into()),
        ..step(runs[0], session_id)
    };
    store.save_step(&step_of_winner).await.unwrap();
    assert_eq!(
        store
            .saved_run(runs[0])
            .await
            .unwrap()
            .unwrap()
            .owner
            .as_deref(),
        Some(winner)
    );
    other.close().await;
}

/// An instance that says it stopped leaves its runs at once; an instance that keeps its
/// heartbeat keeps them; a CLI's runs are never offered to servers.
pub async fn a_retired_instance_leaves_its_runs_at_once_and_a_cli_keeps_its_own(fixture: &Fixture) {
    let store = &fixture.store;
    store.register_instance(&server("s1")).await.unwrap();
    store
        .register_instance(&Instance {
            id: "cli".into(),
            kind: InstanceKind::Cli,
            name: "laptop:1".into(),
        })
        .await
        .unwrap();
    let session_id = session(fixture, "alice").await;
    let start = |owner: &str| agentloop_core::NewRun {
        owner: Some(owner.to_string()),
        ..new_run(session_id, false)
    };
    let (of_server, of_cli) = (start("s1"), start("cli"));
    store.start_run(&of_server).await.unwrap();
    store.start_run(&of_cli).await.unwrap();

    // Time passes, the server keeps showing signs of life: nothing to adopt.
    fixture.clock.advance(LEASE * 2);
    store.heartbeat("s1").await.unwrap();
    assert!(store.orphaned_runs(LEASE, 100).await.unwrap().is_empty());

    store.retire_instance("s1").await.unwrap();
    let orphans = store.orphaned_runs(LEASE, 100).await.unwrap();
    assert_eq!(orphans.len(), 1, "the CLI's run is not a server's to adopt");
    assert_eq!(orphans[0].run_id, of_server.id);
    assert!(orphans[0].handed_over);
    assert!(
        store.heartbeat("s1").await.is_err(),
        "a retired instance shows no more signs of life"
    );
    // `agentloop resume` takes the silent CLI's run over explicitly.
    assert!(store.adopt_run(of_cli.id, "cli-2", LEASE).await.unwrap());
}

/// A cancel asked through any instance reaches the owner's list, only while the run is in
/// progress.
pub async fn a_cancel_request_reaches_the_owner_of_a_run_in_progress(fixture: &Fixture) {
    let store = &fixture.store;
    store.register_instance(&server("owner")).await.unwrap();
    let session_id = session(fixture, "alice").await;
    let run = agentloop_core::NewRun {
        owner: Some("owner".into()),
        ..new_run(session_id, false)
    };
    store.start_run(&run).await.unwrap();
    assert!(store.cancel_requests("owner").await.unwrap().is_empty());
    assert!(store.request_cancel(run.id).await.unwrap());
    assert_eq!(store.cancel_requests("owner").await.unwrap(), [run.id]);
    assert!(
        store
            .cancel_requests("someone-else")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        !store.request_cancel(Uuid::new_v4()).await.unwrap(),
        "an unknown run"
    );
}

/// A run saved with its trace context gives it back, so that it goes on in the same trace;
/// a run saved without one gives none.
pub async fn a_run_keeps_its_trace_context(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    let traced = agentloop_core::NewRun {
        traceparent: Some(traceparent.to_string()),
        ..new_run(session_id, false)
    };
    let untraced = new_run(session_id, false);
    store.start_run(&traced).await.unwrap();
    store.start_run(&untraced).await.unwrap();
    let saved = store.saved_run(traced.id).await.unwrap().unwrap();
    assert_eq!(saved.traceparent.as_deref(), Some(traceparent));
    let saved = store.saved_run(untraced.id).await.unwrap().unwrap();
    assert_eq!(saved.traceparent, None);
}
