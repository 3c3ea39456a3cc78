//! Sessions and memory through the whole loop, each test once on a SQLite file and once on
//! PostgreSQL (a schema of its own): history reaches the model, the context window holds, no
//! orphaned tool result is ever sent, nothing the user typed is lost, runs never interleave.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop::{
    Event, MessageKind, Role, RunRequest, RunStatus, Runtime, Store, core::EstimatedTokens,
    core::message_tokens,
};
use agentloop_test_support::{
    postgres::TestSchema,
    scripted_llm::{Reply, ScriptedLlm},
    wait::until,
};
use common::config_with_store;
use serde_json::{Value, json};
use uuid::Uuid;

/// A database for one test.
enum Database {
    Sqlite(tempfile::TempDir),
    Postgres(TestSchema),
}

impl Database {
    async fn sqlite() -> Database {
        Database::Sqlite(tempfile::tempdir().unwrap())
    }

    async fn postgres() -> Database {
        Database::Postgres(TestSchema::create().await)
    }

    fn url(&self) -> String {
        match self {
            Database::Sqlite(dir) => format!("sqlite://{}/agentloop.db", dir.path().display()),
            Database::Postgres(schema) => schema.url().to_string(),
        }
    }

    async fn finish(self) {
        if let Database::Postgres(schema) = self {
            schema.drop_schema().await;
        }
    }
}

/// One `#[tokio::test]` per backend for each scenario.
macro_rules! on_both_backends {
    ($($scenario:ident),* $(,)?) => {$(
        mod $scenario {
            #[tokio::test]
            async fn sqlite() {
                let database = super::Database::sqlite().await;
                super::$scenario(&database.url()).await;
                database.finish().await;
            }

            #[tokio::test]
            async fn postgres() {
                if !agentloop_test_support::requires::postgres().await {
                    return;
                }
                let database = super::Database::postgres().await;
                super::$scenario(&database.url()).await;
                database.finish().await;
            }
        }
    )*};
}

on_both_backends!(
    a_follow_up_sees_the_earlier_question_and_answer,
    the_window_holds_and_never_sends_an_orphaned_tool_result,
    a_failed_run_keeps_the_question_and_says_why,
    two_runs_of_one_session_never_interleave,
    save_chat_and_include_history_can_be_turned_off,
);

async fn runtime(llm: &ScriptedLlm, store_url: &str, extra: &str) -> Runtime {
    let config = config_with_store(llm, None, store_url, extra);
    Runtime::start(&config).await.expect("runtime starts")
}

async fn run(runtime: &Runtime, request: RunRequest) -> (Vec<Event>, agentloop::RunOutcome) {
    runtime.agent().run(request).collect().await.unwrap()
}

/// (role, text) of the messages of a recorded request, tool calls shown by tool name.
fn conversation(request: &Value) -> Vec<(String, String)> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| {
            let role = message["role"].as_str().unwrap().to_string();
            let text = match message["tool_calls"].as_array() {
                Some(calls) => format!("calls {}", calls[0]["function"]["name"].as_str().unwrap()),
                None => message["content"].as_str().unwrap_or_default().to_string(),
            };
            (role, text)
        })
        .collect()
}

/// The messages of a recorded request, read back from the wire format.
fn wire_messages(request: &Value) -> Vec<agentloop::ChatMessage> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| agentloop::ChatMessage {
            role: serde_json::from_value(message["role"].clone()).unwrap(),
            content: message["content"].as_str().map(str::to_string),
            tool_calls: message["tool_calls"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|call| agentloop::ToolCall {
                    id: call["id"].as_str().unwrap().to_string(),
                    name: call["function"]["name"].as_str().unwrap().to_string(),
                    arguments: call["function"]["arguments"].as_str().unwrap().to_string(),
                })
                .collect(),
            tool_call_id: message["tool_call_id"].as_str().map(str::to_string),
            attachments: Vec::new(),
        })
        .collect()
}

/// Panics when a request holds a tool result without its call, or a call without its results.
fn assert_no_orphans(request: &Value) {
    let mut pending: Vec<String> = Vec::new();
    for message in request["messages"].as_array().unwrap() {
        if message["role"] == "tool" {
            let id = message["tool_call_id"].as_str().unwrap().to_string();
            assert!(
                pending.contains(&id),
                "orphaned tool result {id} in {request}"
            );
            pending.retain(|pending| pending != &id);
        } else {
            assert!(
                pending.is_empty(),
                "calls {pending:?} without results in {request}"
            );
            if let Some(calls) = message["tool_calls"].as_array() {
                pending = calls
                    .iter()
                    .map(|c| c["id"].as_str().unwrap().to_string())
                    .collect();
            }
        }
    }
    assert!(
        pending.is_empty(),
        "calls {pending:?} without results at the end"
    );
}

