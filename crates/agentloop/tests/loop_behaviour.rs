//! The loop's rules end to end: the real LLM client over HTTP against a scripted
//! OpenAI-compatible server, the real MCP client against the test MCP server (a child process).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{EventKind, FinalizeReason, RunStatus, ToolStatus};
use agentloop_test_support::{
    mcp::read_test_mcp_log,
    scripted_llm::{Reply, ScriptedLlm},
};
use common::*;
use serde_json::json;

#[tokio::test]
async fn the_model_chains_tool_calls_and_answers() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})),
        Reply::tool_call("test__add", json!({"a": 2, "b": 3})),
        Reply::text("The echo said hello and 2 + 3 = 5."),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "Echo hello, then add 2 and 3").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The echo said hello and 2 + 3 = 5.")
    );
    assert_eq!(
        statuses(&outcome.records),
        [("test.echo", "success"), ("test.add", "success")]
    );
    assert_eq!(outcome.records[1].result.as_deref(), Some("5"));
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_messages(&requests[1])[0].1, "hello");
    assert_eq!(tool_messages(&requests[2])[1].1, "5");
    for request in &requests {
        assert_eq!(request["tool_choice"], "auto");
        assert_eq!(
            request["messages"][0], requests[0]["messages"][0],
            "the system prompt is the same on every call"
        );
    }
    // The answer is streamed live as assistant_delta, then delivered as final_response.
    let without_deltas: Vec<&str> = types(&events)
        .into_iter()
        .filter(|kind| *kind != "assistant_delta")
        .collect();
    assert_eq!(
        without_deltas,
        [
            "run_started",
            "thinking",
            "llm_call",
            "tool_selected",
            "tool_executed",
            "thinking",
            "llm_call",
            "tool_selected",
            "tool_executed",
            "thinking",
            "llm_call",
            "final_response",
            "done"
        ]
    );
    let streamed: String = find(&events, "assistant_delta")
        .into_iter()
        .map(|kind| match kind {
            EventKind::AssistantDelta { text } => text.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(streamed, "The echo said hello and 2 + 3 = 5.");
    let seqs: Vec<u64> = events.iter().map(|event| event.seq).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
    runtime.shutdown().await;
}

#[tokio::test]
async fn calls_of_one_reply_run_concurrently_and_results_keep_the_model_order() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__sleep", json!({"ms": 400})),
            ("test__echo", json!({"text": "fast"})),
            ("test__sleep", json!({"ms": 300})),
        ]),
        Reply::text("done"),
    ])
    .await;
    let runtime = runtime(&llm, None, "[agent]\nparallel_tools = 4\n").await;
    let (events, outcome) = run(&runtime, "sleep twice").await;
    assert_eq!(outcome.status, RunStatus::Completed);

    // The two sleeps overlapped in time: each started before the other ended.
    let sleeps: Vec<_> = outcome
        .records
        .iter()
        .filter(|record| record.tool == "test.sleep")
        .collect();
    let end = |r: &agentloop::ToolExecutionRecord| r.started_at + chrono_ms(r.duration_ms);
    assert!(sleeps[0].started_at < end(sleeps[1]) && sleeps[1].started_at < end(sleeps[0]));

    // The fast echo finished first (live events), but the model reads results in its order.
    let executed: Vec<&str> = find(&events, "tool_executed")
        .into_iter()
        .map(|kind| match kind {
            EventKind::ToolExecuted { tool, .. } => tool.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(executed[0], "test.echo");
    let order: Vec<String> = tool_messages(&llm.requests()[1])
        .into_iter()
        .map(|(_, content)| content)
        .collect();
    assert_eq!(order, ["slept 400 ms", "fast", "slept 300 ms"]);
    runtime.shutdown().await;
}

#[tokio::test]
async fn parallel_tools_one_runs_the_calls_one_after_the_other() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_calls(vec![
            ("test__sleep", json!({"ms": 200})),
            ("test__sleep", json!({"ms": 201})),
        ]),
        Reply::text("done"),
    ])
    .await;
    let runtime = runtime(&llm, None, "[agent]\nparallel_tools = 1\n").await;
    let (_, outcome) = run(&runtime, "sleep twice").await;
    let (a, b) = (&outcome.records[0], &outcome.records[1]);
    let (first, second) = if a.started_at <= b.started_at {
        (a, b)
    } else {
        (b, a)
    };
    assert!(second.started_at >= first.started_at + chrono_ms(first.duration_ms));
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_iteration_cap_forces_a_summary_with_tool_choice_none() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "one"})),
        Reply::tool_call("test__echo", json!({"text": "two"})),
        Reply::text("I echoed one and two."),
    ])
    .await;
    let runtime = runtime(&llm, None, "[agent]\nmax_iterations = 2\n").await;
    let (events, outcome) = run(&runtime, "echo forever").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I echoed one and two."));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["tool_choice"], "none");
    assert!(
        find(&events, "forced_finalize").contains(&&EventKind::ForcedFinalize {
            reason: FinalizeReason::MaxIterations
        })
    );
    // The forced answer streams as final_response chunks that add up to the answer.
    let answer: String = find(&events, "final_response")
        .into_iter()
        .map(|kind| match kind {
            EventKind::FinalResponse { delta } => delta.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(answer, "I echoed one and two.");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_degenerate_reply_forces_a_summary_and_an_empty_one_falls_back_to_the_records() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 20, "b": 22})),
        Reply::empty(),
        Reply::empty(),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "add").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DegenerateResponse)
    );
    assert_eq!(llm.requests()[2]["tool_choice"], "none");
    let answer = outcome.answer.unwrap();
    assert!(answer.contains("test.add (success"), "{answer}");
    assert!(answer.contains("42"), "{answer}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_repeated_call_runs_once_and_a_second_repeat_forces_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "once"})),
        Reply::tool_call("test__record", json!({"note": "once"})),
        Reply::tool_call("test__record", json!({"note": "once"})),
        Reply::text("Recorded it."),
    ])
    .await;
    let runtime = runtime(&llm, Some(&log), "").await;
    let (events, outcome) = run(&runtime, "record once").await;

    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::DuplicateCalls)
    );
    assert_eq!(
        statuses(&outcome.records),
        [
            ("test.record", "success"),
            ("test.record", "skipped"),
            ("test.record", "skipped")
        ]
    );
    assert_eq!(find(&events, "duplicate_detected").len(), 2);
    let executed = read_test_mcp_log(&log);
    assert_eq!(
        executed.len(),
        1,
        "the server ran the tool once: {executed:?}"
    );
    let requests = llm.requests();
    assert_eq!(requests[3]["tool_choice"], "none");
    let note = &tool_messages(&requests[2])[1].1;
    assert!(
        note.contains("Not executed again") && note.contains("recorded"),
        "{note}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn consecutive_failures_stop_the_tool_calls() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__fail", json!({"message": "database offline"})),
        Reply::tool_call("test__fail", json!({"message": "still offline"})),
        Reply::text("The database is offline; nothing could be read."),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "read the data").await;
    assert_eq!(
        outcome.finalize_reason,
        Some(FinalizeReason::ConsecutiveFailures)
    );
    assert_eq!(
        outcome.records[0].error.as_deref(),
        Some("database offline")
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(requests[2]["tool_choice"], "none");
    let error: serde_json::Value = serde_json::from_str(&tool_messages(&requests[1])[0].1).unwrap();
    assert_eq!(error["error"], "database offline");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_tool_that_keeps_failing_is_no_longer_offered() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__fail", json!({"message": "a"})),
        Reply::tool_call("test__fail", json!({"message": "b"})),
        Reply::text("fail is gone"),
    ])
    .await;
    let extra = "[agent]\ntool_failure_limit = 2\nmax_consecutive_failures = 5\n";
    let runtime = runtime(&llm, None, extra).await;
    let (_, outcome) = run(&runtime, "fail twice").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let requests = llm.requests();
    assert!(offered(&requests[1]).contains(&"test__fail".to_string()));
    assert!(!offered(&requests[2]).contains(&"test__fail".to_string()));
    assert!(offered(&requests[2]).contains(&"test__echo".to_string()));
    runtime.shutdown().await;
}

