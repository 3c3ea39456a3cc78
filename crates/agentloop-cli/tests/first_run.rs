//! What a newcomer meets in the first half hour: reading commands that leave no database
//! behind, one store named everywhere, output into a closed pipe, `--help` with the
//! environment, a malformed session id, the answer's line, the debug log.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, command, create_key, stderr, stdout, write_config};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};

/// An address where no LLM answers: these tests never reach one.
const NO_LLM: &str = "http://127.0.0.1:9/v1";

/// The files in `dir`, sorted.
fn files_in(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn reading_commands_in_an_empty_directory_create_no_database() {
    let dir = tempfile::tempdir().unwrap();
    let database = std::path::absolute(dir.path().join("agentloop.db")).unwrap();
    let expected = format!("no database at {} yet: nothing to list", database.display());

    for args in [&["sessions", "list"][..], &["keys", "list"]] {
        let output = agentloop(dir.path(), args).await;
        assert_eq!(
            output.status.code(),
            Some(0),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(stdout(&output).is_empty(), "{args:?}: {}", stdout(&output));
        let message = stderr(&output);
        assert!(message.contains(&expected), "{args:?}: {message}");
        assert!(message.contains("--config and DATABASE_URL"), "{message}");
    }
    let json = agentloop(dir.path(), &["sessions", "list", "--json"]).await;
    assert_eq!(json.status.code(), Some(0), "{}", stderr(&json));
    assert_eq!(stdout(&json).trim(), "[]");

    let id = uuid::Uuid::now_v7().to_string();
    let show = agentloop(dir.path(), &["sessions", "show", &id]).await;
    assert_ne!(show.status.code(), Some(0));
    assert!(
        stderr(&show).contains(&format!(
            "no database at {} yet: no session {id}",
            database.display()
        )),
        "{}",
        stderr(&show)
    );
    let revoke = agentloop(dir.path(), &["keys", "revoke", "key_000000000000"]).await;
    assert_eq!(revoke.status.code(), Some(1), "{}", stderr(&revoke));
    assert!(
        stderr(&revoke).contains("no key to revoke"),
        "{}",
        stderr(&revoke)
    );

    assert!(
        files_in(dir.path()).is_empty(),
        "reading commands left {:?}",
        files_in(dir.path())
    );
}

#[tokio::test]
async fn the_listings_and_the_serve_banner_name_the_database_in_use() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!("[llm]\nbase_url = \"{NO_LLM}\"\n"),
    )
    .unwrap();
    let database = std::path::absolute(dir.path().join("agentloop.db")).unwrap();
    let database = database.display().to_string();
    create_key(dir.path(), "ann").await;

    let sessions = agentloop(dir.path(), &["sessions", "list"]).await;
    assert!(sessions.status.success(), "{}", stderr(&sessions));
    assert!(
        stderr(&sessions).contains(&format!("No sessions in {database} yet")),
        "{}",
        stderr(&sessions)
    );
    let keys = agentloop(dir.path(), &["keys", "list"]).await;
    assert!(
        stderr(&keys).contains(&format!("keys in {database}")),
        "{}",
        stderr(&keys)
    );

    let served = common::Served::start(dir.path());
    assert!(
        served
            .banner
            .contains(&format!("store: sqlite at {database}")),
        "{}",
        served.banner
    );
}

#[tokio::test]
async fn a_key_from_another_store_gets_a_401_that_says_keys_belong_to_one_store() {
    let serving = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    for dir in [serving.path(), elsewhere.path()] {
        std::fs::write(
            dir.join("agentloop.toml"),
            format!("[llm]\nbase_url = \"{NO_LLM}\"\n"),
        )
        .unwrap();
    }
    // The newcomer's mistake: the key is made in another directory, so in another database.
    let key = create_key(elsewhere.path(), "ann").await;
    let served = common::Served::start(serving.path());

    let answer = reqwest::Client::new()
        .get(format!("{}/v1/sessions", served.address))
        .bearer_auth(&key)
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 401);
    let body: serde_json::Value = answer.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap();
    for hint in ["its own store", "--config", "DATABASE_URL"] {
        assert!(message.contains(hint), "{hint}: {message}");
    }
}

#[tokio::test]
async fn output_into_a_closed_pipe_ends_quietly_with_status_0() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), NO_LLM, "");
    // `agentloop tools --json | head -1`, with the reader gone before the first write: the
    // write fails with EPIPE for sure, however the output is buffered.
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let mut tools = command(dir.path());
    tools.args(["tools", "--json"]).stdout(writer);
    let output = tokio::task::spawn_blocking(move || tools.output().unwrap())
        .await
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    assert!(stderr(&output).is_empty(), "{}", stderr(&output));
}

