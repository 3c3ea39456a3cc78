//! MCP over streamable HTTP, against agentloop-test-mcp started with `--http`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use agentloop_core::{Tool, ToolContext, ToolError, ToolOutput, ToolSource};
use agentloop_mcp::{McpError, McpServerConfig, McpSource};
use agentloop_test_support::mcp::{
    TestMcpHttp, read_test_mcp_log, test_mcp_http_config_toml, test_mcp_server_http, wait_for_call,
};
use agentloop_test_support::sockets;
use agentloop_test_support::wait::until;
use serde_json::{Value, json};

/// Far longer than any call here takes: a call that hangs fails the test instead.
const PATIENCE: Duration = Duration::from_secs(20);

async fn connect(name: &str, config: &McpServerConfig) -> Result<McpSource, McpError> {
    tokio::time::timeout(PATIENCE, McpSource::connect(name, config))
        .await
        .unwrap_or_else(|_| panic!("connecting to {name} hung"))
}

async fn tool(source: &McpSource, name: &str) -> Arc<dyn Tool> {
    source
        .tools()
        .await
        .unwrap()
        .into_iter()
        .find(|tool| tool.info().name == name)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

async fn call(tool: &Arc<dyn Tool>, arguments: Value) -> Result<ToolOutput, ToolError> {
    tokio::time::timeout(PATIENCE, tool.call(arguments, ToolContext::default()))
        .await
        .unwrap_or_else(|_| panic!("{} did not answer in time", tool.info().name))
}

#[tokio::test]
async fn tools_are_listed_and_called_over_http() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let server = test_mcp_server_http(Some(&log));
    let source = connect("web", &McpServerConfig::http(server.url()))
        .await
        .unwrap();
    assert!(source.is_running());

    let tools = source.tools().await.unwrap();
    let mut names: Vec<&str> = tools.iter().map(|tool| tool.info().name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "web.add",
            "web.add_tool",
            "web.bad_forecast",
            "web.big",
            "web.crash",
            "web.echo",
            "web.fail",
            "web.forecast",
            "web.progress",
            "web.record",
            "web.roots",
            "web.rpc_error",
            "web.sleep",
            "web.slow_record"
        ]
    );
    let echo = tool(&source, "web.echo").await;
    assert_eq!(echo.info().description, "Returns its text unchanged");
    assert_eq!(echo.info().read_only_hint, Some(true));
    assert_eq!(echo.info().input_schema["required"], json!(["text"]));

    assert_eq!(
        call(&echo, json!({"text": "over http"})).await,
        Ok(ToolOutput::text("over http"))
    );
    let add = tool(&source, "web.add").await;
    assert_eq!(
        call(&add, json!({"a": 2, "b": 3.5})).await,
        Ok(ToolOutput::text("5.5"))
    );
    let fail = tool(&source, "web.fail").await;
    assert_eq!(
        call(&fail, json!({"message": "disk full"})).await,
        Err(ToolError::Failed("disk full".to_owned()))
    );
    let rpc_error = tool(&source, "web.rpc_error").await;
    assert_eq!(
        call(&rpc_error, json!({"message": "no such thing"})).await,
        Err(ToolError::Failed("no such thing".to_owned()))
    );
    let big = tool(&source, "web.big").await;
    assert_eq!(
        call(&big, json!({"chars": 100_003}))
            .await
            .unwrap()
            .text
            .len(),
        100_003
    );

    let logged: Vec<Value> = read_test_mcp_log(&log)
        .into_iter()
        .map(|line| line["tool"].clone())
        .collect();
    assert_eq!(logged, ["echo", "add", "fail", "rpc_error", "big"]);

    source.shutdown().await;
    assert!(!source.is_running());
    let late = call(&echo, json!({"text": "late"})).await;
    let Err(ToolError::Unavailable(message)) = late else {
        panic!("a call after shutdown gave {late:?}");
    };
    assert!(message.contains("'web'"), "{message}");
    assert!(message.contains("shut down"), "{message}");
}

