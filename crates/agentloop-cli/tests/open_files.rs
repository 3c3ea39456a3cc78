//! `agentloop serve` under a low limit of open files: more idle connections than the limit
//! allows do not take the server down; the connections past its cap (which follows the limit)
//! are answered 503 and closed, idle ones are closed after the header timeout, and `/livez`
//! answers throughout.
#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::time::Duration;

use agentloop_test_support::{config::TestConfig, scripted_llm::ScriptedLlm, wait::eventually};
use tokio::net::TcpStream;

const LIMIT: usize = 256;

#[tokio::test]
async fn more_idle_connections_than_the_open_files_limit_leave_livez_answering() {
    let llm = ScriptedLlm::start(vec![]).await;
    let dir = tempfile::tempdir().unwrap();
    common::write_test_config(
        dir.path(),
        &TestConfig::new(&llm.base_url()).extra("[server]\nheader_timeout_s = 2\n"),
    );
    let mut shell = std::process::Command::new("sh");
    common::clean_env(&mut shell);
    shell
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("ulimit -n {LIMIT} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_agentloop"));
    let served = common::Served::start_command(shell, &[]);
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", served.child.id())).unwrap();
    assert!(
        limits
            .lines()
            .any(|line| line.starts_with("Max open files") && line.contains(&LIMIT.to_string())),
        "{limits}"
    );
    let address = served.address.trim_start_matches("http://").to_string();

    // Connections that say nothing, more than the server could hold open.
    let mut idle = Vec::new();
    for _ in 0..LIMIT + 44 {
        idle.push(TcpStream::connect(&address).await.unwrap());
    }
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let livez = || async {
        client
            .get(format!("{}/livez", served.address))
            .send()
            .await
            .map(|response| response.status().as_u16())
    };
    // Answered at once: served, or refused with 503 while the idle ones fill the cap (or, while
    // many are being refused, closed at once); never left waiting.
    match livez().await {
        Ok(status) => assert!(status == 200 || status == 503, "{status}"),
        Err(error) => assert!(!error.is_timeout(), "{error}"),
    }
    // The idle connections are closed after the header timeout, and every request is served
    // again, while the clients still hold their ends.
    eventually("/livez answers 200", Duration::from_secs(30), || async {
        (livez().await.ok()? == 200).then_some(())
    })
    .await;
    assert_eq!(idle.len(), LIMIT + 44);
    drop(idle);
    let (status, log) = served.terminate().await;
    assert!(status.success(), "{log}");
    assert!(log.contains("server.max_connections"), "{log}");
}
