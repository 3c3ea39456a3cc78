//! A2A against a real server: `agentloop serve` (the built binary) with a scripted LLM and the
//! test MCP server, driven by the official A2A Python SDK (`a2a-sdk` 1.x,
//! `tests/a2a/client.py`): the card, SendMessage, SendStreamingMessage in the same context,
//! GetTask, another user's task, a bad key, a typed answer as a DataPart, an approval and a
//! question through `input-required`, CancelTask, and SubscribeToTask in the middle of a run
//! (its updates checked against the run's event log: none missing after the snapshot, none
//! twice).
//!
//! Needs Python with `a2a-sdk` (the virtual environment `.ci/run` makes); skipped, saying so,
//! without it (a failure with `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    path::Path,
    process::Command,
    sync::atomic::{AtomicUsize, Ordering},
    time::Duration,
};

use agentloop_test_support::{
    config::TestConfig,
    requires,
    scripted_llm::{Reply, ScriptedLlm},
    sse::read_sse,
    wait::eventually,
    webhook::RecordingWebhook,
};
use serde_json::Value;

const SERVER: &str = "[agent]\nask_user = true\n\n\
    [tools.\"test.record\"]\nneeds_approval = true\n\n\
    [server.a2a]\nname = \"agentloop-test\"\ndescription = \"Answers the tests\"\n\n\
    [[server.a2a.skills]]\nid = \"echo\"\nname = \"Echo\"\ndescription = \"Chains echoes\"\n";

