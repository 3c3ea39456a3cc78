//! A store that goes away under a run: "saved, then emitted" holds. A step that cannot be saved
//! is retried for `agent.store_retry_s`; if the store stays away, nothing of that step is sent,
//! the run ends `failed` with `store_unavailable` (saying whether an answer was lost), and that
//! ending is saved once the store comes back, releasing the session.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{sync::Arc, time::Duration};

use agentloop::{EventKind, RunRequest, RunStatus, Runtime, SqlStore, Store};
use agentloop_test_support::{
    faulty_store::{Fault, FaultyStore},
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use serde_json::json;

struct Setup {
    runtime: Runtime,
    faulty: Arc<FaultyStore>,
    real: Arc<SqlStore>,
    _dir: tempfile::TempDir,
}

/// A runtime whose agent saves through a [`FaultyStore`] in front of a SQLite file.
async fn setup(llm: &ScriptedLlm, retry_s: f64) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/agentloop.db", dir.path().display());
    let real = Arc::new(SqlStore::connect(&url).await.unwrap());
    let faulty = FaultyStore::new(real.clone() as Arc<dyn Store>);
    let extra = format!("[agent]\nstore_retry_s = {retry_s}\n");
    let config = common::config_with_store(llm, None, &url, &extra);
    let store = faulty.clone() as Arc<dyn Store>;
    let runtime = Runtime::start_with(&config, move |agent| agent.store(store))
        .await
        .unwrap();
    Setup {
        runtime,
        faulty,
        real,
        _dir: dir,
    }
}

#[tokio::test]
async fn an_answer_that_cannot_be_saved_is_never_reported_completed() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::text("the answer"),
    ])
    .await;
    let setup = setup(&llm, 0.3).await;
    setup.faulty.set(Fault::FinalSteps);

    let (events, outcome) = setup
        .runtime
        .agent()
        .run(RunRequest::new("echo hello"))
        .collect()
        .await
        .unwrap();

    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.clone().unwrap();
    assert_eq!(failure.code, "store_unavailable");
    assert!(
        failure.message.contains("had answered"),
        "{}",
        failure.message
    );
    assert_eq!(outcome.answer, None);
    assert!(setup.faulty.refused() >= 2, "the final step is tried again");
    // The client never hears of the unsaved answer or of a completion.
    assert!(
        !events.iter().any(
            |e| matches!(&e.kind, EventKind::Done { status, .. } if *status == RunStatus::Completed)
        ),
        "{:?}",
        common::types(&events)
    );
    assert!(common::find(&events, "final_response").is_empty());
    assert_eq!(
        common::types(&events).last().copied(),
        Some("done"),
        "{:?}",
        common::types(&events)
    );
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "gapless"
    );

    // The store comes back: the failed end is saved, the session freed, and the stored log is
    // exactly what the client received.
    setup.faulty.heal();
    let real = setup.real.clone();
    let run_id = outcome.run_id;
    eventually(
        "the run is saved as failed",
        Duration::from_secs(10),
        || {
            let real = real.clone();
            async move {
                let run = real.run(run_id).await.unwrap();
                run.is_some_and(|run| run.status == RunStatus::Failed)
                    .then_some(())
            }
        },
    )
    .await;
    let session = setup
        .real
        .session(outcome.session_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(session.active_run_id, None, "the session is released");
    let stored = setup.real.events(run_id, 0).await.unwrap();
    assert_eq!(stored, events);
    let messages = setup.real.messages(outcome.session_id).await.unwrap();
    let texts: Vec<String> = messages
        .iter()
        .filter_map(|m| m.message.content.clone())
        .collect();
    assert!(
        texts.iter().any(|t| t == "echo hello"),
        "the question is kept: {texts:?}"
    );
    assert!(!texts.iter().any(|t| t == "the answer"), "{texts:?}");
    // The mutating call that did run keeps its record.
    assert_eq!(setup.real.tool_executions(run_id).await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_store_back_within_the_retry_period_loses_nothing() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("the answer").with_delay(Duration::from_millis(50)),
    ])
    .await;
    let setup = setup(&llm, 30.0).await;
    setup.faulty.set(Fault::FinalSteps);
    let faulty = setup.faulty.clone();
    let healer = tokio::spawn(async move {
        assert!(faulty.wait_tripped(Duration::from_secs(10)).await);
        faulty.heal();
    });

    let (events, outcome) = setup
        .runtime
        .agent()
        .run(RunRequest::new("hi"))
        .collect()
        .await
        .unwrap();
    healer.await.unwrap();

    assert_eq!(
        outcome.status,
        RunStatus::Completed,
        "{:?}",
        outcome.failure
    );
    assert_eq!(outcome.answer.as_deref(), Some("the answer"));
    assert!(setup.faulty.refused() >= 1);
    let stored = setup.real.run(outcome.run_id).await.unwrap().unwrap();
    assert_eq!(stored.status, RunStatus::Completed);
    assert_eq!(setup.real.events(outcome.run_id, 0).await.unwrap(), events);
}