/// An answer over the limit of one message fails its call at once, naming the limit and the size,
/// instead of hanging; the connection stays up.
#[tokio::test]
async fn an_answer_over_the_message_limit_fails_its_call_at_once() {
    let server = test_mcp_server_http(None);
    let source = connect("web", &McpServerConfig::http(server.url()))
        .await
        .unwrap();
    let big = tool(&source, "web.big").await;

    let failed = call(&big, json!({"chars": 20_000_000})).await;
    let Err(ToolError::Failed(message)) = failed else {
        panic!("{failed:?}");
    };
    assert!(message.contains("16 MiB"), "{message}");
    assert!(message.contains("'web'"), "{message}");

    let echo = tool(&source, "web.echo").await;
    assert_eq!(
        call(&echo, json!({"text": "still here"})).await,
        Ok(ToolOutput::text("still here"))
    );
    source.shutdown().await;
}

#[tokio::test]
async fn headers_go_with_every_request() {
    let server = TestMcpHttp::spawn("127.0.0.1:0", None, Some("s3cret"));

    let error = connect("secure", &McpServerConfig::http(server.url()))
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Connect { .. }), "{error:?}");
    assert_eq!(error.server(), Some("secure"));
    let message = error.to_string();
    assert!(message.contains(server.url()), "{message}");
    assert!(message.contains("401"), "{message}");
    assert!(
        message.contains("check mcp_servers.secure.headers"),
        "{message}"
    );

    let wrong = McpServerConfig::http(server.url()).with_header("Authorization", "Bearer nope");
    let message = connect("secure", &wrong).await.unwrap_err().to_string();
    assert!(
        message.contains("check mcp_servers.secure.headers"),
        "{message}"
    );

    let right = McpServerConfig::http(server.url()).with_header("Authorization", "Bearer s3cret");
    let source = connect("secure", &right).await.unwrap();
    let echo = tool(&source, "secure.echo").await;
    // The call is a request of its own: it passes only if the header went with it too.
    assert_eq!(
        call(&echo, json!({"text": "let me in"})).await,
        Ok(ToolOutput::text("let me in"))
    );
    source.shutdown().await;
}

#[tokio::test]
async fn a_restarted_server_gets_one_new_session_and_the_calls_go_through() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let mut server = test_mcp_server_http(Some(&log));
    let source = connect("web", &McpServerConfig::http(server.url()))
        .await
        .unwrap();
    let echo = tool(&source, "web.echo").await;
    assert_eq!(
        call(&echo, json!({"text": "before"})).await,
        Ok(ToolOutput::text("before"))
    );
    let mut changes = source.changes().unwrap();
    let before = *changes.borrow_and_update();

    // A new process on the same port: it does not know the session. Restarting takes a while,
    // in which the client notices that its kept-alive connections closed, as it would when a
    // real server restarts.
    let port = reqwest::Url::parse(server.url()).unwrap().port().unwrap();
    let to_the_old_server = sockets::connections_to(port);
    assert!(!to_the_old_server.is_empty(), "no connection to the server");
    let old_pid = server.pid();
    let server = tokio::task::spawn_blocking(move || {
        server.restart();
        server
    })
    .await
    .unwrap();
    assert_ne!(server.pid(), old_pid);
    // The client's connection tasks see the old connections close and drop them (on a busy
    // machine they may not have run yet); a request written into a connection the client still
    // believes open fails without an answer, which is not what this test is about.
    until(
        "the client dropped its connections to the old server",
        PATIENCE,
        || sockets::connections_to(port).is_disjoint(&to_the_old_server),
    )
    .await;

    let calls = (0..4).map(|i| {
        let echo = echo.clone();
        tokio::spawn(async move { call(&echo, json!({"text": format!("after {i}")})).await })
    });
    for (i, result) in futures::future::join_all(calls)
        .await
        .into_iter()
        .enumerate()
    {
        assert_eq!(result.unwrap(), Ok(ToolOutput::text(format!("after {i}"))));
    }

    tokio::time::timeout(PATIENCE, changes.changed())
        .await
        .expect("changes() did not move after the new session")
        .unwrap();
    // Calls failing together opened one session between them.
    assert_eq!(*changes.borrow(), before + 1);

    // The old process is dead, so every call logged after "before" reached the new one; each
    // ran exactly once.
    let mut texts: Vec<String> = read_test_mcp_log(&log)
        .iter()
        .map(|line| line["arguments"]["text"].as_str().unwrap().to_owned())
        .collect();
    texts.sort();
    assert_eq!(
        texts,
        ["after 0", "after 1", "after 2", "after 3", "before"]
    );

    assert!(source.is_running());
    assert!(
        source
            .tools()
            .await
            .unwrap()
            .iter()
            .any(|tool| tool.info().name == "web.echo")
    );
    source.shutdown().await;
}

