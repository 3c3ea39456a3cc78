//! `agentloop eval` as a user meets it: a case set against the scripted model and the built-in
//! MCP tools, passing and failing cases, the table, the exit code, JSON and `--compare`, and the
//! JUnit file read by a real JUnit parser (the Python `junitparser` package).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::path::Path;

use common::{agentloop, stderr, stdout};
use serde_json::Value;

const SCRIPT: &str = r#"
[[scenarios]]
when = "sum"
review = '{"pass": true, "reason": "it names the total"}'
[[scenarios.steps]]
tool_calls = [{ name = "demo.get-sum", arguments = { a = 2, b = 40 } }]
[[scenarios.steps]]
text = "The sum is 42."

[[scenarios]]
when = "echo"
review = '{"pass": false, "reason": "it does not say what was echoed back"}'
[[scenarios.steps]]
tool_calls = [{ name = "demo.echo", arguments = { text = "hi" } }]
[[scenarios.steps]]
text = "It said hi."

[[scenarios]]
when = "json"
[[scenarios.steps]]
text = '{"total": 42, "unit": "apples"}'
"#;

const CASES: &str = r#"
[[case]]
name = "sums"
question = "What is the sum of 2 and 40?"
[case.expect]
tools = ["demo.get-sum"]
arguments = { "demo.get-sum" = { a = "^2$", b = "^40$" } }
answer_contains = ["42"]
max_steps = 2

[[case]]
name = "echoes without summing"
question = "Please echo hi"
[case.expect]
tool_set = ["demo.echo"]
forbidden_tools = ["demo.get-sum"]
answer_matches = "said hi"

[[case]]
name = "json answer"
question = "Answer in json"
[case.expect]
output = { total = 42, unit = "apples" }
output_schema = { type = "object", required = ["total"] }
tools = []

[[case]]
name = "expects the wrong tool"
question = "What is the sum of 1 and 1?"
[case.expect]
tools = ["demo.echo"]
answer_contains = ["43"]

[[case]]
name = "a conversation"
conversation = ["echo this", "now the sum please"]
[case.expect]
tools = ["demo.echo", "demo.get-sum"]
answer_contains = ["42"]
max_steps = 4
"#;

fn setup(dir: &Path) {
    std::fs::write(dir.join("script.toml"), SCRIPT).unwrap();
    std::fs::write(dir.join("cases.toml"), CASES).unwrap();
    let binary = env!("CARGO_BIN_EXE_agentloop");
    std::fs::write(
        dir.join("agentloop.toml"),
        format!(
            "[llm]\nprovider = \"scripted\"\nmodel = \"scripted\"\nscript = \"script.toml\"\n\n\
             [mcp_servers.demo]\ncommand = {binary:?}\nargs = [\"demo-tools\"]\n"
        ),
    )
    .unwrap();
}

#[tokio::test]
async fn a_case_set_is_scored_in_a_table_and_fails_when_a_case_fails() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let output = agentloop(
        dir.path(),
        &["eval", "cases.toml", "--jobs", "3", "--junit", "junit.xml"],
    )
    .await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let table = stdout(&output);
    let row = |name: &str| {
        table
            .lines()
            .find(|line| line.starts_with(name))
            .unwrap_or_else(|| panic!("no row {name}: {table}"))
            .to_string()
    };
    for passing in [
        "sums",
        "echoes without summing",
        "json answer",
        "a conversation",
    ] {
        assert!(row(passing).contains(" pass "), "{table}");
    }
    let failing = row("expects the wrong tool");
    assert!(failing.contains("FAIL"), "{table}");
    assert!(
        failing.contains("expected [\"demo.echo\"] in this order"),
        "{failing}"
    );
    assert!(failing.contains("does not contain \"43\""), "{failing}");
    assert!(table.contains("4 of 5 cases passed"), "{table}");
    // The progress line named each case as it ended.
    assert_eq!(
        stderr(&output).matches("] ").count(),
        5,
        "{}",
        stderr(&output)
    );
    // The store of the configuration was not touched.
    assert!(!dir.path().join("agentloop.db").exists());

    // The JUnit file, read by a real JUnit parser.
    let Some(python) = agentloop_test_support::requires::python_with("junitparser") else {
        return;
    };
    let read = std::process::Command::new(python)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/eval/junit.py"))
        .arg(dir.path().join("junit.xml"))
        .output()
        .unwrap();
    assert!(
        read.status.success(),
        "{}",
        String::from_utf8_lossy(&read.stderr)
    );
    let cases: Value = serde_json::from_slice(&read.stdout).unwrap();
    let cases = cases.as_array().unwrap();
    assert_eq!(cases.len(), 5);
    let failed: Vec<&Value> = cases
        .iter()
        .filter(|case| case["passed"] == false)
        .collect();
    assert_eq!(failed.len(), 1, "{cases:?}");
    assert_eq!(failed[0]["name"], "expects the wrong tool");
    assert!(
        failed[0]["failures"][0]
            .as_str()
            .unwrap()
            .contains("in this order"),
        "{failed:?}"
    );
}

