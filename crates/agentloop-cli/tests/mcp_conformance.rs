//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned in
//! `tests/mcp-conformance/`), client mode, against agentloop itself: for each client scenario
//! the suite starts its server and runs `tests/mcp-conformance/client.sh URL`, which writes a
//! configuration naming the server and a scripted model that calls the scenario's tool, then
//! runs `agentloop run` (the built binary). The suite's checks (`checks.json`) decide.
//!
//! The scenarios that pass today must pass; the known failures must still fail, each with its
//! reason: when one starts passing, move it to [`PASSING`] (and to the table of
//! docs/mcp-servers.md and the README).
//!
//! Needs Node.js 22 and the npm package (installed into `tests/mcp-conformance/` on first use,
//! `npm ci`, as `.ci/run` does); skipped, saying so, without them (a failure with
//! `AGENTLOOP_TEST_ALL=1`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use agentloop_test_support::requires;
use serde_json::Value;

/// Client scenarios agentloop passes. The `auth/*` ones authorize with OAuth through
/// `[mcp_servers.conformance.oauth] interactive = false` (the suite's authorization server
/// approves at once), as `client.sh` configures them.
const PASSING: [&str; 22] = [
    "elicitation-sep1034-client-defaults",
    "initialize",
    "tools_call",
    "sse-retry",
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/2025-03-26-oauth-endpoint-fallback",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
    "auth/client-credentials-basic",
];

/// Client scenarios agentloop passes too, but not on their own: a client that does not
/// authorize at all passes them as well.
const PASSING_ALSO: [&str; 1] = [
    // A client must not authorize against a server whose metadata names another resource:
    // rmcp's discovery refuses the document.
    "auth/resource-mismatch",
];

/// Client scenarios agentloop fails today, and why.
const KNOWN_FAILURES: [(&str, &str); 3] = [
    (
        "auth/2025-03-26-oauth-metadata-backcompat",
        "the suite's 2025-03-26 server serves its metadata at the root with the issuer \
         `/oauth`: rmcp refuses metadata whose issuer is not the URL it was discovered at \
         (RFC 8414 section 3.3), and agentloop keeps that check",
    ),
    (
        "auth/client-credentials-jwt",
        "private_key_jwt needs rmcp's `auth-client-credentials-jwt` feature, whose futures are \
         not Send in rmcp 3.9.0 (they hold a form serializer across an await)",
    ),
    (
        "auth/cross-app-access-complete-flow",
        "the enterprise identity assertion flow (SEP-990) needs rmcp's \
         `auth-enterprise-managed` feature and identity-provider settings agentloop does not \
         have yet",
    ),
];

/// Checks that measure time (the suite's own): on a loaded machine a reconnection a little
/// late is a warning, not a failure of agentloop's.
const TIMING_CHECKS: [&str; 1] = ["client-sse-retry-timing"];

#[test]
fn the_official_conformance_suite_client_scenarios() {
    if !requires::node_22() {
        return;
    }
    let Some(dir) =
        common::frontends::npm_package("mcp-conformance", "@modelcontextprotocol/conformance")
    else {
        return;
    };
    let listed = list_client_scenarios(&dir);
    let mut known: Vec<&str> = PASSING.to_vec();
    known.extend(PASSING_ALSO);
    known.extend(KNOWN_FAILURES.iter().map(|(scenario, _)| *scenario));
    let mut unknown: Vec<&String> = listed
        .iter()
        .filter(|scenario| !known.contains(&scenario.as_str()))
        .collect();
    unknown.sort();
    assert!(
        unknown.is_empty(),
        "the suite has client scenarios this test does not list: {unknown:?}"
    );

    let out = tempfile::tempdir().unwrap();
    let mut wrong = Vec::new();
    for scenario in PASSING.into_iter().chain(PASSING_ALSO) {
        let failed = run_scenario(&dir, out.path(), scenario);
        println!("{scenario}: {}", verdict(&failed));
        if !failed.is_empty() {
            wrong.push(format!("{scenario} should pass: {}", failed.join("; ")));
        }
    }
    for (scenario, reason) in KNOWN_FAILURES {
        let failed = run_scenario(&dir, out.path(), scenario);
        println!("{scenario}: {} (known: {reason})", verdict(&failed));
        if failed.is_empty() {
            wrong.push(format!(
                "{scenario} passes now: move it from KNOWN_FAILURES to PASSING (and the docs)"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

fn verdict(failed: &[String]) -> String {
    if failed.is_empty() {
        "passed".to_owned()
    } else {
        format!("failed ({})", failed.join("; "))
    }
}

/// The client scenarios the pinned suite lists.
fn list_client_scenarios(dir: &Path) -> Vec<String> {
    let output = Command::new(conformance(dir)).arg("list").output().unwrap();
    assert!(output.status.success(), "conformance list failed");
    let text = String::from_utf8_lossy(&output.stdout);
    text.lines()
        .skip_while(|line| !line.starts_with("Client scenarios"))
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// Runs `scenario` with agentloop as its client; the checks it failed (empty: it passed).
fn run_scenario(dir: &Path, out: &Path, scenario: &str) -> Vec<String> {
    let results = out.join(scenario.replace('/', "_"));
    let client = format!("sh {}", dir.join("client.sh").display());
    let mut command = Command::new(conformance(dir));
    command
        .args(["client", "--command", &client, "--scenario", scenario, "-o"])
        .arg(&results)
        .env("AGENTLOOP", env!("CARGO_BIN_EXE_agentloop"));
    common::clean_env(&mut command);
    let output = command.output().unwrap();
    let Some(checks) = find_checks(&results) else {
        panic!(
            "{scenario}: the suite saved no checks ({}):\n{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        );
    };
    let checks: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(checks).unwrap()).unwrap();
    assert!(!checks.is_empty(), "{scenario}: no checks");
    checks
        .iter()
        .filter(|check| match check["status"].as_str() {
            Some("FAILURE") => true,
            Some("WARNING") => !TIMING_CHECKS.contains(&check["id"].as_str().unwrap_or_default()),
            _ => false,
        })
        .map(|check| {
            let id = check["id"].as_str().unwrap_or_default();
            match check["errorMessage"].as_str() {
                Some(message) => format!("{id}: {message}"),
                None => id.to_owned(),
            }
        })
        .collect()
}

/// The suite's binary in `dir`.
fn conformance(dir: &Path) -> PathBuf {
    dir.join("node_modules").join(".bin").join("conformance")
}

/// The `checks.json` under `results` (the suite names its folder with the time).
fn find_checks(results: &Path) -> Option<PathBuf> {
    let mut dirs = vec![results.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|name| name == "checks.json") {
                return Some(path);
            }
        }
    }
    None
}