async fn a_follow_up_sees_the_earlier_question_and_answer(store_url: &str) {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call(
            "test__echo",
            json!({"text": "accounts: My Website (123456)"}),
        ),
        Reply::text("You have 1 account: My Website (123456)."),
        Reply::text("My Website has 2 properties."),
    ])
    .await;
    let runtime = runtime(&llm, store_url, "").await;
    let session = Uuid::now_v7();
    let (first_events, first) = run(
        &runtime,
        RunRequest::new("Show me my accounts").session(session),
    )
    .await;
    let (_, second) = run(
        &runtime,
        RunRequest::new("What properties does it have?").session(session),
    )
    .await;
    assert_eq!(second.status, RunStatus::Completed);

    // The follow-up reached the model after the earlier question, tool call and answer.
    let follow_up = &llm.requests()[2];
    let seen: Vec<(String, String)> = conversation(follow_up).into_iter().skip(1).collect();
    let expected = [
        ("user", "Show me my accounts"),
        ("assistant", "calls test__echo"),
        ("tool", "accounts: My Website (123456)"),
        ("assistant", "You have 1 account: My Website (123456)."),
        ("user", "What properties does it have?"),
    ];
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(r, t)| (r.to_string(), t.to_string()))
        .collect();
    assert_eq!(seen, expected);

    // The store holds the first run in order: question, call, result, trace, answer.
    let store = runtime.store();
    let messages = store.messages(session).await.unwrap();
    let kinds: Vec<(MessageKind, Role)> =
        messages.iter().map(|m| (m.kind, m.message.role)).collect();
    assert_eq!(
        kinds,
        [
            (MessageKind::Dialogue, Role::User),
            (MessageKind::ToolCall, Role::Assistant),
            (MessageKind::ToolResult, Role::Tool),
            (MessageKind::Trace, Role::System),
            (MessageKind::Dialogue, Role::Assistant),
            (MessageKind::Dialogue, Role::User),
            (MessageKind::Dialogue, Role::Assistant),
        ]
    );
    assert_eq!(
        messages[3].metadata["execution_trace"][0]["tool"],
        "test.echo"
    );
    assert_eq!(Some(messages[4].id), first.message_id);

    // The run rows hold their counters; the event log is what the client received.
    let row = store.run(first.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Completed);
    assert_eq!((row.iterations, row.tools_used), (2, 1));
    assert_eq!(row.usage, first.usage);
    assert!(row.usage.prompt_tokens > 0);
    assert_eq!(store.events(first.run_id, 0).await.unwrap(), first_events);
    let records = store.tool_executions(first.run_id).await.unwrap();
    assert_eq!(records, first.records);
    let listed = store.list_sessions(Some("local"), 10).await.unwrap();
    assert!(
        listed
            .iter()
            .any(|s| s.id == session && s.title == "Show me my accounts")
    );
    runtime.shutdown().await;
}

async fn the_window_holds_and_never_sends_an_orphaned_tool_result(store_url: &str) {
    const BUDGET: usize = 700;
    let llm = ScriptedLlm::start_with(|request| {
        let last_is_user = request["messages"]
            .as_array()
            .and_then(|m| m.last())
            .is_some_and(|m| m["role"] == "user");
        if last_is_user {
            Reply::tool_call("test__big", json!({"chars": 1500}))
        } else {
            Reply::text(format!("Here is a long answer. {}", "blah ".repeat(120)))
        }
    })
    .await;
    let extra = format!("[agent]\ncontext_tokens = {BUDGET}\nhistory_messages = 100\n");
    let runtime = runtime(&llm, store_url, &extra).await;
    let session = Uuid::now_v7();
    for i in 0..8 {
        let (_, outcome) = run(
            &runtime,
            RunRequest::new(format!("Question number {i}")).session(session),
        )
        .await;
        assert_eq!(
            outcome.status,
            RunStatus::Completed,
            "{:?}",
            outcome.failure
        );
    }
    let requests = llm.requests();
    assert_eq!(requests.len(), 16);
    for (i, request) in requests.iter().enumerate() {
        assert_no_orphans(request);
        let messages = wire_messages(request);
        let sent: usize = messages
            .iter()
            .map(|m| message_tokens(&EstimatedTokens, m))
            .sum();
        assert!(sent <= BUDGET, "request {i} sent {sent} tokens");
        let question = format!("Question number {}", i / 2);
        let user_texts: Vec<&str> = messages
            .iter()
            .filter(|m| m.role == Role::User)
            .map(|m| m.text_content())
            .collect();
        assert_eq!(user_texts.last(), Some(&question.as_str()), "request {i}");
    }
    // The history was really cut: the last request does not carry all 7 earlier questions.
    let last = wire_messages(&requests[15]);
    assert!(last.iter().filter(|m| m.role == Role::User).count() < 8);
    // While the store keeps everything whole.
    let stored = runtime.store().messages(session).await.unwrap();
    assert_eq!(
        stored
            .iter()
            .filter(|m| m.kind == MessageKind::ToolResult)
            .count(),
        8
    );
    assert!(
        stored
            .iter()
            .filter(|m| m.kind == MessageKind::ToolResult)
            .all(|m| m.message.text_content().len() == 1500)
    );
    runtime.shutdown().await;
}

