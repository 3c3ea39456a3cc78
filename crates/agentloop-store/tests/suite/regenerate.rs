//! A regenerated answer (the AI SDK's regenerate, `RunStart::supersede`): the run that answers
//! the last question again marks the last exchange superseded as it begins, so that the model's
//! history and the session's messages hold the question once and the new answer; the superseded
//! messages stay stored, each naming the run that replaced it. `SqlStore`'s beginning (one
//! transaction) and the trait's default (step by step) must agree.

use std::sync::Arc;

use agentloop_core::protocol::SessionMessage;
use agentloop_core::{MissingSession, NewRun, RunBegin, StepRecord, Store, Supersede};
use uuid::Uuid;

use super::Fixture;
use super::begin::{both_ways, start};
use super::data::*;

/// A run of `session_id` started `seconds` after the origin, that asked `question` and got
/// `answer` (with a tool call between them when `tools`), ended; its messages.
async fn exchange(
    store: &dyn Store,
    session_id: Uuid,
    seconds: i64,
    question_text: &str,
    answer_text: &str,
    tools: bool,
) -> (Uuid, Vec<SessionMessage>) {
    let run = NewRun {
        started_at: at(seconds),
        ..new_run(session_id, true)
    };
    store.start_run(&run).await.unwrap();
    let messages = turn(run.id, session_id, question_text, answer_text, tools);
    end(store, run.id, session_id, &messages).await;
    (run.id, messages)
}

fn turn(
    run_id: Uuid,
    session_id: Uuid,
    question_text: &str,
    answer_text: &str,
    tools: bool,
) -> Vec<SessionMessage> {
    let mut messages = vec![question(session_id, run_id, question_text)];
    if tools {
        messages.push(tool_call(session_id, run_id, "call_1"));
        messages.push(tool_result(session_id, run_id, "call_1"));
    }
    messages.push(answer(session_id, run_id, answer_text));
    messages.push(trace(session_id, run_id));
    messages
}

/// Saves `messages` as the run's last step: the run completes and gives its session back.
async fn end(store: &dyn Store, run_id: Uuid, session_id: Uuid, messages: &[SessionMessage]) {
    let step = StepRecord {
        messages: messages.to_vec(),
        end: Some(completed(None)),
        ..step(run_id, session_id)
    };
    store.save_step(&step).await.unwrap();
}

/// Begins a run of `session_id` that regenerates (from `from_run`, or the last exchange); its
/// history (10 dialogue messages).
async fn regenerate(
    store: &dyn Store,
    session_id: Uuid,
    from_run: Option<Uuid>,
) -> (NewRun, Vec<SessionMessage>) {
    let run = new_run(session_id, true);
    let request = agentloop_core::RunStart {
        supersede: Some(Supersede { from_run }),
        ..start(run.clone(), MissingSession::Refuse, Some(10))
    };
    match store.begin_run(&request).await.unwrap() {
        RunBegin::Begun { history, .. } => (run, history),
        other => panic!("the regenerating run did not begin: {other:?}"),
    }
}

fn without_traces(messages: &[SessionMessage]) -> Vec<SessionMessage> {
    messages
        .iter()
        .filter(|message| message.kind != agentloop_core::protocol::MessageKind::Trace)
        .cloned()
        .collect()
}

fn superseded_by(messages: &[SessionMessage], run_id: Uuid) -> Vec<SessionMessage> {
    messages
        .iter()
        .map(|message| SessionMessage {
            superseded_by_run: Some(run_id),
            ..message.clone()
        })
        .collect()
}

