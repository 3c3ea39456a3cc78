//! A run's beginning (`Store::begin_run`): `SqlStore`'s, in one transaction, and the trait's
//! default, step by step (through `FaultyStore`, which keeps it), must agree on every case.

use std::sync::Arc;
use std::time::Duration;

use agentloop_core::protocol::{EventKind, RunStatus, Usage};
use agentloop_core::{
    Checkpoint, MissingSession, NewRun, NewSession, RunBegin, RunProgress, RunStart, StepRecord,
    Store,
};
use agentloop_store::SqlStore;
use agentloop_test_support::faulty_store::FaultyStore;
use serde_json::json;
use uuid::Uuid;

use super::Fixture;
use super::data::*;
use super::messages::conversation;

const LEASE: Duration = Duration::from_secs(60);

/// The store under test, then the trait's default on a second connection to the same database.
pub async fn both_ways(fixture: &Fixture) -> [Arc<dyn Store>; 2] {
    let second = SqlStore::connect(&fixture.url).await.unwrap();
    let step_by_step: Arc<dyn Store> = FaultyStore::new(Arc::new(second));
    let own = SqlStore::connect(&fixture.url).await.unwrap();
    [Arc::new(own), step_by_step]
}

pub fn start(run: NewRun, if_missing: MissingSession, history: Option<usize>) -> RunStart {
    RunStart {
        run,
        if_missing,
        lease: LEASE,
        history,
        checkpoint: None,
        first_step: None,
        session_is_new: false,
        supersede: None,
    }
}

pub fn create(run: &NewRun) -> MissingSession {
    MissingSession::Create(NewSession {
        id: run.session_id,
        user_id: run.user_id.clone(),
        title: "a new question".into(),
    })
}

async fn holder(store: &dyn Store, session_id: Uuid) -> Option<Uuid> {
    let session = store.session(session_id).await.unwrap().unwrap();
    session.active_run_id
}

pub async fn a_run_begins_with_a_new_session_taken_for_it(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let run = new_run(Uuid::new_v4(), true);
        let begun = store
            .begin_run(&start(run.clone(), create(&run), Some(10)))
            .await
            .unwrap();
        assert_eq!(
            begun,
            RunBegin::Begun {
                history: vec![],
                checkpoint_saved: false
            }
        );
        let session = store.session(run.session_id).await.unwrap().unwrap();
        assert_eq!(session.user_id, run.user_id);
        assert_eq!(session.title, "a new question");
        assert_eq!(session.active_run_id, Some(run.id));
        let info = store.run(run.id).await.unwrap().unwrap();
        assert_eq!(info.status, RunStatus::Running);
        assert_eq!(info.query, run.query);

        // A run that saves nothing needs no session row.
        let unsaved = new_run(Uuid::new_v4(), false);
        let begun = store
            .begin_run(&start(unsaved.clone(), MissingSession::Ignore, None))
            .await
            .unwrap();
        assert_eq!(
            begun,
            RunBegin::Begun {
                history: vec![],
                checkpoint_saved: false
            }
        );
        assert_eq!(store.session(unsaved.session_id).await.unwrap(), None);
        assert!(store.run(unsaved.id).await.unwrap().is_some());
    }
}

pub async fn a_run_begins_on_its_session_with_its_history(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let (session_id, _) = conversation(fixture).await;
        let expected = store.history(session_id, 2).await.unwrap();
        assert!(!expected.is_empty());
        let run = new_run(session_id, true);
        let begun = store
            .begin_run(&start(run.clone(), MissingSession::Refuse, Some(2)))
            .await
            .unwrap();
        assert_eq!(
            begun,
            RunBegin::Begun {
                history: expected,
                checkpoint_saved: false
            }
        );
        assert_eq!(holder(store.as_ref(), session_id).await, Some(run.id));
    }
}

