//! The `agentloop` binary as a user meets it: real process, real config file, a scripted LLM
//! over HTTP and the test MCP server as a child process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use common::{agentloop, stderr, stdout, write_config};

use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm};
use serde_json::{Value, json};

#[tokio::test]
async fn run_prints_steps_on_stderr_and_the_answer_on_stdout() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 40, "b": 2})),
        Reply::text("The answer is 42."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let output = agentloop(dir.path(), &["run", "What", "is", "40 + 2?"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "The answer is 42.\n");
    let steps = stderr(&output);
    assert!(
        steps.contains("model: openai scripted at http://"),
        "{steps}"
    );
    assert!(steps.contains("→ test.add {\"a\":40,\"b\":2}"), "{steps}");
    assert!(steps.contains("✓ test.add success"), "{steps}");
    assert!(
        steps.contains("completed after 2 steps, 1 tool call"),
        "{steps}"
    );
    // No price for the scripted model: the last line says so rather than a low figure.
    assert!(
        steps.contains("tokens, cost unknown: no price for scripted"),
        "{steps}"
    );
    assert_eq!(
        llm.requests()[0]["messages"][1]["content"],
        "What is 40 + 2?"
    );
}

#[tokio::test]
async fn run_ends_with_the_cost_of_the_run_at_the_configured_prices() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__add", json!({"a": 40, "b": 2})).with_usage(1000, 100),
        Reply::text("The answer is 42.").with_usage(1500, 20),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let prices = "[prices.scripted]\ninput = 3.0\noutput = 15.0\n";
    write_config(dir.path(), &llm.base_url(), prices);
    let output = agentloop(dir.path(), &["run", "What is 40 + 2?"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    // (2500 × 3 + 120 × 15) / 1e6 = $0.0093.
    let steps = stderr(&output);
    assert!(steps.contains("2620 tokens, $0.0093"), "{steps}");
}

#[tokio::test]
async fn run_json_prints_every_event_as_a_json_line() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "hi"})),
        Reply::text("hi"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let output = agentloop(dir.path(), &["run", "--json", "echo hi"]).await;

    assert!(output.status.success(), "{}", stderr(&output));
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).expect("each line is JSON"))
        .collect();
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.first(), Some(&"run_started"));
    assert!(kinds.contains(&"tool_selected") && kinds.contains(&"tool_executed"));
    let done = events.last().unwrap();
    assert_eq!(done["type"], "done");
    assert_eq!(done["status"], "completed");
    assert_eq!(done["tools_used"], 1);
    assert!(events.iter().all(|e| e["run_id"] == events[0]["run_id"]));
    assert!(
        stderr(&output).is_empty(),
        "--json keeps stderr quiet: {}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_failed_run_exits_non_zero_with_the_error() {
    let llm = ScriptedLlm::start(vec![Reply::error(401, "Incorrect API key provided")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(output.status.code(), Some(1));
    assert!(stdout(&output).is_empty());
    let error = stderr(&output);
    assert!(error.contains("Incorrect API key provided"), "{error}");
    assert!(error.contains("OPENAI_API_KEY"), "{error}");
}

#[tokio::test]
async fn no_llm_reachable_says_what_to_set() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &format!("http://127.0.0.1:{port}/v1"), "");
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(output.status.code(), Some(1));
    let error = stderr(&output);
    assert!(
        error.contains("llm.base_url") && error.contains("OPENAI_BASE_URL"),
        "{error}"
    );
    assert_eq!(
        error.matches("error:").count(),
        1,
        "one clear error, not a chain: {error}"
    );
}

#[tokio::test]
async fn no_key_for_openai_says_what_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(output.status.code(), Some(1));
    let error = stderr(&output);
    assert!(error.contains("OPENAI_API_KEY"), "{error}");
    assert!(error.contains("OPENAI_BASE_URL"), "{error}");
}

#[tokio::test]
async fn an_unknown_config_key_is_named_with_its_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[agent]\nmax_iterations = 3\nmax_iteratons = 4\n",
    )
    .unwrap();
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(output.status.code(), Some(2));
    let error = stderr(&output);
    assert!(
        error.contains("max_iteratons") && error.contains("line 3"),
        "{error}"
    );
    assert!(error.contains("agentloop.toml"), "{error}");
}