pub async fn a_regenerated_answer_supersedes_the_last_exchange(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let store: Arc<dyn Store> = store;
        let session_id = session(fixture, "alice").await;
        let (_, first) = exchange(store.as_ref(), session_id, 1, "first?", "one", false).await;
        let (second_run, second) =
            exchange(store.as_ref(), session_id, 2, "second?", "two", true).await;

        let (again, history) = regenerate(store.as_ref(), session_id, None).await;
        // The model sees the exchanges before the one it answers again, and not that one.
        assert_eq!(history, without_traces(&first));
        assert_eq!(store.messages(session_id).await.unwrap(), first);
        let info = store.session(session_id).await.unwrap().unwrap();
        assert_eq!(info.message_count, first.len() as u64);
        assert_eq!(info.active_run_id, Some(again.id));
        // Kept, each naming the run that replaced it.
        let everything = [first.clone(), superseded_by(&second, again.id)].concat();
        assert_eq!(
            store.messages_with_superseded(session_id).await.unwrap(),
            everything
        );
        let old_answer = &second[3];
        assert_eq!(
            store
                .message(session_id, old_answer.id)
                .await
                .unwrap()
                .unwrap()
                .superseded_by_run,
            Some(again.id)
        );
        assert!(store.run(second_run).await.unwrap().is_some());

        // The new answer: the question once, then the answer, for the next run as for a listing.
        let new_turn = turn(again.id, session_id, "second?", "two, again", false);
        end(store.as_ref(), again.id, session_id, &new_turn).await;
        let current = [first.clone(), new_turn.clone()].concat();
        assert_eq!(store.messages(session_id).await.unwrap(), current);
        assert_eq!(
            store.history(session_id, 10).await.unwrap(),
            without_traces(&current)
        );
        // A run that goes on after a crash reads the history it began with.
        assert_eq!(
            store
                .history_before_run(session_id, 10, again.id)
                .await
                .unwrap(),
            without_traces(&first)
        );

        // Regenerated again: the last exchange is now the regenerated one.
        let (third, history) = regenerate(store.as_ref(), session_id, None).await;
        assert_eq!(history, without_traces(&first));
        let all = store.messages_with_superseded(session_id).await.unwrap();
        assert_eq!(
            all,
            [
                first.clone(),
                superseded_by(&second, again.id),
                superseded_by(&new_turn, third.id)
            ]
            .concat()
        );
    }
}

pub async fn a_regenerated_answer_replaces_the_exchanges_from_the_run_named(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let store: Arc<dyn Store> = store;
        let session_id = session(fixture, "alice").await;
        let (first_run, first) =
            exchange(store.as_ref(), session_id, 1, "first?", "one", false).await;
        let (_, second) = exchange(store.as_ref(), session_id, 2, "second?", "two", true).await;

        // The AI SDK's `regenerate({messageId})` of an earlier answer (its id is the run's):
        // that exchange and every later one go.
        let (again, history) = regenerate(store.as_ref(), session_id, Some(first_run)).await;
        assert!(history.is_empty(), "{history:?}");
        assert!(store.messages(session_id).await.unwrap().is_empty());
        let all = store.messages_with_superseded(session_id).await.unwrap();
        assert_eq!(all, superseded_by(&[first, second].concat(), again.id));
        end(store.as_ref(), again.id, session_id, &[]).await;

        // A run that is not the session's (or has no current message): the last exchange.
        let other = session(fixture, "alice").await;
        let (_, mine) = exchange(store.as_ref(), other, 1, "mine?", "yes", false).await;
        let (last, _) = regenerate(store.as_ref(), other, Some(Uuid::new_v4())).await;
        assert!(store.messages(other).await.unwrap().is_empty());
        assert_eq!(
            store.messages_with_superseded(other).await.unwrap(),
            superseded_by(&mine, last.id)
        );
    }
}

/// A regeneration refused (the session busy) marks nothing; one whose run failed before its
/// question was saved leaves the exchange before it alone when regenerated again.
pub async fn a_regeneration_refused_at_its_beginning_supersedes_nothing(fixture: &Fixture) {
    for store in both_ways(fixture).await {
        let store: Arc<dyn Store> = store;
        let session_id = session(fixture, "alice").await;
        let (_, first) = exchange(store.as_ref(), session_id, 1, "first?", "one", false).await;
        let (_, second) = exchange(store.as_ref(), session_id, 2, "second?", "two", false).await;
        let holder = new_run(session_id, true);
        let begun = store
            .begin_run(&start(holder.clone(), MissingSession::Refuse, None))
            .await
            .unwrap();
        assert!(matches!(begun, RunBegin::Begun { .. }));
        let refused = agentloop_core::RunStart {
            supersede: Some(Supersede::default()),
            ..start(new_run(session_id, true), MissingSession::Refuse, Some(10))
        };
        assert_eq!(
            store.begin_run(&refused).await.unwrap(),
            RunBegin::SessionBusy { run_id: holder.id }
        );
        let current = [first.clone(), second.clone()].concat();
        assert_eq!(store.messages(session_id).await.unwrap(), current);
        end(store.as_ref(), holder.id, session_id, &[]).await;

        // `holder` saved no message: regenerating now replaces nothing, not `second`.
        let (again, _) = regenerate(store.as_ref(), session_id, None).await;
        assert_eq!(store.messages(session_id).await.unwrap(), current);
        end(store.as_ref(), again.id, session_id, &[]).await;
        // A regenerating run that failed before saving its question: the next one does not
        // reach past it either.
        let (regen, _) = regenerate(store.as_ref(), session_id, Some(again.id)).await;
        assert_eq!(store.messages(session_id).await.unwrap(), current);
        end(store.as_ref(), regen.id, session_id, &[]).await;
    }
}