pub async fn a_run_refused_at_its_beginning_writes_nothing(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        // Another user's session is not found, and stays free.
        let bobs = session(fixture, "bob").await;
        let run = new_run(bobs, true);
        let request = start(run.clone(), create(&run), None);
        let begun = store.begin_run(&request);
        assert_eq!(begun.await.unwrap(), RunBegin::SessionNotFound);
        assert_eq!(holder(store.as_ref(), bobs).await, None);
        assert_eq!(store.run(run.id).await.unwrap(), None);

        // A run meant for an existing session does not create it.
        let run = new_run(Uuid::new_v4(), true);
        let request = start(run.clone(), MissingSession::Refuse, None);
        let begun = store.begin_run(&request);
        assert_eq!(begun.await.unwrap(), RunBegin::SessionNotFound);
        assert_eq!(store.session(run.session_id).await.unwrap(), None);
        assert_eq!(store.run(run.id).await.unwrap(), None);

        // A session another run holds is busy.
        let first = new_run(Uuid::new_v4(), true);
        let request = start(first.clone(), create(&first), None);
        let begun = store.begin_run(&request);
        assert!(matches!(begun.await.unwrap(), RunBegin::Begun { .. }));
        let second = new_run(first.session_id, true);
        let request = start(second.clone(), create(&second), None);
        let begun = store.begin_run(&request);
        assert_eq!(
            begun.await.unwrap(),
            RunBegin::SessionBusy { run_id: first.id }
        );
        assert_eq!(
            holder(store.as_ref(), first.session_id).await,
            Some(first.id)
        );
        assert_eq!(store.run(second.id).await.unwrap(), None);
    }
}

pub async fn a_run_that_cannot_be_recorded_leaves_its_session_free(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let session_id = session(fixture, "alice").await;
        // A run id that is taken: the run's row cannot be written, after the session was.
        let taken = run(fixture, Uuid::new_v4()).await;
        let run = NewRun {
            id: taken,
            ..new_run(session_id, true)
        };
        let failed = store
            .begin_run(&start(run, MissingSession::Refuse, Some(5)))
            .await;
        assert!(failed.is_err(), "{failed:?}");
        assert_eq!(
            holder(store.as_ref(), session_id).await,
            None,
            "the session is given back"
        );
        let other = new_run(session_id, true);
        let request = start(other.clone(), MissingSession::Refuse, None);
        let begun = store.begin_run(&request);
        assert!(matches!(begun.await.unwrap(), RunBegin::Begun { .. }));
    }
}

/// A run's beginning saved with its row: what it starts from and its state at seq 0, so that an
/// instance adopting it before its first step can start it; its first step then keeps that input.
pub async fn a_run_begins_with_its_first_checkpoint(fixture: &Fixture) {
    let store = &fixture.store;
    let run = new_run(Uuid::new_v4(), true);
    let request = RunStart {
        checkpoint: Some(Checkpoint {
            input: Some(json!({"history_window": 10, "system_prompt": "Be brief."})),
            head: json!({"phase": "created", "version": 4}).to_string(),
            last_seq: 0,
            turn: vec![],
        }),
        ..start(run.clone(), create(&run), Some(10))
    };
    let begun = store.begin_run(&request).await.unwrap();
    assert_eq!(
        begun,
        RunBegin::Begun {
            history: vec![],
            checkpoint_saved: true
        }
    );
    let saved = store.saved_run(run.id).await.unwrap().unwrap();
    assert_eq!(saved.input, request.checkpoint.as_ref().unwrap().input);
    assert_eq!(saved.head, Some(json!({"phase": "created", "version": 4})));
    assert_eq!(saved.last_seq, 0);

    // The first step, told the input is saved, brings only its head.
    let first = StepRecord {
        checkpoint: Some(Checkpoint {
            input: None,
            head: json!({"phase": "awaiting_step", "version": 4}).to_string(),
            last_seq: 1,
            turn: vec![],
        }),
        ..step(run.id, run.session_id)
    };
    store.save_step(&first).await.unwrap();
    let saved = store.saved_run(run.id).await.unwrap().unwrap();
    assert_eq!(saved.input, request.checkpoint.as_ref().unwrap().input);
    assert_eq!(
        saved.head,
        Some(json!({"phase": "awaiting_step", "version": 4}))
    );
    assert_eq!(saved.last_seq, 1);
}

