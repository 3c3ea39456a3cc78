use agentloop_core::protocol::{EventKind, FinalizeReason, RunStatus, ToolStatus, Usage};
use agentloop_core::{
    ErrorCode, NewRun, RunEnd, RunFailure, SessionLock, StepRecord, Store, StoreError,
};
use serde_json::json;
use uuid::Uuid;

use super::Fixture;
use super::data::*;

pub async fn a_run_keeps_its_counters_status_and_outcome(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let new = new_run(session_id, true);
    store.start_run(&new).await.unwrap();

    let started = store.run(new.id).await.unwrap().unwrap();
    assert_eq!(started.id, new.id);
    assert_eq!(started.session_id, session_id);
    assert_eq!(started.user_id, "alice");
    assert_eq!(started.query, new.query);
    assert_eq!(started.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(started.status, RunStatus::Running);
    assert_eq!((started.iterations, started.tools_used), (0, 0));
    assert_eq!(started.usage, Usage::default());
    assert!(started.save_chat);
    assert_eq!(started.started_at, new.started_at);
    assert_eq!(started.finished_at, None);
    assert_eq!(started.finalize_reason, None);
    assert_eq!(started.error_code, None);

    for (iteration, tools) in [(1, 2), (2, 3)] {
        let step = StepRecord {
            progress: progress(iteration, tools, 1000 * u64::from(iteration)),
            ..step(new.id, session_id)
        };
        store.save_step(&step).await.unwrap();
    }
    let running = store.run(new.id).await.unwrap().unwrap();
    assert_eq!((running.iterations, running.tools_used), (2, 3));
    assert_eq!(running.usage.prompt_tokens, 2000);
    assert_eq!(running.usage.completion_tokens, 200);
    assert_eq!(running.status, RunStatus::Running);

    let end = RunEnd {
        output: None,
        status: RunStatus::Failed,
        answer_message_id: None,
        failure: Some(RunFailure {
            code: ErrorCode::LlmUnreachable,
            message: "the model did not answer".into(),
        }),
        finalize_reason: Some(FinalizeReason::ConsecutiveFailures),
        finished_at: now(),
    };
    let last = StepRecord {
        progress: progress(3, 3, 3000),
        end: Some(end.clone()),
        ..step(new.id, session_id)
    };
    store.save_step(&last).await.unwrap();
    let failed = store.run(new.id).await.unwrap().unwrap();
    assert_eq!(failed.status, RunStatus::Failed);
    assert_eq!(failed.iterations, 3);
    assert_eq!(failed.usage.prompt_tokens, 3000);
    assert_eq!(failed.error_code, Some(ErrorCode::LlmUnreachable));
    assert_eq!(
        failed.error_message.as_deref(),
        Some("the model did not answer")
    );
    assert_eq!(
        failed.finalize_reason,
        Some(FinalizeReason::ConsecutiveFailures)
    );
    assert_eq!(failed.finished_at, Some(end.finished_at));
    assert_eq!(failed.answer_message_id, None);

    // A completed run with its answer.
    let other = run(fixture, session_id).await;
    let answer_message = answer(session_id, other, "Three.");
    // Its typed answer is kept whole, as JSON (migration 13).
    let typed = serde_json::json!({"title": "Three", "tags": ["a", "é\u{0}"], "n": 3});
    let done = StepRecord {
        messages: vec![answer_message.clone()],
        progress: progress(1, 0, 10),
        end: Some(RunEnd {
            output: Some(typed.clone()),
            ..completed(Some(answer_message.id))
        }),
        ..step(other, session_id)
    };
    store.save_step(&done).await.unwrap();
    let completed_run = store.run(other).await.unwrap().unwrap();
    assert_eq!(completed_run.status, RunStatus::Completed);
    assert_eq!(completed_run.answer_message_id, Some(answer_message.id));
    assert_eq!(completed_run.output, Some(typed));
    assert_eq!(failed.output, None);
    assert_eq!(completed_run.error_code, None);
    assert_eq!(completed_run.finalize_reason, None);
    assert_eq!(store.run(Uuid::new_v4()).await.unwrap(), None);
}

pub async fn runs_of_a_session_come_oldest_first(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let mut ids = Vec::new();
    for seconds in [30, 10, 20] {
        let run = agentloop_core::NewRun {
            started_at: at(seconds),
            owner: None,
            ..new_run(session_id, true)
        };
        store.start_run(&run).await.unwrap();
        ids.push(run.id);
    }
    let other_session = session(fixture, "alice").await;
    run(fixture, other_session).await;

    let listed: Vec<Uuid> = store
        .session_runs(session_id)
        .await
        .unwrap()
        .into_iter()
        .map(|run| run.id)
        .collect();
    assert_eq!(listed, [ids[1], ids[2], ids[0]]);
}

pub async fn tool_records_are_upserted_in_their_first_order(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let first = StepRecord {
        records: vec![record("call_b", 1), record("call_a", 1)],
        ..step(run_id, session_id)
    };
    store.save_step(&first).await.unwrap();

    let call_b_again = agentloop_core::protocol::ToolExecutionRecord {
        iteration: 2,
        status: ToolStatus::Error,
        result: None,
        structured_result: None,
        error: Some("timed out after 30 s".into()),
        duration_ms: 30_000,
        arguments: json!("not json {"),
        // What the tool said the call cost is kept with it.
        cost_usd: Some(0.0023),
        logs: Vec::new(),
        ..record("call_b", 1)
    };
    let call_c_first = record("call_c", 2);
    let call_c_last = agentloop_core::protocol::ToolExecutionRecord {
        status: ToolStatus::Blocked,
        ..record("call_c", 2)
    };
    let second = StepRecord {
        records: vec![call_c_first, call_b_again.clone(), call_c_last.clone()],
        ..step(run_id, session_id)
    };
    store.save_step(&second).await.unwrap();

    let stored = store.tool_executions(run_id).await.unwrap();
    assert_eq!(
        stored,
        vec![call_b_again, first.records[1].clone(), call_c_last,]
    );
    assert!(
        store
            .tool_executions(Uuid::new_v4())
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn events_replay_after_a_seq_and_saving_twice_is_harmless(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let first = StepRecord {
        events: vec![
            event(run_id, 1, EventKind::RunStarted { session_id }),
            event(run_id, 2, EventKind::Thinking { iteration: 1 }),
            event(
                run_id,
                3,
                EventKind::ToolSelected {
                    iteration: 1,
                    call_id: "call_1".into(),
                    tool: "erp.search_invoices".into(),
                    arguments: json!({"status": "open"}),
                },
            ),
        ],
        ..step(run_id, session_id)
    };
    let second = StepRecord {
        events: vec![
            delta(run_id, 4, "Three "),
            delta(run_id, 5, "invoices."),
            event(
                run_id,
                6,
                EventKind::Done {
                    status: RunStatus::Completed,
                    iterations: 1,
                    tools_used: 1,
                    message_id: Some(Uuid::new_v4()),
                    usage: Usage {
                        prompt_tokens: 10,
                        completion_tokens: 2,
                        ..Usage::default()
                    },
                    should_refresh: false,
                    output: None,
                },
            ),
        ],
        ..step(run_id, session_id)
    };
    store.save_step(&first).await.unwrap();
    store.save_step(&second).await.unwrap();
    let all: Vec<_> = first.events.iter().chain(&second.events).cloned().collect();
    assert_eq!(store.events(run_id, 0).await.unwrap(), all);
    assert_eq!(store.events(run_id, 4).await.unwrap(), all[4..].to_vec());
    assert!(store.events(run_id, 6).await.unwrap().is_empty());

    // Saved again, with other contents under the same seqs: the first write stands.
    store.save_step(&second).await.unwrap();
    let rewritten = StepRecord {
        events: vec![delta(run_id, 5, "something else")],
        ..step(run_id, session_id)
    };
    store.save_step(&rewritten).await.unwrap();
    assert_eq!(store.events(run_id, 0).await.unwrap(), all);
    let rows = fixture
        .count(&format!(
            "SELECT COUNT(*) FROM run_events WHERE run_id = '{run_id}' AND type = 'final_response'"
        ))
        .await;
    assert_eq!(rows, 2, "the type column holds the event's type");
}

pub async fn hundreds_of_events_in_one_step_are_all_stored(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    // More than one INSERT statement's worth of rows.
    let events: Vec<_> = (1..=1000)
        .map(|seq| delta(run_id, seq, &format!("token {seq} ")))
        .collect();
    let records: Vec<_> = (0..200).map(|i| record(&format!("call_{i}"), 1)).collect();
    let big = StepRecord {
        events: events.clone(),
        records: records.clone(),
        ..step(run_id, session_id)
    };
    store.save_step(&big).await.unwrap();
    assert_eq!(store.events(run_id, 0).await.unwrap(), events);
    assert_eq!(store.events(run_id, 990).await.unwrap(), events[990..]);
    assert_eq!(store.tool_executions(run_id).await.unwrap(), records);
}

pub async fn events_of_an_unknown_run_are_empty(fixture: &Fixture) {
    assert!(
        fixture
            .store
            .events(Uuid::new_v4(), 0)
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_run_that_does_not_save_the_chat_needs_no_session_row(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = Uuid::new_v4();
    let new = new_run(session_id, false);
    assert_eq!(
        store
            .lock_session(session_id, new.id, std::time::Duration::from_secs(60))
            .await
            .unwrap(),
        SessionLock::Acquired
    );
    store.start_run(&new).await.unwrap();
    let last = StepRecord {
        records: vec![record("call_1", 1)],
        events: vec![
            event(new.id, 1, EventKind::RunStarted { session_id }),
            delta(new.id, 2, "Three."),
        ],
        progress: progress(1, 1, 100),
        end: Some(completed(None)),
        ..step(new.id, session_id)
    };
    store.save_step(&last).await.unwrap();

    let stored = store.run(new.id).await.unwrap().unwrap();
    assert!(!stored.save_chat);
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(store.session(session_id).await.unwrap(), None);
    assert_eq!(store.session_runs(session_id).await.unwrap().len(), 1);
    assert_eq!(store.events(new.id, 0).await.unwrap().len(), 2);
    assert_eq!(store.tool_executions(new.id).await.unwrap().len(), 1);
    // Its runs can still be deleted by session id.
    assert!(store.delete_session(session_id).await.unwrap());
    assert_eq!(store.run(new.id).await.unwrap(), None);
}

pub async fn a_step_of_an_unknown_run_is_not_found(fixture: &Fixture) {
    let session_id = session(fixture, "alice").await;
    let run_id = Uuid::new_v4();
    let orphan = StepRecord {
        events: vec![delta(run_id, 1, "x")],
        ..step(run_id, session_id)
    };
    let error = fixture.store.save_step(&orphan).await.unwrap_err();
    assert!(
        matches!(&error, StoreError::NotFound(what) if what.contains(&run_id.to_string())),
        "{error:?}"
    );
}

pub async fn a_failing_step_writes_nothing(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let saved = question(session_id, run_id, "How many?");
    save_messages(fixture, run_id, session_id, std::slice::from_ref(&saved)).await;

    // The same message id again violates its uniqueness, after the run's counters were
    // written in the same transaction and before the records and events.
    let failing = StepRecord {
        messages: vec![answer(session_id, run_id, "Three."), saved.clone()],
        records: vec![record("call_1", 1)],
        events: vec![delta(run_id, 1, "Three.")],
        progress: progress(5, 5, 500),
        end: Some(completed(None)),
        ..step(run_id, session_id)
    };
    let error = store.save_step(&failing).await.unwrap_err();
    assert!(matches!(error, StoreError::Query { .. }), "{error:?}");

    assert_eq!(store.messages(session_id).await.unwrap(), vec![saved]);
    assert!(store.tool_executions(run_id).await.unwrap().is_empty());
    assert!(store.events(run_id, 0).await.unwrap().is_empty());
    let run = store.run(run_id).await.unwrap().unwrap();
    assert_eq!(run.status, RunStatus::Running);
    assert_eq!(run.iterations, 0);
}

pub async fn a_paused_run_keeps_its_checkpoint_and_its_session_until_claimed(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let new = new_run(session_id, true);
    assert_eq!(
        store
            .lock_session(session_id, new.id, std::time::Duration::from_millis(5))
            .await
            .unwrap(),
        SessionLock::Acquired
    );
    store.start_run(&new).await.unwrap();
    let fresh = store.saved_run(new.id).await.unwrap().unwrap();
    assert_eq!((fresh.head, fresh.input), (None, None), "no step saved yet");

    let checkpoint = agentloop_core::Checkpoint {
        input: Some(json!({"history": [], "system_prompt": "be brief"})),
        head: json!({"version": 3, "phase": {"phase": "awaiting_input"}}).to_string(),
        last_seq: 7,
        turn: Vec::new(),
    };
    let pause = StepRecord {
        end: Some(RunEnd {
            output: None,
            status: RunStatus::AwaitingInput,
            answer_message_id: None,
            failure: None,
            finalize_reason: None,
            finished_at: now(),
        }),
        checkpoint: Some(checkpoint.clone()),
        ..step(new.id, session_id)
    };
    store.save_step(&pause).await.unwrap();
    let paused = store.run(new.id).await.unwrap().unwrap();
    assert_eq!(paused.status, RunStatus::AwaitingInput);
    assert_eq!(paused.finished_at, None, "a paused run has not finished");
    let saved = store.saved_run(new.id).await.unwrap().unwrap();
    assert_eq!(saved.status, RunStatus::AwaitingInput);
    assert_eq!(
        saved.head,
        Some(serde_json::from_str(&checkpoint.head).unwrap())
    );
    assert_eq!(saved.input, checkpoint.input);
    assert_eq!(saved.last_seq, 7);

    // The session stays with the paused run, long after the lease it had while running.
    fixture.clock.advance(std::time::Duration::from_secs(3600));
    let other = Uuid::now_v7();
    assert_eq!(
        store
            .lock_session(session_id, other, std::time::Duration::from_secs(60))
            .await
            .unwrap(),
        SessionLock::Busy { run_id: new.id }
    );

    // One claim wins; the first step after it makes the run running again, and a later step
    // (without input) keeps the input saved with the first.
    assert!(store.claim_paused_run(new.id, Some("me")).await.unwrap());
    assert!(!store.claim_paused_run(new.id, Some("me")).await.unwrap());
    let next = StepRecord {
        checkpoint: Some(agentloop_core::Checkpoint {
            input: None,
            head: json!({"version": 3, "phase": {"phase": "awaiting_step"}}).to_string(),
            last_seq: 9,
            turn: Vec::new(),
        }),
        owner: Some("me".to_string()),
        ..step(new.id, session_id)
    };
    store.save_step(&next).await.unwrap();
    let saved = store.saved_run(new.id).await.unwrap().unwrap();
    assert_eq!(saved.status, RunStatus::Running);
    assert_eq!(saved.owner.as_deref(), Some("me"));
    assert_eq!(saved.last_seq, 9);
    assert_eq!(saved.input, checkpoint.input);
    assert!(
        !store.claim_paused_run(Uuid::now_v7(), None).await.unwrap(),
        "an unknown run"
    );
}

/// Starts a run of `user_id` at `started_at` and saves one step that spent `tokens` and `cost`.
async fn spent_run(
    fixture: &Fixture,
    user_id: &str,
    started_at: chrono::DateTime<chrono::Utc>,
    tokens: u64,
    cost: Option<f64>,
) {
    let session_id = session(fixture, user_id).await;
    let run = NewRun {
        user_id: user_id.into(),
        started_at,
        ..new_run(session_id, true)
    };
    fixture.store.start_run(&run).await.unwrap();
    let mut spent = progress(1, 0, tokens);
    spent.usage.cost_usd = cost;
    spent.usage.cost_complete = cost.is_some();
    let step = StepRecord {
        progress: spent,
        ..step(run.id, session_id)
    };
    fixture.store.save_step(&step).await.unwrap();
}

pub async fn a_users_runs_since_a_time_add_up_their_tokens_and_cost(fixture: &Fixture) {
    let store = &fixture.store;
    spent_run(fixture, "alice", at(-100), 9000, Some(0.9)).await;
    spent_run(fixture, "alice", at(0), 1000, Some(0.01)).await;
    spent_run(fixture, "alice", at(100), 2000, Some(0.02)).await;
    spent_run(fixture, "bob", at(100), 5000, Some(0.5)).await;

    let alice = store.user_usage_since("alice", at(0)).await.unwrap();
    assert_eq!((alice.prompt_tokens, alice.completion_tokens), (3000, 300));
    let cost = alice.cost_usd.unwrap();
    assert!((cost - 0.03).abs() < 1e-9, "{cost}");
    assert!(alice.cost_complete);

    // A run without a price leaves the sum a lower bound.
    spent_run(fixture, "alice", at(200), 100, None).await;
    let alice = store.user_usage_since("alice", at(0)).await.unwrap();
    assert_eq!(alice.prompt_tokens, 3100);
    assert!((alice.cost_usd.unwrap() - 0.03).abs() < 1e-9);
    assert!(!alice.cost_complete);

    let nobody = store.user_usage_since("carol", at(0)).await.unwrap();
    assert_eq!(nobody.total(), 0);
    assert_eq!(nobody.cost_usd, None);
    assert!(nobody.cost_complete, "nothing spent is all known");
}

pub async fn a_run_row_keeps_its_cost(fixture: &Fixture) {
    let store = &fixture.store;
    spent_run(fixture, "dora", at(0), 1000, Some(0.0123)).await;
    let sessions = store.list_sessions(Some("dora"), 10).await.unwrap();
    let runs = store.session_runs(sessions[0].id).await.unwrap();
    assert_eq!(runs[0].usage.cost_usd, Some(0.0123));
    assert!(runs[0].usage.cost_complete);
}