/// The frontends' model, a typed answer on the call that asks for one, and a task whose first
/// answer never comes (the server is killed meanwhile): asked again after the restart, it
/// answers.
fn respond(request: &Value) -> Reply {
    static PUSHED: AtomicUsize = AtomicUsize::new(0);
    let seen = request["messages"].to_string();
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rposition(|message| message["role"] == "user");
    let asks_helper = last_user.is_some_and(|index| {
        messages[index]["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("ask the helper"))
    });
    let asks_slowly = last_user.is_some_and(|index| {
        messages[index]["content"]
            .as_str()
            .is_some_and(|text| text.starts_with("ask the slow helper"))
    });
    if asks_slowly {
        return Reply::tool_call(
            "a2a__helper",
            serde_json::json!({"question": "think for a minute"}),
        );
    }
    if seen.contains("think for a minute") {
        return Reply::text("too late").with_delay(Duration::from_secs(60));
    }
    if asks_helper {
        let result = messages[last_user.unwrap_or_default()..]
            .iter()
            .find(|message| message["role"] == "tool")
            .and_then(|message| message["content"].as_str());
        return match result {
            None => Reply::tool_call(
                "a2a__helper",
                serde_json::json!({"question": "chain two echoes"}),
            ),
            Some(result) => Reply::text(format!("The helper said: {result}")),
        };
    }
    if seen.contains("push me when done") {
        return match PUSHED.fetch_add(1, Ordering::SeqCst) {
            0 => Reply::text("never delivered").with_delay(Duration::from_secs(120)),
            _ => Reply::text("Pushed after the restart."),
        };
    }
    if seen.contains("file a ticket") {
        return match &request["response_format"] {
            format if format.is_null() => Reply::text("Checkout is down; that is urgent."),
            _ => Reply::text(r#"{"title": "Checkout is down", "priority": 1}"#),
        };
    }
    common::frontends::respond(request)
}

fn python(interpreter: &Path, address: &str, keys: &[(&str, String)]) -> String {
    python_phase(interpreter, "main", address, keys)
}

fn python_phase(interpreter: &Path, phase: &str, address: &str, keys: &[(&str, String)]) -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/a2a/client.py");
    let output = Command::new(interpreter)
        .arg(&script)
        .arg(phase)
        .env("AGENTLOOP_URL", address)
        .envs(keys.iter().map(|(name, value)| (name, value)))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the A2A SDK's checks failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    stdout
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a2a_sdk_works_against_agentloop_serve() {
    let Some(interpreter) = requires::a2a_python() else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let config = TestConfig::new(&llm.base_url()).mcp_log(&log).extra(SERVER);
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let bob = common::create_key(dir.path(), "bob").await;
    let served = common::Served::start(dir.path());

    let address = served.address.clone();
    let keys = [("KEY_ANN", ann.clone()), ("KEY_BOB", bob)];
    let out = tokio::task::spawn_blocking(move || python(&interpreter, &address, &keys))
        .await
        .unwrap();
    let checked: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();

    // The approved call ran once.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let approved = calls.lines().filter(|line| line.contains("approved-note"));
    assert_eq!(approved.count(), 1, "{calls}");

    // The subscription's updates are the run's tool events after the snapshot, each once.
    let subscribed = &checked["subscribed"];
    let after = assert_no_gap_no_repeat(&served.address, &ann, subscribed).await;
    let before: Vec<u64> = subscribed["before"]
        .as_array()
        .unwrap()
        .iter()
        .map(seq_of)
        .collect();
    let snapshot = subscribed["snapshot"].as_u64().unwrap();
    assert!(
        before.iter().all(|seq| *seq <= snapshot),
        "{before:?} {after:?} {snapshot}"
    );
}

/// The seq of a progress message's id (`{task}-{seq}`).
fn seq_of(id: &Value) -> u64 {
    id.as_str()
        .unwrap()
        .rsplit('-')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The updates a subscription got (`{task, after: [message ids], snapshot}`) are the run's tool
/// events after the snapshot's seq, each once and in order; returns their seqs.
async fn assert_no_gap_no_repeat(address: &str, key: &str, subscribed: &Value) -> Vec<u64> {
    let task = subscribed["task"].as_str().unwrap();
    let response = reqwest::Client::new()
        .get(format!("{address}/v1/runs/{task}/events"))
        .bearer_auth(key)
        .send()
        .await
        .unwrap();
    let logged: Vec<u64> = read_sse(response)
        .await
        .iter()
        .filter(|event| matches!(event.event.as_str(), "tool_selected" | "tool_executed"))
        .map(|event| event.data["seq"].as_u64().unwrap())
        .collect();
    let after: Vec<u64> = subscribed["after"]
        .as_array()
        .unwrap()
        .iter()
        .map(seq_of)
        .collect();
    let snapshot = subscribed["snapshot"].as_u64().unwrap();
    assert!(!after.is_empty(), "{subscribed}");
    let expected: Vec<u64> = logged
        .iter()
        .copied()
        .filter(|seq| *seq > snapshot)
        .collect();
    assert_eq!(
        after, expected,
        "the updates after the snapshot at {snapshot}: {logged:?}"
    );
    after
}

/// The HMAC-SHA256 of `body` keyed by `key`, in hex (what `X-Agentloop-Signature` carries).
fn signature(key: &str, body: &str) -> String {
    use sha2::{Digest, Sha256};
    let mut block = [0u8; 64];
    block[..key.len()].copy_from_slice(key.as_bytes());
    let mut inner = Sha256::new();
    inner.update(block.map(|byte| byte ^ 0x36));
    inner.update(body.as_bytes());
    let mut outer = Sha256::new();
    outer.update(block.map(|byte| byte ^ 0x5c));
    outer.update(inner.finalize());
    outer
        .finalize()
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn push_notifications_reach_the_receiver_once_per_state_change_across_kill_9() {
    let Some(interpreter) = requires::a2a_python() else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    // The receiver refuses its first notification: it comes again (backoff).
    let refused = std::sync::Arc::new(AtomicUsize::new(0));
    let first = refused.clone();
    let webhook = RecordingWebhook::start(move |_| match first.fetch_add(1, Ordering::SeqCst) {
        0 => (503, serde_json::json!({})),
        _ => (200, serde_json::json!({})),
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let config =
        TestConfig::new(&llm.base_url()).extra("[server]\nrun_lease_s = 1\nshutdown_grace_s = 5\n");
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let mut served = common::Served::start(dir.path());

    let address = served.address.clone();
    let keys = [
        ("KEY_ANN", ann.clone()),
        ("PUSH_URL", webhook.url().to_string()),
    ];
    let out =
        tokio::task::spawn_blocking(move || python_phase(&interpreter, "push", &address, &keys))
            .await
            .unwrap();
    let task: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    let task = task["task"].as_str().unwrap().to_string();

    // Working, told (after the refusal); then killed while the model thinks.
    let states = |webhook: &RecordingWebhook| -> Vec<String> {
        webhook
            .received()
            .iter()
            .map(|body| {
                let status = match body.get("task") {
                    Some(task) => &task["status"],
                    None => &body["statusUpdate"]["status"],
                };
                status["state"].as_str().unwrap_or_default().to_string()
            })
            .collect()
    };
    eventually(
        "the working state to be pushed again",
        Duration::from_secs(20),
        || async { (states(&webhook).len() >= 2).then_some(()) },
    )
    .await;
    served.child.kill().unwrap();
    served.child.wait().unwrap();
    let _second = common::Served::start(dir.path());
    eventually(
        "the completed state to be pushed",
        Duration::from_secs(30),
        || async {
            states(&webhook)
                .contains(&"TASK_STATE_COMPLETED".to_string())
                .then_some(())
        },
    )
    .await;

    let requests = webhook.requests();
    // Each state change is one notification, named by its id: the refused one comes again with
    // its id, and one whose 2xx the killed server had not recorded yet may come again after the
    // restart, with its id too (what a receiver dedupes by). Deduplicated, the receiver saw
    // each state change once, in order.
    let ids: Vec<&str> = requests
        .iter()
        .map(|(headers, _)| headers["x-a2a-notification-id"].as_str().unwrap())
        .collect();
    let all_states = states(&webhook);
    let mut distinct: Vec<(&str, &str)> = Vec::new();
    for (id, state) in ids.iter().zip(&all_states) {
        match distinct.iter().find(|(seen, _)| seen == id) {
            Some((_, first)) => assert_eq!(first, state, "a notification sent again changed"),
            None => distinct.push((id, state)),
        }
    }
    assert_eq!(
        distinct.iter().map(|(_, state)| *state).collect::<Vec<_>>(),
        ["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"],
        "{requests:?}"
    );
    assert_eq!(ids[0], ids[1], "a retry keeps its id");
    assert!(
        requests.len() <= 4,
        "at most the retry after the refusal and one resend across the kill: {requests:?}"
    );
    for (headers, body) in &requests {
        assert_eq!(headers["x-a2a-notification-token"], "secret-token");
        let sent = serde_json::to_string(body).unwrap();
        let signed = headers["x-agentloop-signature"].as_str().unwrap();
        // The server wrote the JSON of a value with sorted keys, as this serialisation does.
        assert_eq!(
            signed,
            format!("sha256={}", signature("secret-token", &sent))
        );
    }
    let completed = &requests.last().unwrap().1["task"];
    assert_eq!(completed["id"], task.as_str());
    assert_eq!(
        completed["artifacts"][0]["parts"][0]["text"],
        "Pushed after the restart."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agentloop_calls_another_agentloop_over_a2a_as_a_tool() {
    let llm = ScriptedLlm::start_with(respond).await;
    // The remote agent, with a key for its caller.
    let remote_dir = tempfile::tempdir().unwrap();
    let log = remote_dir.path().join("calls.jsonl");
    common::write_test_config(
        remote_dir.path(),
        &TestConfig::new(&llm.base_url()).mcp_log(&log),
    );
    let caller_key = common::create_key(remote_dir.path(), "caller").await;
    let remote = common::Served::start(remote_dir.path());
    // The caller: the remote agent as the tool `a2a.helper`.
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "[a2a_agents.helper]\nurl = \"{}\"\nkey = \"{caller_key}\"\n\
         description = \"Chains echoes\"\n",
        remote.address
    );
    common::write_test_config(dir.path(), &TestConfig::new(&llm.base_url()).extra(&extra));
    let ann = common::create_key(dir.path(), "ann").await;
    let caller = common::Served::start(dir.path());

    let response = reqwest::Client::new()
        .post(format!("{}/v1/runs", caller.address))
        .bearer_auth(&ann)
        .json(&serde_json::json!({"query": "ask the helper to chain", "stream": true}))
        .send()
        .await
        .unwrap();
    let events = read_sse(response).await;
    let answer: String = events
        .iter()
        .filter(|event| event.event == "final_response" && event.data["parent_run_id"].is_null())
        .filter_map(|event| event.data["delta"].as_str())
        .collect();
    assert_eq!(
        answer, "The helper said: Chained: one, then two.",
        "{events:?}"
    );
    // The remote task's progress, nested in the caller's stream.
    let nested: Vec<&str> = events
        .iter()
        .filter(|event| !event.data["parent_run_id"].is_null())
        .map(|event| event.event.as_str())
        .collect();
    assert_eq!(nested.first(), Some(&"run_started"), "{nested:?}");
    assert!(nested.contains(&"tool_selected"), "{nested:?}");
    assert_eq!(nested.last(), Some(&"done"), "{nested:?}");
    let executed = events
        .iter()
        .find(|event| event.event == "tool_executed" && event.data["parent_run_id"].is_null())
        .unwrap();
    assert_eq!(executed.data["tool"], "a2a.helper");
    assert_eq!(executed.data["status"], "success", "{executed:?}");
    // The remote agent ran the task for the caller's key.
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(calls.lines().count(), 2, "{calls}");
    let sessions: Value = reqwest::Client::new()
        .get(format!("{}/v1/sessions", remote.address))
        .bearer_auth(&caller_key)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        sessions["sessions"].as_array().unwrap().len(),
        1,
        "{sessions}"
    );
}

/// A run cancelled while its remote agent works cuts off the call, and the remote task is
/// cancelled with it (`CancelTask`): the remote run ends `cancelled` instead of working on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_the_callers_run_cancels_the_remote_task() {
    let llm = ScriptedLlm::start_with(respond).await;
    let remote_dir = tempfile::tempdir().unwrap();
    common::write_test_config(remote_dir.path(), &TestConfig::new(&llm.base_url()));
    let caller_key = common::create_key(remote_dir.path(), "caller").await;
    let remote = common::Served::start(remote_dir.path());
    let dir = tempfile::tempdir().unwrap();
    let extra = format!(
        "[a2a_agents.helper]\nurl = \"{}\"\nkey = \"{caller_key}\"\n",
        remote.address
    );
    common::write_test_config(dir.path(), &TestConfig::new(&llm.base_url()).extra(&extra));
    let ann = common::create_key(dir.path(), "ann").await;
    let caller = common::Served::start(dir.path());
    let client = reqwest::Client::new();
    let get = |url: String, key: String| {
        let client = client.clone();
        async move {
            client
                .get(url)
                .bearer_auth(key)
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        }
    };

    let asked = {
        let (client, address, ann) = (client.clone(), caller.address.clone(), ann.clone());
        tokio::spawn(async move {
            client
                .post(format!("{address}/v1/runs"))
                .bearer_auth(&ann)
                .json(&serde_json::json!({"query": "ask the slow helper", "stream": false}))
                .send()
                .await
                .unwrap()
                .json::<Value>()
                .await
                .unwrap()
        })
    };
    // The remote run works (its model takes a minute): the caller's run is cancelled.
    let remote_session = eventually("the remote task to start", Duration::from_secs(30), || {
        let url = format!("{}/v1/sessions", remote.address);
        let key = caller_key.clone();
        async move {
            let sessions = get(url, key).await;
            sessions["sessions"][0]["id"].as_str().map(String::from)
        }
    })
    .await;
    let sessions = get(format!("{}/v1/sessions", caller.address), ann.clone()).await;
    let run_id = sessions["sessions"][0]["active_run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let cancelled = client
        .post(format!("{}/v1/runs/{run_id}/cancel", caller.address))
        .bearer_auth(&ann)
        .send()
        .await
        .unwrap();
    assert_eq!(cancelled.status(), 202);
    let ended = asked.await.unwrap();
    assert_eq!(ended["status"], "cancelled", "{ended}");

    // The remote run ends cancelled, long before its model would have answered.
    let status = eventually("the remote run to end", Duration::from_secs(30), || {
        let url = format!("{}/v1/sessions/{remote_session}", remote.address);
        let key = caller_key.clone();
        async move {
            let session = get(url, key).await;
            let status = session["runs"][0]["status"].as_str()?.to_string();
            (status != "running").then_some(status)
        }
    })
    .await;
    assert_eq!(status, "cancelled");
}

/// The official A2A JavaScript SDK (`@a2a-js/sdk` from npm, `tests/a2a-js/client.mjs`): the
/// card, SendMessage, SendStreamingMessage in the same context, GetTask.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_a2a_js_sdk_works_against_agentloop_serve() {
    if !requires::node() {
        return;
    }
    let Some(dir) = common::frontends::npm_package("a2a-js", "@a2a-js/sdk") else {
        return;
    };
    let llm = ScriptedLlm::start_with(respond).await;
    let home = tempfile::tempdir().unwrap();
    common::write_test_config(home.path(), &TestConfig::new(&llm.base_url()));
    let ann = common::create_key(home.path(), "ann").await;
    let served = common::Served::start(home.path());
    let mut script = Command::new("node");
    script
        .arg(dir.join("client.mjs"))
        .env("AGENTLOOP_URL", &served.address)
        .env("KEY_ANN", &ann);
    let output = tokio::task::spawn_blocking(move || script.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    println!("{stdout}");
    assert!(
        output.status.success(),
        "the A2A JS SDK's checks failed ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

/// Two instances on one PostgreSQL: a task begun on one is followed with SubscribeToTask on
/// the other, from the store: every update after the snapshot, once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_followed_on_another_instance() {
    let Some(interpreter) = requires::a2a_python() else {
        return;
    };
    if !requires::postgres().await {
        return;
    }
    let schema = agentloop_test_support::postgres::TestSchema::create().await;
    let llm = ScriptedLlm::start_with(respond).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let config = TestConfig::new(&llm.base_url())
        .mcp_log(&log)
        .store(schema.url());
    common::write_test_config(dir.path(), &config);
    let ann = common::create_key(dir.path(), "ann").await;
    let a = common::Served::start(dir.path());
    let b = common::Served::start(dir.path());
    let keys = [("KEY_ANN", ann.clone()), ("OTHER_URL", b.address.clone())];
    let address = a.address.clone();
    let out =
        tokio::task::spawn_blocking(move || python_phase(&interpreter, "across", &address, &keys))
            .await
            .unwrap();
    let followed: Value = serde_json::from_str(out.lines().last().unwrap()).unwrap();
    assert_no_gap_no_repeat(&b.address, &ann, &followed).await;
    drop((a, b));
    schema.drop_schema().await;
}