/// A run on a new session brings its first step (the question, its first events, its state
/// after them) and both are written in one commit: what it starts from comes with the step. The
/// same whether the store looks the session up first or is told it is new (and only inserts).
pub async fn a_run_begins_with_its_first_step(fixture: &Fixture) {
    let [own, step_by_step] = both_ways(fixture).await;
    for session_is_new in [false, true] {
        begins_with_its_first_step(own.as_ref(), session_is_new, session_is_new).await;
        begins_with_its_first_step(step_by_step.as_ref(), session_is_new, false).await;
    }
}

fn first_step_of(run: &NewRun) -> StepRecord {
    StepRecord {
        messages: vec![question(run.session_id, run.id, "what is up?")],
        events: vec![
            event(
                run.id,
                1,
                EventKind::RunStarted {
                    session_id: run.session_id,
                },
            ),
            delta(run.id, 2, "no"),
        ],
        checkpoint: Some(Checkpoint {
            input: Some(json!({"history_window": 10, "system_prompt": "Be brief."})),
            head: json!({"phase": "awaiting_model", "version": 4}).to_string(),
            last_seq: 2,
            turn: vec![],
        }),
        progress: RunProgress {
            usage: Usage::nothing_spent(),
            ..RunProgress::default()
        },
        ..step(run.id, run.session_id)
    }
}

/// `inserts_only`: the store believes `session_is_new` (SqlStore's beginning inserts the
/// session without looking it up).
async fn begins_with_its_first_step(store: &dyn Store, session_is_new: bool, inserts_only: bool) {
    let run = new_run(Uuid::now_v7(), true);
    let first = first_step_of(&run);
    let request = RunStart {
        first_step: Some(first.clone()),
        session_is_new,
        ..start(run.clone(), create(&run), Some(10))
    };
    let begun = store.begin_run(&request).await.unwrap();
    assert_eq!(
        begun,
        RunBegin::Begun {
            history: vec![],
            checkpoint_saved: true
        }
    );
    let saved = store.saved_run(run.id).await.unwrap().unwrap();
    assert_eq!(saved.input, first.checkpoint.as_ref().unwrap().input);
    assert_eq!(
        saved.head,
        Some(json!({"phase": "awaiting_model", "version": 4}))
    );
    assert_eq!(saved.last_seq, 2);
    assert_eq!(saved.status, RunStatus::Running);
    assert_eq!(store.events(run.id, 0).await.unwrap(), first.events);
    let messages = store.messages(run.session_id).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].message.content,
        first.messages[0].message.content
    );
    assert_eq!(holder(store, run.session_id).await, Some(run.id));
    let session = store.session(run.session_id).await.unwrap().unwrap();
    assert_eq!(session.user_id, run.user_id);
    // Its counters as the first step left them: nothing spent yet, and all of it known.
    let info = store.run(run.id).await.unwrap().unwrap();
    assert_eq!(info.usage, Usage::nothing_spent());

    // A second run on that session writes nothing of its first step: refused as busy, also when
    // it was said to be new (two requests that both found no session: its row is refused, and
    // the run begins the general way, which finds the session and its lock).
    let second = new_run(run.session_id, true);
    let refused = RunStart {
        first_step: Some(first_step_of(&second)),
        session_is_new,
        ..start(second.clone(), create(&second), None)
    };
    let begun = store.begin_run(&refused).await;
    assert_eq!(
        begun.as_ref().ok(),
        Some(&RunBegin::SessionBusy { run_id: run.id }),
        "{begun:?} (inserts only: {inserts_only})"
    );
    assert_eq!(store.run(second.id).await.unwrap(), None);
    assert!(store.events(second.id, 0).await.unwrap().is_empty());
    assert_eq!(store.messages(run.session_id).await.unwrap().len(), 1);
    assert_eq!(holder(store, run.session_id).await, Some(run.id));
}