#[tokio::test]
async fn help_lists_the_environment_each_command_reads() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &[&str]); 6] = [
        (
            &["run"],
            &[
                "OPENAI_API_KEY",
                "OPENAI_BASE_URL",
                "DATABASE_URL",
                "AGENTLOOP_LOG",
            ],
        ),
        (
            &["serve"],
            &["OPENAI_BASE_URL", "DATABASE_URL", "AGENTLOOP_LISTEN"],
        ),
        (&["tools"], &["AGENTLOOP_LOG"]),
        (&["sessions", "list"], &["DATABASE_URL", "AGENTLOOP_LOG"]),
        (&["keys", "create"], &["DATABASE_URL"]),
        (&["migrate"], &["DATABASE_URL"]),
    ];
    for (args, variables) in cases {
        let mut args = args.to_vec();
        args.push("--help");
        let output = agentloop(dir.path(), &args).await;
        assert!(output.status.success(), "{args:?}");
        let help = stdout(&output);
        let environment = help
            .split_once("Environment:")
            .unwrap_or_else(|| panic!("{args:?}: no Environment section in {help}"))
            .1;
        for variable in variables {
            assert!(
                environment.contains(variable),
                "{args:?} {variable}: {help}"
            );
        }
    }
}

#[tokio::test]
async fn a_malformed_session_id_gets_a_sentence() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["run", "--session", "yesterday", "hi"][..],
        &["sessions", "show", "yesterday"],
    ] {
        let output = agentloop(dir.path(), args).await;
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        let message = stderr(&output);
        assert!(
            message.contains("a session id is a UUID such as"),
            "{args:?}: {message}"
        );
        assert!(message.contains("agentloop sessions list"), "{message}");
        assert!(!message.contains("invalid character"), "{message}");
    }
    assert!(files_in(dir.path()).is_empty());
}

#[tokio::test]
async fn the_answer_ends_its_line_before_the_summary() {
    let llm = ScriptedLlm::start(vec![Reply::text("The answer is 42.")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    // stdout and stderr into one pipe, as on a terminal where both share the screen.
    let (mut reader, writer) = std::io::pipe().unwrap();
    let mut run = command(dir.path());
    run.args(["run", "hi"])
        .stdout(writer.try_clone().unwrap())
        .stderr(writer);
    let mut child = run.spawn().unwrap();
    drop(run);
    let (status, screen) = tokio::task::spawn_blocking(move || {
        let mut screen = String::new();
        std::io::Read::read_to_string(&mut reader, &mut screen).unwrap();
        (child.wait().unwrap(), screen)
    })
    .await
    .unwrap();
    assert!(status.success(), "{screen}");
    assert!(
        screen.contains("The answer is 42.\ncompleted after 1 step"),
        "{screen}"
    );
}

#[tokio::test]
async fn the_debug_log_has_no_colour_off_a_terminal_and_sql_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), NO_LLM, "");
    create_key(dir.path(), "ann").await;
    let listing = |filter: &'static str| {
        let mut list = command(dir.path());
        list.args(["keys", "list"]).env("AGENTLOOP_LOG", filter);
        tokio::task::spawn_blocking(move || list.output().unwrap())
    };

    let debug = stderr(&listing("debug").await.unwrap());
    assert!(!debug.contains("SELECT"), "{debug}");
    let with_sql = stderr(&listing("debug,sql=debug").await.unwrap());
    assert!(with_sql.contains("SELECT"), "{with_sql}");
    assert!(!with_sql.contains('\u{1b}'), "colour codes in {with_sql:?}");
}

/// A web server that is no LLM: every request gets its HTML 404 page.
async fn web_server() -> (String, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let root = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let page = "<!DOCTYPE html><html><head><title>404 Not Found</title></head><body>\
            <h1>Not Found</h1><p>The requested URL was not found on this server.</p></body></html>";
        while let Ok((mut socket, _)) = listener.accept().await {
            // The request is small: one read has its headers; the answer closes the connection.
            let mut request = [0u8; 8192];
            let _ = socket.read(&mut request).await;
            let answer = format!(
                "HTTP/1.1 404 Not Found\r\ncontent-type: text/html\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{page}",
                page.len()
            );
            let _ = socket.write_all(answer.as_bytes()).await;
            let _ = socket.shutdown().await;
        }
    });
    (root, task)
}

