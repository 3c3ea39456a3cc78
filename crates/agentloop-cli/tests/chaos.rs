//! The chaos test, small: runs over three `agentloop serve` instances on one PostgreSQL while a
//! random instance is killed (`-9`) and started again every 1.5 s or so, until every
//! run has ended (see `benches/load/chaos.rs`, shared with `cargo bench --bench load --
//! --chaos`, which gives the full figures).
//!
//! Every run must complete: the scripted model always answers, so nothing but a bug in the
//! durability code can fail a run (a run that cannot go on after adoption ends `failed`, which
//! this test refuses). No run is lost, no `slow_record` note is logged twice, and each run's
//! `/events` replays whole from `run_started` to `done`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

#[path = "../benches/load/chaos.rs"]
mod chaos;

use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn runs_survive_instances_killed_at_random_without_loss_or_duplicate_effects() {
    if !agentloop_test_support::requires::postgres().await {
        return;
    }
    let settings = chaos::Settings {
        runs: 30,
        concurrency: 8,
        kill_every: Duration::from_millis(1500),
        latency: Duration::from_millis(100),
        record_ms: 400,
        sleep_ms: 800,
        lease_s: 1.0,
        deadline: Duration::from_secs(60),
    };
    let report = chaos::run(&settings).await;
    chaos::print(&report);

    assert!(report.all_ended_in_time, "not every run ended");
    assert_eq!(report.lost(), 0, "runs lost");
    assert!(report.duplicates.is_empty(), "{:?}", report.duplicates);
    let not_completed: Vec<_> = report
        .runs
        .iter()
        .filter(|run| run.status != "completed")
        .collect();
    assert!(not_completed.is_empty(), "{not_completed:#?}");
    let broken = report.replay_problems();
    assert!(broken.is_empty(), "{broken:#?}");
    // Each index got a run the client saw start; every run in the store (retries included) is
    // accounted for above.
    assert!(report.runs.iter().filter(|r| r.acknowledged).count() >= settings.runs);
    // The chaos happened: the first kill is of the instance that owns the most runs in
    // progress, and they are adopted.
    assert!(!report.kills.is_empty(), "no instance was killed");
    assert!(report.resumed() >= 1, "no run was adopted");
}