/// A run that keeps no chat on a new session: no session row, its question kept with the run
/// only (its turn), and it begins and goes on as any other.
pub async fn a_run_without_chat_begins_with_its_first_step(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        for session_is_new in [false, true] {
            let run = new_run(Uuid::now_v7(), false);
            let question = question(run.session_id, run.id, "off the record");
            let first = StepRecord {
                messages: vec![],
                checkpoint: Some(Checkpoint {
                    turn: vec![question.clone()],
                    ..first_step_of(&run).checkpoint.unwrap()
                }),
                ..first_step_of(&run)
            };
            let request = RunStart {
                first_step: Some(first.clone()),
                session_is_new,
                ..start(run.clone(), MissingSession::Ignore, None)
            };
            let begun = store.begin_run(&request).await.unwrap();
            assert!(matches!(begun, RunBegin::Begun { .. }), "{begun:?}");
            assert_eq!(store.session(run.session_id).await.unwrap(), None);
            let saved = store.saved_run(run.id).await.unwrap().unwrap();
            assert_eq!(saved.turn.len(), 1);
            assert_eq!(saved.turn[0].message.content, question.message.content);
            assert_eq!(saved.last_seq, 2);
            assert_eq!(store.events(run.id, 0).await.unwrap(), first.events);

            // Its next step is written over the state the first one left.
            let next = StepRecord {
                events: vec![delta(run.id, 3, "yes")],
                checkpoint: Some(Checkpoint {
                    input: None,
                    head: json!({"phase": "awaiting_tools", "version": 4}).to_string(),
                    last_seq: 3,
                    turn: vec![],
                }),
                ..step(run.id, run.session_id)
            };
            store.save_step(&next).await.unwrap();
            let saved = store.saved_run(run.id).await.unwrap().unwrap();
            assert_eq!(saved.last_seq, 3);
            assert_eq!(saved.turn.len(), 1);
            assert_eq!(store.events(run.id, 0).await.unwrap().len(), 3);
        }
    }
}

/// Given both, the first step's checkpoint is the one saved: the beginning's is not written
/// beside it.
pub async fn a_first_step_replaces_the_checkpoint_of_the_beginning(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let run = new_run(Uuid::now_v7(), true);
        let first = first_step_of(&run);
        let request = RunStart {
            checkpoint: Some(Checkpoint {
                input: Some(json!({"system_prompt": "the beginning's"})),
                head: json!({"phase": "created", "version": 4}).to_string(),
                last_seq: 0,
                turn: vec![],
            }),
            first_step: Some(first.clone()),
            ..start(run.clone(), create(&run), None)
        };
        let begun = store.begin_run(&request).await.unwrap();
        assert!(matches!(begun, RunBegin::Begun { .. }), "{begun:?}");
        let saved = store.saved_run(run.id).await.unwrap().unwrap();
        assert_eq!(saved.input, first.checkpoint.as_ref().unwrap().input);
        assert_eq!(saved.last_seq, 2);
    }
}

/// A run meant for an existing session is refused when there is none, even if its session is
/// said to be new: nothing of it, or of its first step, is written.
pub async fn a_run_for_an_existing_session_is_refused_whatever_its_first_step(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let run = new_run(Uuid::now_v7(), true);
        let request = RunStart {
            first_step: Some(first_step_of(&run)),
            session_is_new: true,
            ..start(run.clone(), MissingSession::Refuse, None)
        };
        let begun = store.begin_run(&request).await.unwrap();
        assert_eq!(begun, RunBegin::SessionNotFound);
        assert_eq!(store.run(run.id).await.unwrap(), None);
        assert!(store.events(run.id, 0).await.unwrap().is_empty());
        assert_eq!(store.session(run.session_id).await.unwrap(), None);
    }
}
