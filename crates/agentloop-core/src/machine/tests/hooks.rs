//! What hooks report around a call: side effects, skipped calls, rewritten arguments.

use super::*;

#[test]
fn side_effects_become_events_notes_after_the_results_and_a_refresh() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("a", "1"), search("b", "2")])));
    let mut first = done(&batch[0].call_id, "A");
    first.side_effects = vec![SideEffectNote {
        note: Some("quote totals recomputed".into()),
        failed: false,
        refresh: true,
    }];
    let mut second = done(&batch[1].call_id, "B");
    second.side_effects = vec![SideEffectNote {
        note: Some("webhook answered 500".into()),
        failed: true,
        refresh: false,
    }];
    assert!(m.on_tool_result(first).is_none());
    let request = model(m.on_tool_result(second).unwrap());
    let tail: Vec<(Role, &str)> = request.messages[3..]
        .iter()
        .map(|m| (m.role, m.text_content()))
        .collect();
    assert_eq!(
        tail,
        [
            (Role::Tool, "A"),
            (Role::Tool, "B"),
            (Role::System, "[Side Effect] quote totals recomputed"),
            (Role::System, "[Side Effect Error] webhook answered 500"),
        ]
    );
    let notes: Vec<String> = m
        .take_events()
        .into_iter()
        .filter_map(|e| match e {
            EventKind::SideEffect { call_id, note, .. } => Some(format!("{call_id}: {note}")),
            _ => None,
        })
        .collect();
    assert_eq!(
        notes,
        [
            "a: quote totals recomputed",
            "b: [Side Effect Error] webhook answered 500"
        ]
    );
    let outcome = finished(m.on_model_reply(text("done")));
    assert!(outcome.should_refresh);
    assert!(matches!(
        m.take_events().last(),
        Some(EventKind::Done {
            should_refresh: true,
            ..
        })
    ));
}

#[test]
fn a_call_a_hook_skipped_did_not_run_and_its_rewritten_arguments_are_recorded() {
    let mut m = machine();
    m.start();
    let batch = tools(m.on_model_reply(calls_owned(&[search("a", "1"), search("b", "2")])));
    let mut rewritten = done(&batch[0].call_id, "A");
    rewritten.arguments = Some(json!({"q": "1", "limit": 5}));
    assert!(m.on_tool_result(rewritten).is_none());
    let skipped = ToolResult::new(
        &batch[1].call_id,
        call_started_at(),
        0,
        ToolOutcome::Skipped("not on weekends".into()),
    );
    let request = model(m.on_tool_result(skipped).unwrap());
    let payload: Value =
        serde_json::from_str(request.messages.last().unwrap().text_content()).unwrap();
    assert_eq!(payload["status"], "skipped");
    assert_eq!(payload["error"], "not on weekends");
    let outcome = finished(m.on_model_reply(text("ok")));
    assert_eq!(outcome.records[0].arguments, json!({"q": "1", "limit": 5}));
    assert_eq!(outcome.records[1].status, ToolStatus::Skipped);
    assert_eq!(outcome.tools_used, 1, "the skipped call did not run");
}

#[test]
fn a_record_has_the_start_time_the_driver_gave_its_call() {
    let mut m = machine();
    let _ = m.handle(Input::Start, started_at());
    let reply = Input::ModelReply {
        reply: calls_owned(&[search("a", "1")]),
        duration_ms: 5,
    };
    let batch = tools(m.handle(reply, started_at()).step().unwrap());
    let result = Input::ToolResult(done(&batch[0].call_id, "A"));
    let _ = model(m.handle(result, call_started_at()).step().unwrap());
    let records = m.take_changes().records;
    assert_eq!(records.len(), 1);
    assert_eq!(records[0].started_at, call_started_at());
}