#[tokio::test]
async fn a_run_whose_first_step_cannot_be_saved_still_starts_and_ends_its_stream() {
    let llm = ScriptedLlm::start(vec![Reply::text("never asked")]).await;
    let setup = setup(&llm, 0.2).await;
    setup.faulty.set(Fault::AllSteps);

    let (events, outcome) = setup
        .runtime
        .agent()
        .run(RunRequest::new("hi"))
        .collect()
        .await
        .unwrap();

    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(
        common::types(&events),
        vec!["run_started", "error", "done"],
        "a well-formed stream, with nothing unsaved in it"
    );
    assert!(
        llm.requests().is_empty(),
        "no LLM call before the question is saved"
    );
}

/// Another instance adopted the run while its tool call ran: the step with the call's result is
/// refused, and this process stops working on the run at once. It sends nothing more (no end,
/// since the run goes on elsewhere) and does not try the store again.
#[tokio::test]
async fn a_run_adopted_elsewhere_stops_here_without_writing_or_sending_more() {
    let llm = ScriptedLlm::start(vec![
        // The first call's result is saved while the second runs: that save is refused.
        Reply::tool_calls(vec![
            ("test__sleep", json!({"ms": 200})),
            ("test__sleep", json!({"ms": 600})),
        ]),
        Reply::text("never asked"),
    ])
    .await;
    let setup = setup(&llm, 5.0).await;
    let mut run = setup.runtime.agent().run(RunRequest::new("take your time"));
    let mut events = Vec::new();
    while let Some(event) = futures::StreamExt::next(&mut run).await {
        let selected = matches!(event.kind, EventKind::ToolSelected { .. });
        events.push(event);
        if selected && events.len() == 4 {
            setup.faulty.set(Fault::Disowned);
            break;
        }
    }
    let (rest, outcome) = run.collect().await.unwrap();
    events.extend(rest);
    assert_eq!(outcome.status, RunStatus::Running, "left to its new owner");
    let types = common::types(&events);
    assert!(
        !types.contains(&"done") && !types.contains(&"error"),
        "{types:?}"
    );
    assert!(
        !types.contains(&"tool_executed"),
        "the unsaved result is not sent: {types:?}"
    );
    assert_eq!(
        setup.faulty.refused(),
        1,
        "one refused save, then no more asking"
    );
    assert_eq!(
        llm.requests().len(),
        1,
        "no LLM call after the run went elsewhere"
    );
}

/// The process died between recording a run on an existing session and saving its first step
/// (the narrowest window of a crash): the instance that adopts it starts it from what the run's
/// beginning saved, and it completes, its events numbered from `run_started`.
#[tokio::test]
async fn a_run_whose_instance_died_before_its_first_step_is_started_again_by_its_adopter() {
    died_after_its_beginning(true).await;
}

/// A run on a new session saves its first step with its beginning: a process that died right
/// after leaves the run at its first step, and the adopter goes on from there (`run_resumed`),
/// the question asked once.
#[tokio::test]
async fn a_run_on_a_new_session_is_saved_with_its_first_step_and_goes_on_from_it() {
    died_after_its_beginning(false).await;
}

