//! Ending runs from the terminal: `agentloop run` whose stdout's reader goes away (`| head -1`)
//! cancels its run rather than leaving it `running` with its session locked, and
//! `agentloop cancel RUN_ID` cancels a run at work in another process, a paused one, one whose
//! process was killed, and says so of a run that already ended.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, ExitStatus, Stdio},
    time::Duration,
};

use agentloop_test_support::{
    config::TestConfig,
    scripted_llm::{Reply, ScriptedLlm},
    wait::eventually,
};
use common::{agentloop, command, stderr, stdout, write_test_config};
use serde_json::{Value, json};

/// A model that takes far longer than any of these tests to answer: a run only ends early
/// because it is cancelled.
const SLOW: Duration = Duration::from_secs(60);

/// `agentloop run --json QUERY` started in `dir`, with its first event (`run_started`), read
/// off the async runtime (which serves the scripted LLM meanwhile).
async fn start_run(
    dir: &Path,
    query: &str,
) -> (Child, BufReader<std::process::ChildStdout>, Value) {
    let mut child = command(dir)
        .args(["run", "--json", query])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let (stdout, line) = tokio::task::spawn_blocking(move || {
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        (stdout, line)
    })
    .await
    .unwrap();
    let first: Value = serde_json::from_str(&line).unwrap_or_else(|_| panic!("not JSON: {line}"));
    assert_eq!(first["type"], "run_started", "{first}");
    (child, stdout, first)
}

/// Waits for `child` to exit; its status and stderr.
async fn exit(mut child: Child) -> (ExitStatus, String) {
    tokio::task::spawn_blocking(move || {
        let status = child.wait().unwrap();
        let mut rest = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            std::io::Read::read_to_string(&mut stderr, &mut rest).unwrap();
        }
        (status, rest)
    })
    .await
    .unwrap()
}

