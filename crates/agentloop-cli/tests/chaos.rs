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

/// The checker itself, fed histories that are wrong: a gap, a repeat, a log that does not end
/// in `done`, a duplicated effect and a lost run are each reported; a whole history is not.
#[test]
fn the_checker_reports_a_gap_a_repeat_a_duplicate_and_a_lost_run() {
    let framed = ["run_started", "llm_call", "done"];
    assert_eq!(chaos::replay_problem(&[1, 2, 3], &framed), None);
    for (seqs, kinds) in [
        (vec![1, 2, 4], framed.to_vec()),
        (vec![1, 2, 2], framed.to_vec()),
        (vec![2, 3, 4], framed.to_vec()),
        (
            vec![1, 2, 3],
            vec!["run_started", "llm_call", "tool_executed"],
        ),
        (vec![1, 2, 3], vec!["llm_call", "tool_executed", "done"]),
    ] {
        let problem = chaos::replay_problem(&seqs, &kinds);
        assert!(problem.is_some(), "{seqs:?} {kinds:?} passed");
    }

    assert_eq!(
        chaos::duplicated_effects(["note-1", "note-2", "note-1", "note-3", "note-1"]),
        [("note-1".to_string(), 3)]
    );
    assert!(chaos::duplicated_effects(["a", "b", "c"]).is_empty());

    let run = |status: &str| chaos::RunOutcome {
        id: uuid::Uuid::nil(),
        query: "q".into(),
        acknowledged: true,
        status: status.into(),
        error: None,
        outcome_unknown: 0,
        resumed: 0,
        replay_problem: None,
    };
    assert!(run("running").is_lost());
    assert!(!run("completed").is_lost());
    assert!(!run("failed").is_lost());
}