async fn a_failed_run_keeps_the_question_and_says_why(store_url: &str) {
    let llm = ScriptedLlm::start(vec![Reply::error(401, "Incorrect API key provided")]).await;
    let runtime = runtime(&llm, store_url, "").await;
    let session = Uuid::now_v7();
    let (_, outcome) = run(
        &runtime,
        RunRequest::new("Please keep this question").session(session),
    )
    .await;
    assert_eq!(outcome.status, RunStatus::Failed);

    let store = runtime.store();
    let messages = store.messages(session).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(
        messages[0].message.text_content(),
        "Please keep this question"
    );
    let row = store.run(outcome.run_id).await.unwrap().unwrap();
    assert_eq!(row.status, RunStatus::Failed);
    assert_eq!(row.error_code, Some(agentloop::ErrorCode::LlmUnauthorized));
    assert!(
        row.error_message
            .unwrap()
            .contains("Incorrect API key provided")
    );
    assert!(row.finished_at.is_some());
    // The session is free again.
    assert_eq!(
        store.session(session).await.unwrap().unwrap().active_run_id,
        None
    );
    runtime.shutdown().await;
}

async fn two_runs_of_one_session_never_interleave(store_url: &str) {
    let llm = ScriptedLlm::start(vec![
        Reply::text("first").with_delay(Duration::from_millis(800)),
        Reply::text("third"),
    ])
    .await;
    let runtime = runtime(&llm, store_url, "").await;
    let session = Uuid::now_v7();
    let first = runtime.agent().run(RunRequest::new("one").session(session));
    // Wait until the first run holds the session and asks the model.
    until(
        "the first run asks the model",
        Duration::from_secs(10),
        || !llm.requests().is_empty(),
    )
    .await;
    let (events, second) = run(&runtime, RunRequest::new("two").session(session)).await;
    assert_eq!(second.status, RunStatus::Failed);
    let failure = second.failure.unwrap();
    assert_eq!(failure.code, "session_busy");
    assert!(
        failure.message.contains(&first.run_id().to_string()),
        "{}",
        failure.message
    );
    assert!(events.iter().any(|e| e.kind.type_name() == "error"));
    assert_eq!(
        llm.requests().len(),
        1,
        "the second run never reached the model"
    );

    let first = first.outcome().await.unwrap();
    assert_eq!(first.answer.as_deref(), Some("first"));
    let (_, third) = run(&runtime, RunRequest::new("three").session(session)).await;
    assert_eq!(
        third.answer.as_deref(),
        Some("third"),
        "the session is free after the first run"
    );
    let questions: Vec<String> = runtime
        .store()
        .messages(session)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.role == Role::User)
        .map(|m| m.message.text_content().to_string())
        .collect();
    assert_eq!(questions, ["one", "three"]);
    runtime.shutdown().await;
}

async fn save_chat_and_include_history_can_be_turned_off(store_url: &str) {
    let llm = ScriptedLlm::start(vec![
        Reply::text("a1"),
        Reply::text("a2"),
        Reply::text("a3"),
    ])
    .await;
    let runtime = runtime(&llm, store_url, "").await;
    let session = Uuid::now_v7();
    run(&runtime, RunRequest::new("q1").session(session)).await;

    let mut blind = RunRequest::new("q2").session(session);
    blind.include_history = false;
    run(&runtime, blind).await;
    let texts: Vec<String> = conversation(&llm.requests()[1])
        .into_iter()
        .map(|(_, t)| t)
        .collect();
    assert_eq!(texts.len(), 2, "system prompt and question only: {texts:?}");
    assert_eq!(texts[1], "q2");

    let mut unsaved = RunRequest::new("q3").session(session);
    unsaved.save_chat = false;
    let (_, outcome) = run(&runtime, unsaved).await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let store = runtime.store();
    let questions: Vec<String> = store
        .messages(session)
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.role == Role::User)
        .map(|m| m.message.text_content().to_string())
        .collect();
    assert_eq!(questions, ["q1", "q2"], "q3 left no trace in the session");
    let row = store.run(outcome.run_id).await.unwrap().unwrap();
    assert!(!row.save_chat);
    assert_eq!(row.status, RunStatus::Completed);
    runtime.shutdown().await;
}