/// Several typos in one file are all reported by the first attempt, in the order of the file,
/// each with its line and key.
#[tokio::test]
async fn every_config_typo_is_reported_at_once_in_file_order() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("agentloop.toml"),
        "[llm]\nmodle = \"gpt-4o\"\n\n[agent]\nmax_iteratons = 4\n\n[server]\nlisten_on = \"x\"\n",
    )
    .unwrap();
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert_eq!(output.status.code(), Some(2));
    let error = stderr(&output);
    assert!(error.contains("3 problems, in file order"), "{error}");
    let places: Vec<usize> = [
        "line 2, column 1: llm.modle: unknown field `modle`",
        "line 5, column 1: agent.max_iteratons: unknown field `max_iteratons`",
        "line 8, column 1: server.listen_on: unknown field `listen_on`",
    ]
    .iter()
    .map(|line| {
        error
            .find(line)
            .unwrap_or_else(|| panic!("no {line:?} in {error}"))
    })
    .collect();
    assert!(places.is_sorted(), "not in file order: {error}");
}

#[tokio::test]
async fn a_bad_value_is_refused_with_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("custom.toml");
    std::fs::write(&path, "[agent]\nmax_iterations = 0\n").unwrap();
    // --config works after the subcommand too.
    let output = agentloop(
        dir.path(),
        &["run", "hi", "--config", path.to_str().unwrap()],
    )
    .await;
    assert_eq!(output.status.code(), Some(2));
    assert!(
        stderr(&output).contains("agent.max_iterations must be at least 1"),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn run_read_only_blocks_mutating_tools() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__record", json!({"note": "x"})),
        Reply::text("The project is read-only."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let output = agentloop(
        dir.path(),
        &["run", "--read-only", "--entity", "p-1", "change it"],
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("⊘ test.record blocked"),
        "{}",
        stderr(&output)
    );
    let offered = llm.requests()[0]["tools"].to_string();
    assert!(
        !offered.contains("test__record") && offered.contains("test__echo"),
        "{offered}"
    );
}

#[tokio::test]
async fn tools_lists_each_servers_tools_with_their_classification() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "http://127.0.0.1:9/v1",
        "[tools.\"test.add\"]\nmutating = true\n",
    );
    let output = agentloop(dir.path(), &["tools"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let listing = stdout(&output);
    let echo = listing
        .lines()
        .find(|line| line.contains("test.echo"))
        .unwrap_or_default();
    assert!(echo.contains("read-only"), "{listing}");
    let record = listing
        .lines()
        .find(|line| line.contains("test.record"))
        .unwrap_or_default();
    assert!(record.contains("mutating"), "{listing}");

    let output = agentloop(
        dir.path(),
        &["--config", "agentloop.toml", "tools", "--json"],
    )
    .await;
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    let names: Vec<&str> = value["servers"][0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"test.add") && names.contains(&"test.crash"),
        "{names:?}"
    );

    // A tool's title, hints and output schema, as the server declared them.
    let tool = |name: &str| {
        value["servers"][0]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| tool["name"] == name)
            .cloned()
            .unwrap()
    };
    let forecast = tool("test.forecast");
    assert_eq!(forecast["title"], "Weather forecast");
    assert_eq!(
        forecast["annotations"],
        json!({"read_only_hint": true, "open_world_hint": true})
    );
    assert_eq!(
        forecast["output_schema"]["required"],
        json!(["temperature", "conditions"])
    );
    let echo = tool("test.echo");
    assert_eq!(echo["annotations"], json!({"read_only_hint": true}));
    assert!(echo.get("title").is_none() && echo.get("output_schema").is_none());
    // The title shows in the listing for people.
    let forecast_line = listing
        .lines()
        .find(|line| line.contains("test.forecast"))
        .unwrap_or_default();
    assert!(
        forecast_line.contains("Weather forecast: Forecasts the weather"),
        "{listing}"
    );
}

