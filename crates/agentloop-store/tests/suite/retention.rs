//! Pruning (`[store.retention]`): finished runs lose their events, checkpoints and orphaned tool
//! outputs; runs that are not finished, every session's messages, the runs' rows and their
//! records stay.

use agentloop_core::protocol::{ChatMessage, EventKind, MessageKind, RunStatus, SessionMessage};
use agentloop_core::{Checkpoint, Clock, NewRun, RunEnd, StepRecord, Store};
use agentloop_store::{Pruned, Retention};
use chrono::{DateTime, Duration, Utc};
use serde_json::json;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

/// A tool output large enough to be stored apart (`tool_outputs`), named by a message.
fn large_output(tag: &str) -> String {
    format!("{tag}: {}", "rows ".repeat(400))
}

/// A run of `session_id` as the loop saves it, started at `started_at` (which orders the runs
/// of a session): its input and head, a tool call whose large output the tool message names,
/// events, and an end (`None`: still running) at `finished_at`.
async fn saved_run(
    fixture: &Fixture,
    session_id: Uuid,
    save_chat: bool,
    started_at: DateTime<Utc>,
    end: Option<(RunStatus, DateTime<Utc>)>,
) -> Uuid {
    let run = NewRun {
        started_at,
        ..new_run(session_id, save_chat)
    };
    fixture.store.start_run(&run).await.unwrap();
    let run_id = run.id;
    let output = large_output(&run_id.to_string());
    let turn = vec![
        question(session_id, run_id, "all rows?"),
        tool_call(session_id, run_id, "call_1"),
        message(
            session_id,
            run_id,
            MessageKind::ToolResult,
            ChatMessage::tool_result("call_1", &output),
        ),
    ];
    let (messages, checkpoint_turn) = if save_chat {
        (turn, Vec::new())
    } else {
        // Their position is their id's time: one each, as the loop's ids have.
        let turn = turn
            .into_iter()
            .zip(1u128..)
            .map(|(message, at)| SessionMessage {
                id: Uuid::from_u128((at << 64) | (message.id.as_u128() & u128::from(u64::MAX))),
                ..message
            })
            .collect();
        (Vec::new(), turn)
    };
    let first = StepRecord {
        messages,
        records: vec![record("call_1", 1)],
        events: (1..=5).map(|seq| delta(run_id, seq, "rows ")).collect(),
        checkpoint: Some(Checkpoint {
            input: Some(json!({"question": "all rows?"})),
            head: r#"{"phase":"calling_tools"}"#.into(),
            last_seq: 5,
            turn: checkpoint_turn,
        }),
        ..step(run_id, session_id)
    };
    fixture.store.save_step(&first).await.unwrap();
    if let Some((status, finished_at)) = end {
        let last = StepRecord {
            messages: if save_chat {
                vec![answer(session_id, run_id, "400 rows.")]
            } else {
                Vec::new()
            },
            events: vec![event(
                run_id,
                6,
                EventKind::FinalResponse {
                    delta: "400 rows.".into(),
                },
            )],
            end: Some(RunEnd {
                status,
                finished_at,
                ..completed(None)
            }),
            ..step(run_id, session_id)
        };
        fixture.store.save_step(&last).await.unwrap();
    }
    // An output no message or record names (as a crash between writes could leave).
    fixture
        .execute(&format!(
            "INSERT INTO tool_outputs (run_id, hash, text) VALUES ('{run_id}', 'orphan', 'x')"
        ))
        .await;
    run_id
}

async fn rows_of(fixture: &Fixture, table: &str, run_id: Uuid) -> i64 {
    fixture
        .count(&format!(
            "SELECT COUNT(*) FROM {table} WHERE run_id = '{run_id}'"
        ))
        .await
}

/// What a run keeps of its trail: events, input, head, messages of its own, outputs.
async fn trail(fixture: &Fixture, run_id: Uuid) -> [i64; 5] {
    let head = fixture
        .count(&format!(
            "SELECT COUNT(*) FROM runs WHERE id = '{run_id}' AND state_head IS NOT NULL"
        ))
        .await;
    [
        rows_of(fixture, "run_events", run_id).await,
        rows_of(fixture, "run_inputs", run_id).await,
        head,
        rows_of(fixture, "run_turn", run_id).await,
        rows_of(fixture, "tool_outputs", run_id).await,
    ]
}

