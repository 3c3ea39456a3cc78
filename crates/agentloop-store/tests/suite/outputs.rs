//! Tool outputs are stored once: a large text in both the tool message and the execution record
//! is written once (`tool_outputs`), a structured result that is the JSON of the result is not
//! written again, and everything reads back exactly as it was written.

use agentloop_core::protocol::{
    ChatMessage, MessageKind, SessionMessage, ToolExecutionRecord, ToolStatus,
};
use agentloop_core::{StepRecord, Store, StoreError};
use serde_json::{Value, json};
use uuid::Uuid;

use super::Fixture;
use super::data::*;

/// About 5 MB of JSON that does not compress much (PostgreSQL compresses large values): rows of
/// random ids.
fn big_json() -> Value {
    let rows: Vec<Value> = (0..84_000)
        .map(|i| json!({"id": i, "token": Uuid::new_v4().to_string()}))
        .collect();
    json!({ "rows": rows })
}

/// Bytes the database uses: pages in use (SQLite, its WAL included), or the tables with their
/// indexes and TOAST (PostgreSQL, dead rows included).
async fn database_bytes(fixture: &Fixture) -> i64 {
    match fixture.backend {
        "postgres" => {
            fixture
                .count(
                    "SELECT CAST(COALESCE(SUM(pg_total_relation_size(c.oid)), 0) AS BIGINT) \
                     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
                     WHERE n.nspname = current_schema() AND c.relkind = 'r'",
                )
                .await
        }
        _ => {
            fixture
                .count(
                    "SELECT (p.page_count - f.freelist_count) * s.page_size \
                     FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s",
                )
                .await
        }
    }
}

fn tool_message(session_id: Uuid, run_id: Uuid, call_id: &str, text: &str) -> SessionMessage {
    message(
        session_id,
        run_id,
        MessageKind::ToolResult,
        ChatMessage::tool_result(call_id, text),
    )
}

fn success(call_id: &str, result: &str, structured: Option<Value>) -> ToolExecutionRecord {
    ToolExecutionRecord {
        result: Some(result.into()),
        structured_result: structured,
        ..record(call_id, 1)
    }
}

/// A run as the loop saves it when a call of a parallel batch ends before the others: the
/// record first, the tool message with the batch, then the trace (without results) and the
/// answer. A ~5 MB structured result grows the database by about its size, once.
pub async fn a_large_tool_output_is_stored_once(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let value = big_json();
    let text = value.to_string();
    let size = i64::try_from(text.len()).unwrap();
    let opening = StepRecord {
        messages: vec![
            question(session_id, run_id, "all rows?"),
            tool_call(session_id, run_id, "call_1"),
        ],
        ..step(run_id, session_id)
    };
    store.save_step(&opening).await.unwrap();
    let before = database_bytes(fixture).await;

    let record = success("call_1", &text, Some(value.clone()));
    let ended = StepRecord {
        records: vec![record.clone()],
        ..step(run_id, session_id)
    };
    store.save_step(&ended).await.unwrap();
    let result_message = tool_message(session_id, run_id, "call_1", &text);
    let batch = StepRecord {
        messages: vec![result_message.clone()],
        ..step(run_id, session_id)
    };
    store.save_step(&batch).await.unwrap();
    let trace = SessionMessage {
        metadata: json!({"execution_trace": [{
            "call_id": "call_1", "tool": "erp.search_invoices", "status": "success",
            "result_bytes": text.len(),
        }]}),
        ..trace(session_id, run_id)
    };
    let last = StepRecord {
        messages: vec![trace, answer(session_id, run_id, "84,000 rows.")],
        end: Some(completed(None)),
        ..step(run_id, session_id)
    };
    store.save_step(&last).await.unwrap();
    let growth = database_bytes(fixture).await - before;
    eprintln!(
        "{}: a {size}-byte tool output grew the database by {growth} bytes ({:.2}×)",
        fixture.backend,
        growth as f64 / size as f64
    );
    assert!(growth < size * 3 / 2, "{growth} bytes for {size}");

    // One copy, named by the message and the record; the structured result is not written.
    assert_eq!(fixture.count("SELECT COUNT(*) FROM tool_outputs").await, 1);
    let cells = fixture
        .cells(&format!(
            "SELECT result, CASE WHEN result_hash IS NULL THEN 'inline' ELSE 'shared' END, \
                 structured_result, structured_is_result \
             FROM tool_executions WHERE run_id = '{run_id}'"
        ))
        .await;
    assert_eq!(cells, ["NULL", "shared", "NULL", "1"]);
    let cells = fixture
        .cells(&format!(
            "SELECT content, CASE WHEN content_hash IS NULL THEN 'inline' ELSE 'shared' END \
             FROM messages WHERE id = '{}'",
            result_message.id
        ))
        .await;
    assert_eq!(cells, ["NULL", "shared"]);

    // What was written is what is read.
    assert_eq!(
        store.tool_executions(run_id).await.unwrap(),
        vec![record.clone()]
    );
    assert_eq!(
        store.tool_execution(run_id, "call_1").await.unwrap(),
        Some(record)
    );
    assert_eq!(store.tool_execution(run_id, "call_2").await.unwrap(), None);
    let messages = store.messages(session_id).await.unwrap();
    assert_eq!(messages[2], result_message);
    let history = store.history(session_id, 10).await.unwrap();
    let kinds: Vec<MessageKind> = history.iter().map(|m| m.kind).collect();
    assert_eq!(
        kinds,
        [
            MessageKind::Dialogue,
            MessageKind::ToolCall,
            MessageKind::ToolResult,
            MessageKind::Dialogue
        ]
    );
    assert_eq!(history[2], result_message);

    // The output goes with its session.
    assert!(store.delete_session(session_id).await.unwrap());
    assert_eq!(fixture.count("SELECT COUNT(*) FROM tool_outputs").await, 0);
}

