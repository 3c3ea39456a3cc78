//! `agentloop mcp login` with the real binary against an OAuth-protected MCP server (the
//! official Python SDK's, `crates/agentloop/tests/python/oauth_server.py`): the URL printed,
//! approved by an HTTP client standing in for the browser, the redirect received by the
//! command's listener, the tokens kept; then `agentloop tools` and `agentloop run --json` use
//! them (refreshed: they live one second). Every token the server issued is looked for in the
//! commands' output, their trace-level logs, the run's events and the SQLite files: none is
//! there. Without `AGENTLOOP_TOKEN_KEY` the login is refused, naming it.
//!
//! Needs a Python with `mcp` (`requires::mcp_python`); skipped, saying so, without one.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    io::{BufRead, BufReader, Read},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::Duration,
};

use agentloop_test_support::{requires, wait::eventually};

const KEY: &str = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../agentloop/tests/python/oauth_server.py")
}

fn write_config(dir: &Path, url: &str) {
    std::fs::write(
        dir.join("agentloop.toml"),
        format!(
            "[llm]\nprovider = \"scripted\"\nscript = \"script.toml\"\n\n\
             [store]\nurl = \"sqlite://agentloop.db\"\n\n\
             [mcp_servers.py]\nurl = \"{url}\"\n"
        ),
    )
    .unwrap();
    std::fs::write(
        dir.join("script.toml"),
        "[[scenarios]]\n[[scenarios.steps]]\ntext = \"Asking.\"\n\
         tool_calls = [{ name = \"py.stats\", arguments = {} }]\n\
         [[scenarios.steps]]\ntext = \"Done.\"\n",
    )
    .unwrap();
}

#[tokio::test]
async fn a_login_in_the_terminal_keeps_tokens_that_later_commands_use_and_never_show() {
    let Some(python) = requires::mcp_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let tokens_file = dir.path().join("issued.txt");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let _server = Server(
        Command::new(&python)
            .arg(script())
            .arg(port.to_string())
            .arg(&tokens_file)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let url = format!("http://127.0.0.1:{port}/mcp");
    eventually(
        "the Python server to answer",
        Duration::from_secs(30),
        || async {
            reqwest::get(format!(
                "http://127.0.0.1:{port}/.well-known/oauth-authorization-server"
            ))
            .await
            .ok()
        },
    )
    .await;
    write_config(dir.path(), &url);

    // Without a key, nothing is asked of anyone.
    let refused = common::agentloop(dir.path(), &["mcp", "login", "py", "--no-browser"]).await;
    assert!(!refused.status.success());
    assert!(
        common::stderr(&refused).contains("AGENTLOOP_TOKEN_KEY"),
        "{}",
        common::stderr(&refused)
    );

    // The login: the URL on stderr, approved in the "browser".
    let mut login = common::command(dir.path())
        .args(["mcp", "login", "py", "--no-browser", "--wait-s", "60"])
        .env("AGENTLOOP_TOKEN_KEY", KEY)
        .env("AGENTLOOP_LOG", "trace")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(login.stderr.take().unwrap());
    let mut logged = String::new();
    let authorization_url = loop {
        let mut line = String::new();
        assert_ne!(stderr.read_line(&mut line).unwrap(), 0, "no URL:\n{logged}");
        logged.push_str(&line);
        if let Some(url) = line.trim().strip_prefix("http://127.0.0.1") {
            break format!("http://127.0.0.1{url}");
        }
    };
    assert!(
        authorization_url.contains("code_challenge_method=S256"),
        "{authorization_url}"
    );
    assert!(
        authorization_url.contains("resource="),
        "{authorization_url}"
    );
    // The authorization server redirects to the command's listener, which answers the browser.
    let page = reqwest::get(&authorization_url)
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(page.contains("close this tab"), "{page}");
    let (status, rest) = tokio::task::spawn_blocking(move || {
        let mut rest = String::new();
        stderr.read_to_string(&mut rest).unwrap();
        (login.wait().unwrap(), rest)
    })
    .await
    .unwrap();
    logged.push_str(&rest);
    assert!(status.success(), "{logged}");
    assert!(
        logged.contains("Authorized with MCP server 'py'"),
        "{logged}"
    );

    // Later commands use (and refresh) the kept tokens, with no one asked.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let mut tools = common::command(dir.path());
    tools
        .args(["tools", "--json"])
        .env("AGENTLOOP_TOKEN_KEY", KEY)
        .env("AGENTLOOP_LOG", "trace");
    let tools = tokio::task::spawn_blocking(move || tools.output().unwrap())
        .await
        .unwrap();
    let listed = common::stdout(&tools);
    assert!(tools.status.success(), "{}", common::stderr(&tools));
    assert!(listed.contains("py.stats"), "{listed}");

    let mut run = common::command(dir.path());
    run.args(["run", "--json", "how many authorizations?"])
        .env("AGENTLOOP_TOKEN_KEY", KEY)
        .env("AGENTLOOP_LOG", "trace");
    let run = tokio::task::spawn_blocking(move || run.output().unwrap())
        .await
        .unwrap();
    let events = common::stdout(&run);
    assert!(run.status.success(), "{}", common::stderr(&run));
    assert!(events.contains("authorizations=1 refreshes="), "{events}");
    assert!(
        !events.contains("refreshes=0"),
        "the token was refreshed: {events}"
    );

    // No token anywhere it must not be.
    let issued = std::fs::read_to_string(&tokens_file).unwrap();
    let tokens: Vec<&str> = issued.lines().collect();
    assert!(tokens.len() >= 4, "{issued}");
    let mut places = vec![
        ("the login's log", logged.into_bytes()),
        ("tools' output", tools.stdout),
        ("tools' log", tools.stderr),
        ("the run's events", run.stdout),
        ("the run's log", run.stderr),
    ];
    for entry in std::fs::read_dir(dir.path()).unwrap() {
        let path = entry.unwrap().path();
        if path
            .file_name()
            .is_some_and(|name| name.to_string_lossy().starts_with("agentloop.db"))
        {
            places.push(("the store", std::fs::read(path).unwrap()));
        }
    }
    assert!(places.iter().any(|(what, _)| *what == "the store"));
    for token in tokens {
        for (what, bytes) in &places {
            assert!(
                !bytes
                    .windows(token.len())
                    .any(|window| window == token.as_bytes()),
                "{token} is in {what}"
            );
        }
    }
}
