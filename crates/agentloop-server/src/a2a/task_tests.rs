#![allow(clippy::unwrap_used)]

use agentloop_core::protocol::{PendingCall, Usage};

use super::*;

fn event(run_id: Uuid, seq: u64, kind: EventKind) -> Event {
    Event {
        run_id,
        seq,
        parent_run_id: None,
        kind,
    }
}

fn done(status: RunStatus, output: Option<Value>) -> EventKind {
    EventKind::Done {
        status,
        iterations: 1,
        tools_used: 0,
        message_id: None,
        usage: Usage::default(),
        should_refresh: false,
        output,
    }
}

fn fold(events: &[EventKind]) -> (TaskFold, Vec<Value>) {
    let run = Uuid::now_v7();
    let mut task = TaskFold::new(run, Uuid::now_v7(), Some("hi".into()));
    let mut out = Vec::new();
    for (seq, kind) in events.iter().enumerate() {
        out.extend(task.push(&event(run, seq as u64 + 1, kind.clone()), |_| {
            "failed".into()
        }));
    }
    (task, out)
}

#[test]
fn a_run_that_answers_is_working_then_streams_its_answer_then_completes() {
    let (task, out) = fold(&[
        EventKind::RunStarted {
            session_id: Uuid::nil(),
        },
        EventKind::FinalResponse {
            delta: "Hel".into(),
        },
        EventKind::FinalResponse { delta: "lo".into() },
        done(RunStatus::Completed, None),
    ]);
    assert_eq!(
        out[0]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(out[1]["artifactUpdate"]["append"], false);
    assert_eq!(out[2]["artifactUpdate"]["append"], true);
    assert_eq!(out[3]["artifactUpdate"]["lastChunk"], true);
    assert_eq!(
        out[3]["artifactUpdate"]["artifact"]["parts"][0]["text"],
        "Hello"
    );
    assert_eq!(
        out[4]["statusUpdate"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
    assert!(task.is_ended());
    let task = task.task();
    assert_eq!(task["status"]["state"], "TASK_STATE_COMPLETED");
    assert_eq!(task["artifacts"][0]["parts"][0]["text"], "Hello");
    assert_eq!(task["history"][0]["role"], "ROLE_USER");
}

#[test]
fn a_typed_answer_is_a_data_part_and_a_failure_says_why() {
    let (task, _) = fold(&[
        EventKind::FinalResponse {
            delta: "{\"a\":1}".into(),
        },
        done(RunStatus::Completed, Some(json!({"a": 1}))),
    ]);
    assert_eq!(
        task.task()["artifacts"][0]["parts"][0]["data"],
        json!({"a": 1})
    );
    let (task, _) = fold(&[
        EventKind::Error {
            code: agentloop_core::protocol::ErrorCode::InternalError,
            message: "inside".into(),
        },
        done(RunStatus::Failed, None),
    ]);
    let task = task.task();
    assert_eq!(task["status"]["state"], "TASK_STATE_FAILED");
    assert_eq!(task["status"]["message"]["parts"][0]["text"], "failed");
}

#[test]
fn an_approval_is_input_required_until_the_next_event_after_the_answer() {
    let call = PendingCall {
        call_id: "c1".into(),
        tool: "test.record".into(),
        arguments: json!({"note": "x"}),
        client: false,
    };
    let (mut task, out) = fold(&[
        EventKind::RunStarted {
            session_id: Uuid::nil(),
        },
        EventKind::InputRequired {
            kind: InputKind::Approval,
            question: None,
            calls: vec![call],
            elicitation: None,
        },
        done(RunStatus::AwaitingInput, None),
    ]);
    assert_eq!(task.state(), TaskState::InputRequired);
    assert!(task.is_ended());
    let update = &out[1]["statusUpdate"]["status"];
    assert_eq!(update["state"], "TASK_STATE_INPUT_REQUIRED");
    assert_eq!(
        update["message"]["parts"][1]["data"]["calls"][0]["call_id"],
        "c1"
    );
    let resumed = task.push(
        &event(Uuid::nil(), 4, EventKind::Thinking { iteration: 2 }),
        |_| String::new(),
    );
    assert_eq!(
        resumed[0]["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert!(!task.is_ended());
}

#[test]
fn each_state_change_is_one_notification_and_the_last_is_the_task() {
    let run = Uuid::now_v7();
    let events: Vec<Event> = [
        EventKind::RunStarted {
            session_id: Uuid::nil(),
        },
        EventKind::Thinking { iteration: 1 },
        EventKind::FinalResponse { delta: "ok".into() },
        done(RunStatus::Completed, None),
    ]
    .into_iter()
    .enumerate()
    .map(|(index, kind)| event(run, index as u64 + 1, kind))
    .collect();
    let (changes, finished) = state_changes(run, Uuid::nil(), None, &events, |_| String::new());
    assert!(finished);
    assert_eq!(changes.len(), 2, "{changes:?}");
    assert_eq!(changes[0].0, 1);
    assert_eq!(
        changes[0].1["statusUpdate"]["status"]["state"],
        "TASK_STATE_WORKING"
    );
    assert_eq!(changes[1].0, 4);
    assert_eq!(
        changes[1].1["task"]["status"]["state"],
        "TASK_STATE_COMPLETED"
    );
}

#[test]
fn a_tools_question_keeps_the_task_working_and_says_where_to_answer() {
    use agentloop_core::protocol::{Elicitation, ElicitationMode, ElicitationPurpose};
    let asked = Elicitation {
        id: "c1/1".into(),
        call_id: "c1".into(),
        tool: "shop.book".into(),
        server: "shop".into(),
        mode: ElicitationMode::Form,
        message: "Which date?".into(),
        requested_schema: Some(json!({"type": "object"})),
        url: None,
        purpose: ElicitationPurpose::Question,
    };
    let (task, out) = fold(&[
        EventKind::RunStarted {
            session_id: Uuid::nil(),
        },
        EventKind::InputRequired {
            kind: InputKind::Elicitation,
            question: None,
            calls: Vec::new(),
            elicitation: Some(Box::new(asked)),
        },
    ]);
    assert_eq!(task.state(), TaskState::Working);
    assert!(!task.is_ended());
    let last = out.last().unwrap().to_string();
    assert!(last.contains("Which date?"), "{last}");
    assert!(last.contains("\"kind\":\"elicitation\""), "{last}");
    assert!(last.contains("/input with `elicitation`"), "{last}");
}