/// Every way a result and its structured form can relate reads back exactly: small and large,
/// structured or not, the JSON of the result or not, message and record equal or not, texts
/// holding U+0000 and the store's escape, written in one step or several, rewritten.
pub async fn tool_outputs_read_back_exactly_as_written(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let large = |seed: &str| format!("{seed}\u{0}\u{FDD0}0 {}", "ü".repeat(2000));
    let pretty = serde_json::to_string_pretty(&json!({"b": [1, 2.5, null], "a": "x"})).unwrap();
    let big_pretty = serde_json::to_string_pretty(&json!({"rows": vec![large("row"); 3]})).unwrap();
    let records = vec![
        // Small, structured = the JSON of the result (written differently).
        success(
            "small_json",
            &pretty,
            Some(serde_json::from_str(&pretty).unwrap()),
        ),
        // Small, structured unrelated to the text.
        success("small_other", "3 invoices", Some(json!({"count": 3}))),
        // The same value written as 1.0 and as 1: not the JSON of the result.
        success("float", "1.0", Some(json!(1))),
        // JSON text without a structured form.
        success("no_structured", "{\"a\":1}", None),
        // Large, structured = its JSON.
        success(
            "large_json",
            &big_pretty,
            Some(serde_json::from_str(&big_pretty).unwrap()),
        ),
        // Large, with a large structured form that differs.
        success(
            "large_other",
            &large("text"),
            Some(json!({"text": large("x")})),
        ),
        // Large, its message says something else (a tool error reads differently).
        ToolExecutionRecord {
            status: ToolStatus::Error,
            result: None,
            structured_result: None,
            error: Some(large("error")),
            ..record("failed", 1)
        },
        // The same large output as another call of the run.
        success("again", &large("text"), None),
    ];
    let mut messages = vec![question(session_id, run_id, "everything?")];
    for record in &records {
        let content = match &record.result {
            Some(result) => result.clone(),
            None => format!("Error: {}", record.error.clone().unwrap_or_default()),
        };
        messages.push(tool_message(session_id, run_id, &record.call_id, &content));
    }
    // Records in two steps, the messages with the second.
    let (first, second) = records.split_at(3);
    store
        .save_step(&StepRecord {
            records: first.to_vec(),
            ..step(run_id, session_id)
        })
        .await
        .unwrap();
    store
        .save_step(&StepRecord {
            records: second.to_vec(),
            messages: messages.clone(),
            ..step(run_id, session_id)
        })
        .await
        .unwrap();
    assert_eq!(store.tool_executions(run_id).await.unwrap(), records);
    assert_eq!(store.messages(session_id).await.unwrap(), messages);
    assert_eq!(store.history(session_id, 1).await.unwrap(), messages);
    for record in &records {
        let read = store.tool_execution(run_id, &record.call_id).await.unwrap();
        assert_eq!(read.as_ref(), Some(record));
    }
    // large_json, large_other (once for "again" too), the message of the failure.
    assert_eq!(fixture.count("SELECT COUNT(*) FROM tool_outputs").await, 3);

    // A record written again with another output: the record changes, its message does not.
    let rewritten = success("large_json", &large("rewritten"), None);
    store
        .save_step(&StepRecord {
            records: vec![rewritten.clone()],
            ..step(run_id, session_id)
        })
        .await
        .unwrap();
    let read = store.tool_execution(run_id, "large_json").await.unwrap();
    assert_eq!(read, Some(rewritten));
    assert_eq!(store.messages(session_id).await.unwrap(), messages);
}

/// A run that does not save its chat keeps its records whole, each large output once.
pub async fn a_run_without_chat_keeps_its_large_outputs(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = Uuid::new_v4();
    let run = new_run(session_id, false);
    store.start_run(&run).await.unwrap();
    let text = "x".repeat(100_000);
    let record = success("call_1", &text, Some(json!(text)));
    store
        .save_step(&StepRecord {
            records: vec![record.clone()],
            end: Some(completed(None)),
            ..step(run.id, session_id)
        })
        .await
        .unwrap();
    assert_eq!(store.tool_executions(run.id).await.unwrap(), vec![record]);
    assert_eq!(fixture.count("SELECT COUNT(*) FROM tool_outputs").await, 1);
    assert_eq!(fixture.count("SELECT COUNT(*) FROM messages").await, 0);
}

/// A row naming an output the database does not hold is a corrupt row, not a missing text.
pub async fn a_missing_tool_output_is_a_corrupt_error(fixture: &Fixture) {
    let store = &fixture.store;
    let session_id = session(fixture, "alice").await;
    let run_id = run(fixture, session_id).await;
    let text = "y".repeat(5000);
    store
        .save_step(&StepRecord {
            records: vec![success("call_1", &text, None)],
            messages: vec![tool_message(session_id, run_id, "call_1", &text)],
            ..step(run_id, session_id)
        })
        .await
        .unwrap();
    fixture.execute("DELETE FROM tool_outputs").await;
    match store.messages(session_id).await.unwrap_err() {
        StoreError::Corrupt { message, .. } => assert!(message.contains("messages.content_hash")),
        other => panic!("expected Corrupt, got {other:?}"),
    }
    match store.tool_executions(run_id).await.unwrap_err() {
        StoreError::Corrupt { message, .. } => {
            assert!(message.contains("tool_executions.result_hash"))
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
}