async fn died_after_its_beginning(existing_session: bool) {
    use agentloop::core::{InstanceKind, durability};
    let dir = tempfile::tempdir().unwrap();
    let store_url = format!("sqlite://{}", dir.path().join("runs.db").display());
    let llm = ScriptedLlm::start(vec![Reply::text("Started again, and answered.")]).await;
    let runtime = Runtime::start(&common::config_with_store(&llm, None, &store_url, ""))
        .await
        .unwrap();
    let store = runtime.store().clone();
    let first = durability::register(store.as_ref(), InstanceKind::Server)
        .await
        .unwrap();
    let mut request = RunRequest::new("anyone there?");
    if existing_session {
        let session = agentloop::core::NewSession {
            id: uuid::Uuid::now_v7(),
            user_id: agentloop::core::DEFAULT_USER.into(),
            title: "earlier".into(),
        };
        store.create_session(&session).await.unwrap();
        request.session_id = Some(session.id);
        request.existing_session = true;
    }
    let dying = runtime.agent().clone().owned_by(first.id.clone());
    let begun = dying.begin(request).await.unwrap();
    let run_id = begun.run_id();
    // The process stops here: nothing of the run is driven, nothing given back.
    std::mem::forget(begun);
    store.retire_instance(&first.id).await.unwrap();
    assert!(llm.requests().is_empty());

    let second = durability::register(store.as_ref(), InstanceKind::Server)
        .await
        .unwrap();
    let adopter = runtime.agent().clone().owned_by(second.id.clone());
    let mut adopted = durability::adopt_orphans(
        &adopter,
        Duration::from_secs(60),
        agentloop::core::protocol::ResumeReason::Adopted,
    )
    .await;
    assert_eq!(adopted.len(), 1, "the run is adopted, not ended failed");
    let resumed = adopted.pop().unwrap();
    assert_eq!(resumed.run_id(), run_id);
    let (sink, mut received) = tokio::sync::mpsc::unbounded_channel();
    let outcome = adopter
        .run_resumed(resumed, Arc::new(sink), Default::default())
        .await;
    assert_eq!(outcome.status, RunStatus::Completed, "{outcome:?}");
    assert_eq!(
        outcome.answer.as_deref(),
        Some("Started again, and answered.")
    );
    let mut events = Vec::new();
    while let Ok(event) = received.try_recv() {
        events.push(event);
    }
    let types = common::types(&events);
    let went_on_with = if existing_session {
        "run_started"
    } else {
        "run_resumed"
    };
    assert_eq!(types.first(), Some(&went_on_with), "{types:?}");
    assert_eq!(types.last(), Some(&"done"), "{types:?}");
    assert_eq!(llm.requests().len(), 1, "the model asked once");
    let stored = store.events(run_id, 0).await.unwrap();
    let seqs: Vec<u64> = stored.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=stored.len() as u64).collect::<Vec<_>>());
    assert_eq!(common::types(&stored).first(), Some(&"run_started"));
    let session_id = store.run(run_id).await.unwrap().unwrap().session_id;
    let messages = store.messages(session_id).await.unwrap();
    let said: Vec<_> = messages
        .iter()
        .map(|message| {
            (
                message.message.role.as_str(),
                message.message.content.clone(),
            )
        })
        .collect();
    assert_eq!(
        said,
        [
            ("user", Some("anyone there?".to_string())),
            (
                "assistant",
                Some("Started again, and answered.".to_string())
            )
        ],
        "the question and the answer, once each"
    );
}

/// Records what a run emits and what its driver says the store has.
#[derive(Default)]
struct Watching {
    last_emitted: std::sync::atomic::AtomicU64,
    last_saved: std::sync::atomic::AtomicU64,
}

impl agentloop::core::EventSink for Watching {
    fn emit(&self, event: agentloop::core::protocol::Event) {
        self.last_emitted
            .fetch_max(event.seq, std::sync::atomic::Ordering::SeqCst);
    }

    fn saved(&self, last_seq: u64) {
        self.last_saved
            .fetch_max(last_seq, std::sync::atomic::Ordering::SeqCst);
    }
}

/// The sink learns which events the store has: all of them once a run's end is saved; not the
/// end of a run whose final step the store refused (sent, to be saved later).
#[tokio::test]
async fn the_sink_learns_which_events_the_store_has() {
    use std::sync::atomic::Ordering;
    let llm = ScriptedLlm::start(vec![Reply::text("saved"), Reply::text("not saved")]).await;
    let setup = setup(&llm, 0.2).await;
    for fault in [Fault::Healthy, Fault::FinalSteps] {
        setup.faulty.set(fault);
        let watching = Arc::new(Watching::default());
        let outcome = setup
            .runtime
            .agent()
            .run_with_sink(RunRequest::new("hi"), watching.clone(), Default::default())
            .await;
        let (emitted, saved) = (
            watching.last_emitted.load(Ordering::SeqCst),
            watching.last_saved.load(Ordering::SeqCst),
        );
        assert!(emitted > 0);
        match fault {
            Fault::Healthy => {
                assert_eq!(outcome.status, RunStatus::Completed);
                assert_eq!(saved, emitted, "every event saved");
            }
            _ => {
                assert_eq!(outcome.status, RunStatus::Failed);
                assert!(saved > 0 && saved < emitted, "{saved} of {emitted}");
            }
        }
    }
}