#[tokio::test]
async fn an_unknown_tool_is_answered_with_the_list_of_tools() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__delete_everything", json!({})),
        Reply::text("That tool does not exist."),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "delete").await;
    assert_eq!(outcome.records[0].status, ToolStatus::Error);
    let message = &tool_messages(&llm.requests()[1])[0].1;
    assert!(
        message.contains("unknown tool 'test__delete_everything'"),
        "{message}"
    );
    assert!(
        message.contains("test__echo") && message.contains("test__add"),
        "{message}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn arguments_that_are_not_json_are_sent_back_and_the_repaired_call_runs() {
    let llm = ScriptedLlm::start(vec![
        Reply::raw_tool_call("test__echo", "{\"text\": \"unterminated"),
        Reply::tool_call("test__echo", json!({"text": "repaired"})),
        Reply::text("ok"),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "echo").await;
    assert_eq!(
        statuses(&outcome.records),
        [("test.echo", "error"), ("test.echo", "success")]
    );
    let requests = llm.requests();
    let message = &tool_messages(&requests[1])[0].1;
    assert!(message.contains("not valid JSON"), "{message}");
    assert_eq!(tool_messages(&requests[2])[1].1, "repaired");
    runtime.shutdown().await;
}

#[tokio::test]
async fn arguments_that_break_the_schema_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": "two", "b": 3})),
        Reply::text("I could not add."),
    ])
    .await;
    let runtime = runtime(&llm, Some(&log), "").await;
    let (_, outcome) = run(&runtime, "add").await;
    assert_eq!(outcome.records[0].status, ToolStatus::Error);
    let message = &tool_messages(&llm.requests()[1])[0].1;
    assert!(
        message.contains("schema of test.add") && message.contains("/a"),
        "{message}"
    );
    assert!(
        read_test_mcp_log(&log).is_empty(),
        "the server never saw the call"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_slow_tool_times_out_and_the_run_goes_on() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", json!({"ms": 5000})),
        Reply::text("The tool was too slow."),
    ])
    .await;
    let runtime = runtime(&llm, None, "[tools.\"test.sleep\"]\ntimeout_s = 0.3\n").await;
    let (_, outcome) = run(&runtime, "sleep").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let error = outcome.records[0].error.clone().unwrap();
    assert!(error.contains("timed out after 0.3 s"), "{error}");
    assert!(outcome.records[0].duration_ms < 5000);
    runtime.shutdown().await;
}