/// The run as `agentloop sessions show --json` has it.
async fn stored_run(dir: &Path, session: &str, run_id: &str) -> Value {
    let shown = agentloop(dir, &["sessions", "show", session, "--json"]).await;
    assert!(shown.status.success(), "{}", stderr(&shown));
    let shown: Value = serde_json::from_str(&stdout(&shown)).unwrap();
    shown["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|run| run["run"].clone())
        .find(|run| run["id"] == run_id)
        .unwrap_or_else(|| panic!("no run {run_id} in {shown}"))
}

fn ids(event: &Value) -> (String, String) {
    (
        event["run_id"].as_str().unwrap().to_string(),
        event["session_id"].as_str().unwrap().to_string(),
    )
}

/// `agentloop run --json QUERY | head -1`: the reader reads the first line and goes away while
/// the model thinks. The run is cancelled, saved so, its session free at once; the exit status
/// is not 0 and stderr says what happened.
#[tokio::test]
async fn a_run_whose_stdout_reader_goes_away_is_cancelled_and_frees_its_session() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("never read").with_delay(SLOW),
        Reply::text("The second question's answer."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_test_config(dir.path(), &TestConfig::new(&llm.base_url()));
    let (child, reading, first) = start_run(dir.path(), "first question").await;
    let (run_id, session) = ids(&first);
    eventually("the model to be asked", Duration::from_secs(20), || async {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    drop(reading);
    let (status, said) = exit(child).await;

    assert_eq!(status.code(), Some(141), "{said}");
    assert!(
        said.contains(&format!("while run {run_id} was working")),
        "{said}"
    );
    assert!(said.contains("cancelled at its next safe point"), "{said}");
    assert!(
        said.contains(&format!("session {session} is free")),
        "{said}"
    );
    let run = stored_run(dir.path(), &session, &run_id).await;
    assert_eq!(run["status"], "cancelled", "{run}");

    // The session takes its next run at once.
    let next = agentloop(
        dir.path(),
        &["run", "--session", &session, "second question"],
    )
    .await;
    assert!(next.status.success(), "{}", stderr(&next));
    assert_eq!(stdout(&next), "The second question's answer.\n");
}

/// `agentloop cancel` on a run at work in another `agentloop run`: the request reaches that
/// process, which stops the run (its LLM call abandoned) and exits 130; `cancel` exits 0. A
/// second `cancel` finds it already cancelled; a run that completed cannot be cancelled; a run
/// that does not exist is an error.
#[tokio::test]
async fn cancel_stops_a_run_at_work_in_another_process_and_says_so_of_ended_runs() {
    let llm = ScriptedLlm::start(vec![
        Reply::text("never delivered").with_delay(SLOW),
        Reply::text("Done."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_test_config(dir.path(), &TestConfig::new(&llm.base_url()));
    let (child, mut reading, first) = start_run(dir.path(), "take your time").await;
    let (run_id, session) = ids(&first);
    // The rest of the output is read, so that only the cancel can end the run.
    let reader = std::thread::spawn(move || {
        let mut rest = String::new();
        std::io::Read::read_to_string(&mut reading, &mut rest).unwrap();
        rest
    });
    eventually("the model to be asked", Duration::from_secs(20), || async {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;

    let cancelled = agentloop(dir.path(), &["cancel", &run_id]).await;
    assert_eq!(cancelled.status.code(), Some(0), "{}", stderr(&cancelled));
    assert!(
        stderr(&cancelled).contains(&format!("run {run_id} is cancelled")),
        "{}",
        stderr(&cancelled)
    );
    let (status, said) = exit(child).await;
    assert_eq!(status.code(), Some(130), "{said}");
    let rest = reader.join().unwrap();
    let done: Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    assert_eq!(done["type"], "done", "{rest}");
    assert_eq!(done["status"], "cancelled", "{rest}");
    assert_eq!(
        stored_run(dir.path(), &session, &run_id).await["status"],
        "cancelled"
    );

    let again = agentloop(dir.path(), &["cancel", &run_id]).await;
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already cancelled"),
        "{}",
        stderr(&again)
    );

    let completed = agentloop(dir.path(), &["run", "--json", "quick one"]).await;
    assert!(completed.status.success(), "{}", stderr(&completed));
    let first: Value = serde_json::from_str(stdout(&completed).lines().next().unwrap()).unwrap();
    let (completed_id, _) = ids(&first);
    let refused = agentloop(dir.path(), &["cancel", &completed_id]).await;
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("already ended (completed): there is nothing to cancel"),
        "{}",
        stderr(&refused)
    );

    let unknown = uuid::Uuid::now_v7().to_string();
    let missing = agentloop(dir.path(), &["cancel", &unknown]).await;
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
    assert!(
        stderr(&missing).contains(&format!("no run {unknown} in")),
        "{}",
        stderr(&missing)
    );
}

/// A run paused on a question nobody answered is ended by `cancel` in its place, with its
/// session freed.
#[tokio::test]
async fn cancel_ends_a_paused_run() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("ask_user", json!({"question": "Which order?"})),
        Reply::text("Next run's answer."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).extra("[agent]\nask_user = true\n"),
    );
    // No answer on stdin: the run stays paused.
    let paused = agentloop(dir.path(), &["run", "--json", "refund my order"]).await;
    assert_eq!(paused.status.code(), Some(1), "{}", stderr(&paused));
    assert!(
        stderr(&paused).contains("stays paused"),
        "{}",
        stderr(&paused)
    );
    let first: Value = serde_json::from_str(stdout(&paused).lines().next().unwrap()).unwrap();
    let (run_id, session) = ids(&first);
    assert_eq!(
        stored_run(dir.path(), &session, &run_id).await["status"],
        "awaiting_input"
    );

    let cancelled = agentloop(dir.path(), &["cancel", &run_id]).await;
    assert_eq!(cancelled.status.code(), Some(0), "{}", stderr(&cancelled));
    assert_eq!(
        stored_run(dir.path(), &session, &run_id).await["status"],
        "cancelled"
    );
    let next = agentloop(dir.path(), &["run", "--session", &session, "next"]).await;
    assert!(next.status.success(), "{}", stderr(&next));
}

/// A run whose `agentloop run` was killed is left `running`; `cancel` takes it over once that
/// process has been silent for the lease, and ends it.
#[tokio::test]
async fn cancel_ends_a_run_whose_process_was_killed() {
    let llm = ScriptedLlm::start(vec![Reply::text("never delivered").with_delay(SLOW)]).await;
    let dir = tempfile::tempdir().unwrap();
    write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).extra("[server]\nrun_lease_s = 1\n"),
    );
    let (mut child, _stdout, first) = start_run(dir.path(), "wait for me").await;
    let (run_id, session) = ids(&first);
    eventually("the model to be asked", Duration::from_secs(20), || async {
        (!llm.requests().is_empty()).then_some(())
    })
    .await;
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        stored_run(dir.path(), &session, &run_id).await["status"],
        "running"
    );

    let cancelled = agentloop(dir.path(), &["cancel", &run_id]).await;
    assert_eq!(cancelled.status.code(), Some(0), "{}", stderr(&cancelled));
    assert!(
        stderr(&cancelled).contains("process is gone"),
        "{}",
        stderr(&cancelled)
    );
    assert_eq!(
        stored_run(dir.path(), &session, &run_id).await["status"],
        "cancelled"
    );
}