#[tokio::test]
async fn repeats_give_a_pass_rate_and_two_runs_compare() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let first = agentloop(
        dir.path(),
        &["eval", "cases.toml", "--repeat", "2", "--json"],
    )
    .await;
    assert_eq!(first.status.code(), Some(1), "{}", stderr(&first));
    let results: Value = serde_json::from_str(&stdout(&first)).unwrap();
    let results = results.as_array().unwrap();
    assert_eq!(results.len(), 5);
    assert!(
        results
            .iter()
            .all(|case| case["attempts"].as_array().unwrap().len() == 2)
    );
    let sums = &results[0]["attempts"][0]["seen"];
    assert_eq!(sums["calls"][0][0], "demo.get-sum");
    assert_eq!(sums["steps"], 2);
    std::fs::write(dir.path().join("a.json"), stdout(&first)).unwrap();

    // The expectation fixed: the case passes now, and the comparison says it changed.
    let fixed = CASES.replace(
        "tools = [\"demo.echo\"]\nanswer_contains = [\"43\"]",
        "tools = [\"demo.get-sum\"]",
    );
    assert_ne!(fixed, CASES);
    std::fs::write(dir.path().join("cases.toml"), fixed).unwrap();
    let second = agentloop(dir.path(), &["eval", "cases.toml", "--json"]).await;
    assert!(second.status.success(), "{}", stderr(&second));
    std::fs::write(dir.path().join("b.json"), stdout(&second)).unwrap();
    let compared = agentloop(dir.path(), &["eval", "--compare", "a.json", "b.json"]).await;
    assert!(compared.status.success(), "{}", stderr(&compared));
    let text = stdout(&compared);
    assert!(
        text.contains("expects the wrong tool: FAIL → pass (changed)"),
        "{text}"
    );
    assert!(text.contains("1 cases changed"), "{text}");
}

#[tokio::test]
async fn a_bad_case_file_is_refused_naming_the_case() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    std::fs::write(
        dir.path().join("bad.toml"),
        "[[case]]\nname = \"x\"\nquestion = \"q\"\n[case.expect]\nanswer_matches = \"(\"\n",
    )
    .unwrap();
    let output = agentloop(dir.path(), &["eval", "bad.toml"]).await;
    assert_eq!(output.status.code(), Some(2), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("case \"x\""),
        "{}",
        stderr(&output)
    );
}

#[tokio::test]
async fn a_stored_session_becomes_a_case_that_passes() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    let run = agentloop(dir.path(), &["run", "What is the sum of 2 and 40?"]).await;
    assert!(run.status.success(), "{}", stderr(&run));
    let session = stderr(&run)
        .lines()
        .find_map(|line| line.strip_prefix("session "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap()
        .to_string();
    let case = agentloop(dir.path(), &["eval", "--from-session", &session]).await;
    assert!(case.status.success(), "{}", stderr(&case));
    let text = stdout(&case);
    assert!(text.contains("demo.get-sum"), "{text}");
    assert!(text.contains("The sum is 42."), "{text}");
    std::fs::write(dir.path().join("from-use.toml"), &text).unwrap();
    let scored = agentloop(dir.path(), &["eval", "from-use.toml"]).await;
    assert!(
        scored.status.success(),
        "{}\n{}",
        stdout(&scored),
        stderr(&scored)
    );
    assert!(
        stdout(&scored).contains("1 of 1 cases passed"),
        "{}",
        stdout(&scored)
    );

    let unknown = agentloop(
        dir.path(),
        &[
            "eval",
            "--from-session",
            "0193a1b2-0000-7000-8000-000000000000",
        ],
    )
    .await;
    assert!(!unknown.status.success());
    assert!(
        stderr(&unknown).contains("no session"),
        "{}",
        stderr(&unknown)
    );
}

#[tokio::test]
async fn an_llm_judge_scores_the_answer_with_its_rubric_and_its_cost_apart() {
    let dir = tempfile::tempdir().unwrap();
    setup(dir.path());
    std::fs::write(
        dir.path().join("judged.toml"),
        "[[case]]\nname = \"judged sum\"\nquestion = \"What is the sum of 2 and 40?\"\n\
         [case.expect]\njudge = { rubric = \"Names the total\" }\n\n\
         [[case]]\nname = \"judged echo\"\nquestion = \"Please echo hi\"\n\
         [case.expect]\njudge = { rubric = \"Says what was echoed back\" }\n",
    )
    .unwrap();
    let output = agentloop(dir.path(), &["eval", "judged.toml"]).await;
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let table = stdout(&output);
    let row = |name: &str| {
        table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap()
            .to_string()
    };
    assert!(row("judged sum").contains(" pass "), "{table}");
    assert!(
        row("judged echo").contains("the judge: it does not say what was echoed back"),
        "{table}"
    );
    assert!(
        table.contains("the judge (not in the figures above): 2 calls"),
        "{table}"
    );

    let json = agentloop(dir.path(), &["eval", "judged.toml", "--json"]).await;
    let results: Value = serde_json::from_str(&stdout(&json)).unwrap();
    assert_eq!(results[0]["attempts"][0]["seen"]["judge"]["pass"], true);
    assert_eq!(
        results[0]["attempts"][0]["seen"]["judge"]["reason"],
        "it names the total"
    );
    assert_eq!(results[1]["attempts"][0]["seen"]["judge"]["pass"], false);
}