#[tokio::test]
async fn a_dead_server_fails_calls_as_unavailable() {
    let mut server = test_mcp_server_http(None);
    let url = server.url().to_owned();
    let source = connect("web", &McpServerConfig::http(&url)).await.unwrap();
    let echo = tool(&source, "web.echo").await;
    server.kill();

    let result = call(&echo, json!({"text": "anyone?"})).await;
    let Err(ToolError::Unavailable(message)) = result else {
        panic!("a call to the dead server gave {result:?}");
    };
    assert!(message.contains("'web'"), "{message}");
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("cannot be reached"), "{message}");
    assert!(!source.is_running());

    // Still dead: the next call fails the same way rather than hang.
    let again = call(&echo, json!({"text": "anyone?"})).await;
    assert!(matches!(again, Err(ToolError::Unavailable(_))), "{again:?}");
    source.shutdown().await;
}

#[tokio::test]
async fn a_server_dying_during_a_call_fails_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    let mut server = test_mcp_server_http(Some(&log));
    let source = connect("web", &McpServerConfig::http(server.url()))
        .await
        .unwrap();
    let sleep = tool(&source, "web.sleep").await;
    // Long enough that the server surely dies first; the call gives up resuming its event
    // stream after a few attempts rather than wait for this.
    let pending = tokio::spawn(async move { call(&sleep, json!({"ms": 60_000})).await });
    wait_for_call(&log, "sleep").await;
    tokio::task::spawn_blocking(move || server.kill())
        .await
        .unwrap();

    let result = pending.await.unwrap();
    let Err(ToolError::Unavailable(message)) = result else {
        panic!("a call to a server that died gave {result:?}");
    };
    assert!(message.contains("'web'"), "{message}");
    source.shutdown().await;
}

#[tokio::test]
async fn a_wrong_url_says_what_to_check() {
    let nothing = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = nothing.local_addr().unwrap().port();
    drop(nothing);
    let url = format!("http://127.0.0.1:{port}/mcp");
    let error = connect("gone", &McpServerConfig::http(&url))
        .await
        .unwrap_err();
    assert!(matches!(error, McpError::Connect { .. }), "{error:?}");
    let message = error.to_string();
    assert!(message.contains(&url), "{message}");
    assert!(message.contains("mcp_servers.gone.url"), "{message}");

    let server = test_mcp_server_http(None);
    let wrong_path = server.url().replace("/mcp", "/nope");
    let message = connect("lost", &McpServerConfig::http(&wrong_path))
        .await
        .unwrap_err()
        .to_string();
    assert!(message.contains("404"), "{message}");
    assert!(message.contains("mcp_servers.lost.url"), "{message}");
}