pub async fn pruning_keeps_unfinished_runs_and_every_message(fixture: &Fixture) {
    let store = &fixture.store;
    let now = fixture.clock.now();
    let long_ago = now - Duration::days(40);
    let session_id = session(fixture, "alice").await;
    // Four finished runs, oldest first, then a paused one (the latest of its session) and, in
    // another session, a running one started long ago.
    let mut finished = Vec::new();
    for (days, status) in [
        (40, RunStatus::Completed),
        (30, RunStatus::Failed),
        (20, RunStatus::Cancelled),
        (10, RunStatus::Completed),
    ] {
        let at = now - Duration::days(days);
        let started = at - Duration::minutes(1);
        finished.push(saved_run(fixture, session_id, true, started, Some((status, at))).await);
    }
    // Paused a while ago (the latest of its session), asked long ago.
    let paused = saved_run(
        fixture,
        session_id,
        true,
        now - Duration::days(5),
        Some((RunStatus::AwaitingInput, now - Duration::days(5))),
    )
    .await;
    let other = session(fixture, "bob").await;
    let running = saved_run(fixture, other, true, long_ago, None).await;
    // A run that keeps its messages to itself, finished long ago.
    let alone = saved_run(
        fixture,
        other,
        false,
        long_ago - Duration::minutes(1),
        Some((RunStatus::Completed, long_ago)),
    )
    .await;
    // Its messages are its own (`run_turn`): its only stored output is the orphan.
    assert_eq!(trail(fixture, alone).await, [6, 1, 1, 3, 1]);
    let messages_before = store.messages(session_id).await.unwrap();
    let history_before = store.history(session_id, 100).await.unwrap();
    let records_before = store.tool_executions(finished[0]).await.unwrap();

    // Nothing set, nothing pruned.
    assert_eq!(store.prunable(&Retention::default()).await.unwrap(), 0);
    assert_eq!(
        store.prune(&Retention::default()).await.unwrap(),
        Pruned::default()
    );

    // The last two runs of each session keep their trail: alice's three oldest finished runs
    // go (the paused one counts among her last two and stays, unfinished); bob has two runs.
    let by_count = Retention {
        keep_per_session: Some(2),
        batch: 2,
        ..Retention::default()
    };
    assert_eq!(store.prunable(&by_count).await.unwrap(), 3);
    let pruned = store.prune(&by_count).await.unwrap();
    assert_eq!(
        pruned,
        Pruned {
            runs: 3,
            events: 6 * 3,
            checkpoint_rows: 3,
            // The orphan of each: the outputs its messages name stay with them.
            tool_outputs: 3,
        }
    );
    for &run_id in &finished[..3] {
        assert_eq!(trail(fixture, run_id).await, [0, 0, 0, 0, 1], "{run_id}");
        let info = store.run(run_id).await.unwrap().unwrap();
        assert_eq!(info.pruned_at, Some(now));
        assert!(info.status.is_final());
    }
    for run_id in [finished[3], paused, running] {
        let events = if run_id == running { 5 } else { 6 };
        assert_eq!(
            trail(fixture, run_id).await,
            [events, 1, 1, 0, 2],
            "{run_id}"
        );
        assert_eq!(store.run(run_id).await.unwrap().unwrap().pruned_at, None);
    }
    assert_eq!(trail(fixture, alone).await, [6, 1, 1, 3, 1]);
    // Pruned once: a second pass finds nothing.
    assert_eq!(store.prunable(&by_count).await.unwrap(), 0);
    assert_eq!(store.prune(&by_count).await.unwrap(), Pruned::default());

    // By age: finished more than 15 days ago, which bob's run that keeps its messages to
    // itself is (its messages go with its checkpoint). The paused and the running run stay
    // whatever their age; the run finished 10 days ago stays.
    let by_age = Retention {
        max_age_days: Some(15),
        ..Retention::default()
    };
    assert_eq!(
        store.prune(&by_age).await.unwrap(),
        Pruned {
            runs: 1,
            events: 6,
            checkpoint_rows: 1 + 3,
            tool_outputs: 1,
        }
    );
    assert_eq!(trail(fixture, alone).await, [0, 0, 0, 0, 0]);
    for run_id in [finished[3], paused, running] {
        assert_eq!(store.run(run_id).await.unwrap().unwrap().pruned_at, None);
    }
    // A paused run's checkpoint is still whole: it can go on.
    let saved = store.saved_run(paused).await.unwrap().unwrap();
    assert!(saved.input.is_some() && saved.head.is_some());
    assert_eq!(saved.last_seq, 5);

    // What the session's later runs read is what it was; the records and the events API.
    assert_eq!(store.messages(session_id).await.unwrap(), messages_before);
    assert_eq!(
        store.history(session_id, 100).await.unwrap(),
        history_before
    );
    assert_eq!(
        store.tool_executions(finished[0]).await.unwrap(),
        records_before
    );
    assert!(store.events(finished[0], 0).await.unwrap().is_empty());
    assert_eq!(store.events(finished[3], 0).await.unwrap().len(), 6);
}

pub async fn a_session_with_pruned_runs_is_still_deleted_whole(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let old = fixture.clock.now() - Duration::days(3);
    let run_id = saved_run(
        fixture,
        session_id,
        true,
        old,
        Some((RunStatus::Completed, old)),
    )
    .await;
    let rules = Retention {
        max_age_days: Some(1),
        ..Retention::default()
    };
    assert_eq!(store.prune(&rules).await.unwrap().runs, 1);
    assert!(store.delete_session(session_id).await.unwrap());
    assert_eq!(store.run(run_id).await.unwrap(), None);
    assert_eq!(rows_of(fixture, "tool_outputs", run_id).await, 0);
    assert_eq!(rows_of(fixture, "tool_executions", run_id).await, 0);
}