#[tokio::test]
async fn resources_and_prompts_list_what_each_server_offers() {
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), "http://127.0.0.1:9/v1", "");

    let output = agentloop(dir.path(), &["resources"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let listing = stdout(&output);
    assert!(
        listing.contains("test (2 resources, 1 template)"),
        "{listing}"
    );
    assert!(
        listing.contains("note://greeting  greeting  A greeting, text/plain"),
        "{listing}"
    );
    assert!(
        listing.contains("note://{name}  note  A note of the given name"),
        "{listing}"
    );

    let output = agentloop(dir.path(), &["resources", "--json"]).await;
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value["servers"][0]["server"], "test");
    assert_eq!(value["servers"][0]["resources"][1]["uri"], "blob://logo");
    assert_eq!(
        value["servers"][0]["templates"][0]["uri_template"],
        "note://{name}"
    );

    let output = agentloop(dir.path(), &["prompts"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    let listing = stdout(&output);
    assert!(
        listing.contains("summarize(topic)  Asks for a summary of a topic"),
        "{listing}"
    );
    let output = agentloop(dir.path(), &["prompts", "--json"]).await;
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(
        value["servers"][0]["prompts"][0]["arguments"],
        json!([{"name": "topic", "description": "What to summarize", "required": true}])
    );
}

#[tokio::test]
async fn a_server_that_cannot_start_is_reported_and_the_run_goes_on() {
    let llm = ScriptedLlm::start(vec![Reply::text("I can still answer.")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        &llm.base_url(),
        "[mcp_servers.broken]\ncommand = \"/nonexistent/mcp-server\"\n",
    );
    let output = agentloop(dir.path(), &["run", "hi"]).await;
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(stdout(&output), "I can still answer.\n");
    let warning = stderr(&output);
    assert!(
        warning.contains("warning: MCP server broken is left out"),
        "{warning}"
    );
    assert!(warning.contains("/nonexistent/mcp-server"), "{warning}");
}

#[tokio::test]
async fn help_is_there_for_every_subcommand() {
    let dir = tempfile::tempdir().unwrap();
    for args in [&["--help"][..], &["run", "--help"], &["tools", "--help"]] {
        let output = agentloop(dir.path(), args).await;
        assert!(output.status.success());
        assert!(
            stdout(&output).contains("--config"),
            "{args:?}: {}",
            stdout(&output)
        );
    }
}

/// Runs `agentloop ARGS` in `dir` with `input` on stdin.
async fn agentloop_with_input(
    dir: &std::path::Path,
    args: &[&str],
    input: &str,
) -> std::process::Output {
    use std::io::Write;
    let mut child = common::command(dir)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap()
}

#[tokio::test]
async fn run_asks_for_approval_on_the_terminal() {
    for (typed, ran, answer) in [("y\n", 1, "Recorded."), ("n\n", 0, "Not recorded.")] {
        let llm = ScriptedLlm::start(vec![
            Reply::tool_call("test__record", json!({"note": "ship it"})),
            Reply::text(answer),
        ])
        .await;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("calls.jsonl");
        write_config(
            dir.path(),
            &llm.base_url(),
            &format!(
                "[tools.\"test.record\"]\nneeds_approval = true\n[mcp_servers.test.env]\nAGENTLOOP_TEST_MCP_LOG = \"{}\"\n",
                log.display()
            ),
        );
        let output = agentloop_with_input(dir.path(), &["run", "record it"], typed).await;
        assert!(output.status.success(), "{}", stderr(&output));
        let steps = stderr(&output);
        assert!(
            steps.contains("1 call waiting for your approval"),
            "{steps}"
        );
        assert!(
            steps.contains("approve test.record {\"note\":\"ship it\"}? [y/N]"),
            "{steps}"
        );
        assert_eq!(stdout(&output), format!("{answer}\n"));
        let executed = agentloop_test_support::mcp::read_test_mcp_log(&log);
        assert_eq!(executed.len(), ran, "{typed:?}: {executed:?}");
    }
}

#[tokio::test]
async fn run_asks_a_clarification_question_on_the_terminal() {
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("ask_user", json!({"question": "Which Alex do you mean?"})),
        Reply::text("Alex Kim says Q4 was strong."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "[agent]\nask_user = true\n");
    let output = agentloop_with_input(
        dir.path(),
        &["run", "What does Alex say about Q4?"],
        "Alex Kim\n",
    )
    .await;
    assert!(output.status.success(), "{}", stderr(&output));
    let steps = stderr(&output);
    assert!(steps.contains("? Which Alex do you mean?"), "{steps}");
    assert_eq!(stdout(&output), "Alex Kim says Q4 was strong.\n");
    // The answer reached the model as the result of its question.
    let requests = llm.requests();
    let answer = &requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()["content"];
    assert_eq!(answer, &json!(json!({"answer": "Alex Kim"}).to_string()));

    // Without an answer (end of input) the run stays paused and says how to answer it.
    let llm = ScriptedLlm::start(vec![Reply::tool_call(
        "ask_user",
        json!({"question": "Which Alex?"}),
    )])
    .await;
    write_config(dir.path(), &llm.base_url(), "[agent]\nask_user = true\n");
    let output = agentloop_with_input(dir.path(), &["run", "What does Alex say?"], "").await;
    assert!(!output.status.success());
    let steps = stderr(&output);
    assert!(steps.contains("stays paused"), "{steps}");
    assert!(steps.contains("/input"), "{steps}");
}

/// A line typed in the terminal while `agentloop run` works steers the run: it reaches the
/// model's next request. (`script` gives the run a terminal; piped input is only read at
/// prompts.)
#[tokio::test]
async fn a_line_typed_while_the_run_works_steers_it() {
    use std::io::Write;
    let llm = ScriptedLlm::start(vec![
        Reply::tool_call("test__sleep", serde_json::json!({"ms": 2500})),
        Reply::text("Steered."),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("calls.jsonl");
    common::write_test_config(
        dir.path(),
        &agentloop_test_support::config::TestConfig::new(&llm.base_url()).mcp_log(&log),
    );
    let binary = env!("CARGO_BIN_EXE_agentloop");
    let mut child = std::process::Command::new("script")
        .current_dir(dir.path())
        .env_remove("OPENAI_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("DATABASE_URL")
        .env_remove("AGENTLOOP_LOG")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("{binary} run 'steer me'"),
            "/dev/null",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    agentloop_test_support::mcp::wait_for_call(&log, "sleep").await;
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"only the open ones\n").unwrap();
    stdin.flush().unwrap();
    let output = tokio::task::spawn_blocking(move || {
        let output = child.wait_with_output().unwrap();
        drop(stdin);
        output
    })
    .await
    .unwrap();
    let shown = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "{shown}");
    assert!(shown.contains("Steered."), "{shown}");
    let requests = llm.requests();
    let last = requests.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(last.last().unwrap()["role"], "user");
    assert_eq!(last.last().unwrap()["content"], "only the open ones");
}

/// Under a limit of open files too low for one more connection, the LLM call fails saying which
/// limit to raise, never that the LLM is unreachable at a wrong `base_url`. The limit at which
/// the connection is the first thing to fail depends on how many files the process opened
/// before (its runtime, its store, the MCP server's pipes): every limit from ample to too low
/// for the process to start is tried.
#[tokio::test]
async fn a_connection_refused_for_want_of_open_files_says_which_limit_to_raise() {
    let llm = ScriptedLlm::start((0..60).map(|_| Reply::text("Fine.")).collect::<Vec<_>>()).await;
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &llm.base_url(), "");
    let mut told = Vec::new();
    for limit in (6..=60).rev() {
        let mut shell = std::process::Command::new("sh");
        common::clean_env(&mut shell);
        shell
            .current_dir(dir.path())
            .arg("-c")
            .arg(format!("ulimit -n {limit} && exec \"$0\" run hi"))
            .arg(env!("CARGO_BIN_EXE_agentloop"));
        let output = tokio::task::spawn_blocking(move || shell.output().unwrap())
            .await
            .unwrap();
        let error = stderr(&output);
        if error.contains("Too many open files") && error.contains("LLM") {
            assert!(
                error.contains("cannot open a connection to the LLM")
                    && error.contains("ulimit -n")
                    && !error.contains("llm.base_url"),
                "limit {limit}: {error}"
            );
            told.push(limit);
        }
    }
    assert!(
        !told.is_empty(),
        "no limit made the LLM's connection the one to fail"
    );
}