#[tokio::test]
async fn a_web_server_at_base_url_gets_an_error_naming_the_url_the_setting_and_v1() {
    let (root, server) = web_server().await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!("[llm]\nbase_url = \"{root}\"\nmax_retries = 0\n"),
    )
    .unwrap();
    let from_file = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(from_file.status.code(), Some(1), "{}", stderr(&from_file));
    let message = stderr(&from_file);
    for part in [
        format!("{root}/chat/completions answered HTTP 404 with an HTML page (\"404 Not Found\")"),
        "[llm] base_url in agentloop.toml".to_string(),
        format!("try {root}/v1"),
    ] {
        assert!(message.contains(&part), "{part}: {message}");
    }
    assert!(!message.contains("<"), "HTML in {message}");

    let mut run = command(dir.path());
    run.args(["run", "hi"]).env("OPENAI_BASE_URL", &root);
    let from_env = tokio::task::spawn_blocking(move || run.output().unwrap())
        .await
        .unwrap();
    let message = stderr(&from_env);
    assert!(
        message.contains("comes from the OPENAI_BASE_URL environment variable"),
        "{message}"
    );
    server.abort();
}

/// `agentloop serve` on a store without any API key says at start that every call will be
/// refused, and the command that makes a key for that store; not when there is a key, nor with
/// `--key-for`.
#[tokio::test]
async fn serve_without_any_key_warns_with_the_command_that_makes_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mine.toml");
    std::fs::write(&config, format!("[llm]\nbase_url = \"{NO_LLM}\"\n")).unwrap();
    let config = config.to_str().unwrap();

    let said = served_stderr(dir.path(), &["--config", config]).await;
    assert!(said.contains("warning: the store has no API key"), "{said}");
    assert!(
        said.contains(&format!("agentloop --config {config} keys create --user U")),
        "{said}"
    );

    let said = served_stderr(dir.path(), &["--config", config, "--key-for", "ann"]).await;
    assert!(!said.contains("no API key"), "{said}");
    // ann's key is in the store now.
    let said = served_stderr(dir.path(), &["--config", config]).await;
    assert!(!said.contains("no API key"), "{said}");
}

/// Starts `agentloop serve ARGS` in `dir`, waits until it answers, stops it; all it said on
/// stderr.
async fn served_stderr(dir: &std::path::Path, args: &[&str]) -> String {
    let served = common::Served::start_with(dir, args);
    let health = reqwest::get(format!("{}/healthz", served.address))
        .await
        .unwrap();
    assert!(health.status().is_success());
    let banner = served.banner.clone();
    let (status, rest) = served.terminate().await;
    assert!(status.success(), "{status:?}: {rest}");
    banner + &rest
}

/// `tools --json` with no MCP server prints the same JSON as with servers, with none listed.
#[tokio::test]
async fn tools_json_without_servers_prints_json_with_none() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!("[llm]\nbase_url = \"{NO_LLM}\"\n"),
    )
    .unwrap();
    let output = agentloop(dir.path(), &["tools", "--json"]).await;
    assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
    let listing: serde_json::Value = serde_json::from_str(&stdout(&output))
        .unwrap_or_else(|_| panic!("not JSON: {:?}", stdout(&output)));
    assert_eq!(listing["servers"], serde_json::json!([]), "{listing}");
    assert_eq!(listing["failed"], serde_json::json!([]), "{listing}");
    assert_eq!(listing["llm"]["model"], "gpt-4o-mini", "{listing}");
    assert!(stderr(&output).contains("No MCP servers are configured"));
}

/// The example configuration's model has a price without any `[prices]`: a run ends with its
/// cost, not with "cost unknown".
#[tokio::test]
async fn a_run_of_a_common_model_has_a_cost_without_configured_prices() {
    let llm = ScriptedLlm::start(vec![Reply::text("Hello.").with_usage(1000, 100)]).await;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        format!(
            "[llm]\nbase_url = \"{}\"\nmodel = \"gpt-4o-mini\"\nmax_retries = 0\n",
            llm.base_url()
        ),
    )
    .unwrap();
    let mut run = command(dir.path());
    run.args(["run", "hi"]).env("OPENAI_API_KEY", "sk-test");
    let output = tokio::task::spawn_blocking(move || run.output().unwrap())
        .await
        .unwrap();
    assert!(output.status.success(), "{}", stderr(&output));
    // (1000 × 0.15 + 100 × 0.60) / 1e6 = $0.00021.
    let steps = stderr(&output);
    assert!(steps.contains("1100 tokens, $0.0002"), "{steps}");
    assert!(!steps.contains("cost unknown"), "{steps}");
}