#[tokio::test]
async fn long_results_are_cut_for_the_model_and_kept_whole_in_the_record() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__big", json!({"chars": 5000})),
        Reply::text("big"),
    ])
    .await;
    let runtime = runtime(&llm, None, "[agent]\ntool_output_max_chars = 1000\n").await;
    let (_, outcome) = run(&runtime, "big").await;
    assert_eq!(
        outcome.records[0].result.as_ref().unwrap().chars().count(),
        5000
    );
    let seen = &tool_messages(&llm.requests()[1])[0].1;
    assert!(seen.contains("showing 1000 of 5000 characters"), "{seen}");
    assert!(seen.chars().count() < 1200);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_rate_limit_is_retried_after_retry_after() {
    let llm = ScriptedLlm::start(vec![
        Reply::error(429, "Rate limit reached").with_header("retry-after", "1"),
        Reply::text("Hello after the wait."),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Hello after the wait."));
    assert_eq!(llm.requests().len(), 2);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_refused_key_fails_the_run_with_the_providers_message_and_no_retry() {
    let llm =
        ScriptedLlm::start(vec![Reply::error(401, "Incorrect API key provided: sk-xx")]).await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, "llm_unauthorized");
    assert!(
        failure.message.contains("Incorrect API key provided"),
        "{}",
        failure.message
    );
    assert!(
        failure.message.contains("OPENAI_API_KEY"),
        "{}",
        failure.message
    );
    assert_eq!(llm.requests().len(), 1, "a 401 is not retried");
    assert_eq!(
        types(&events)[types(&events).len() - 2..],
        ["error", "done"]
    );
    assert_eq!(
        outcome.messages[0].message.text_content(),
        "hi",
        "the user message is kept"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_stream_that_ends_without_finish_reason_fails_the_run() {
    let llm = ScriptedLlm::start(vec![Reply::text("This answer is cut sho").truncated()]).await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.failure.unwrap().code, "llm_truncated_stream");
    assert!(outcome.answer.is_none(), "no silent partial answer");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_dead_mcp_server_fails_its_calls_while_the_run_goes_on() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__crash", json!({})),
        Reply::tool_call("test__echo", json!({"text": "anyone?"})),
        Reply::text("The tool server is down."),
    ])
    .await;
    let extra = "[agent]\nmax_consecutive_failures = 3\n";
    let runtime = runtime(&llm, None, extra).await;
    let (_, outcome) =
        tokio::time::timeout(std::time::Duration::from_secs(20), run(&runtime, "crash"))
            .await
            .expect("a dead server must not hang the run");
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("The tool server is down."));
    let echo = &outcome.records[1];
    assert_eq!(echo.status, ToolStatus::Error);
    let error = echo.error.clone().unwrap();
    assert!(
        error.contains("'test'") && error.contains("not running"),
        "{error}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_non_streaming_mode_gives_the_same_run() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "plain"})),
        Reply::text("plain answer"),
    ])
    .await;
    let mut config = config(&llm, None, "");
    config.llm.stream = false;
    let runtime = agentloop::Runtime::start(&config).await.unwrap();
    let (_, outcome) = run(&runtime, "echo").await;
    assert_eq!(outcome.answer.as_deref(), Some("plain answer"));
    assert!(
        llm.requests()
            .iter()
            .all(|request| request["stream"] != true)
    );
    runtime.shutdown().await;
}

fn chrono_ms(ms: u64) -> chrono::TimeDelta {
    chrono::TimeDelta::milliseconds(ms as i64)
}