#[tokio::test]
async fn a_server_that_never_answers_times_out_naming_the_setting() {
    // Connections are accepted by the kernel into the backlog, and then nothing answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", silent.local_addr().unwrap());
    let config = McpServerConfig::http(&url).with_startup_timeout_s(0.5);
    let error = connect("slow", &config).await.unwrap_err();
    assert!(
        matches!(error, McpError::ConnectTimeout { .. }),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(message.contains(&url), "{message}");
    assert!(
        message.contains("mcp_servers.slow.startup_timeout_s"),
        "{message}"
    );
}

#[tokio::test]
async fn invalid_configurations_are_refused_before_connecting() {
    let url = "http://127.0.0.1:9/mcp";
    let mut both = McpServerConfig::new("x");
    both.url = Some(url.to_owned());
    let mut neither = McpServerConfig::http(url);
    neither.url = None;
    let cases = [
        (
            both,
            vec!["mcp_servers.files.command", "mcp_servers.files.url"],
        ),
        (
            neither,
            vec!["mcp_servers.files.command", "mcp_servers.files.url"],
        ),
        (
            McpServerConfig::http("ftp://x"),
            vec!["mcp_servers.files.url"],
        ),
        (
            McpServerConfig::new("x").with_header("Authorization", "Bearer a"),
            vec!["mcp_servers.files.headers"],
        ),
        (
            McpServerConfig::http(url).with_args(["--port", "9"]),
            vec!["mcp_servers.files.args"],
        ),
    ];
    for (config, keys) in cases {
        let error = connect("files", &config).await.unwrap_err();
        let McpError::InvalidConfig(setting) = &error else {
            panic!("{config:?} gave {error:?}");
        };
        for key in keys {
            let message = &setting.message;
            assert!(message.contains(key), "{key} not in {message}");
        }
    }
}

#[tokio::test]
async fn the_config_table_of_test_support_reaches_the_http_server() {
    #[derive(serde::Deserialize)]
    struct ConfigFile {
        mcp_servers: BTreeMap<String, McpServerConfig>,
    }
    let server = test_mcp_server_http(None);
    let text = test_mcp_http_config_toml("remote", server.url());
    let file: ConfigFile = toml::from_str(&text).unwrap();

    let source = connect("remote", &file.mcp_servers["remote"])
        .await
        .unwrap();
    let echo = tool(&source, "remote.echo").await;
    assert_eq!(
        call(&echo, json!({"text": "via toml"})).await,
        Ok(ToolOutput::text("via toml"))
    );
    source.shutdown().await;
}

#[tokio::test]
async fn progress_structured_results_resources_and_prompts_over_http() {
    let server = test_mcp_server_http(None);
    let source = connect("web", &McpServerConfig::http(server.url()))
        .await
        .unwrap();

    // Progress, on the request's own SSE stream.
    let progress = tool(&source, "web.progress").await;
    let (sender, mut reports) = tokio::sync::mpsc::unbounded_channel();
    let context = ToolContext {
        progress: Some(sender),
        ..ToolContext::default()
    };
    let output = tokio::time::timeout(
        PATIENCE,
        progress.call(json!({"steps": 2, "ms": 1}), context),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(output.text, "took 2 steps");
    let mut seen = Vec::new();
    while let Some(report) = reports.recv().await {
        seen.push((report.progress, report.total));
    }
    assert_eq!(seen, [(1.0, Some(2.0)), (2.0, Some(2.0))]);

    // A structured result that does not fit the output schema.
    let bad = tool(&source, "web.bad_forecast").await;
    let failed = call(&bad, json!({"city": "Oslo"})).await;
    assert!(
        matches!(&failed, Err(ToolError::Failed(message)) if message.contains("output schema")),
        "{failed:?}"
    );

    // Resources and prompts.
    assert!(source.offers_resources().await && source.offers_prompts().await);
    let read = source.read_resource("note://greeting").await.unwrap();
    assert_eq!(read[0].as_text(), "hello from a resource");
    assert_eq!(source.prompts().await.unwrap()[0].name, "summarize");
    source.shutdown().await;
}
