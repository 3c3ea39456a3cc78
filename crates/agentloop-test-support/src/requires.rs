//! What a test needs that a bare machine (Rust and a C toolchain) lacks: PostgreSQL, Node.js,
//! npm packages, Chromium, PyPI. Each test that needs one starts with a gate:
//!
//! ```ignore
//! if !requires::postgres().await {
//!     return;
//! }
//! ```
//!
//! A gate looks once per process (the answer is kept) and returns whether the dependency is
//! there. When it is not, the test says so in one line on stderr, `skipped: <test> needs
//! <dependency>: <why, and how to get it>`, and returns early, so it passes. With
//! `AGENTLOOP_TEST_ALL=1` (CI sets it) the gate fails the test with that line instead: a
//! missing dependency there never passes unnoticed.
//!
//! The line goes to the process's stderr directly, not through `eprintln!`, which the test
//! harness captures and shows only for tests that fail.
#![allow(clippy::panic)] // test support: failing loudly is the point

use std::{
    collections::HashMap,
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    sync::{Mutex, OnceLock},
};

/// The variable that turns every skip into a failure.
pub const ALL_ENV: &str = "AGENTLOOP_TEST_ALL";
/// The variable naming the Chromium binary of the panel's browser tests.
pub const CHROMIUM_ENV: &str = "AGENTLOOP_CHROMIUM";
/// Where the panel's browser tests look for Chromium when [`CHROMIUM_ENV`] is unset.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

const GET_NODE: &str = "install Node.js with npm (`apt-get install nodejs npm` on Debian/Ubuntu, \
     `brew install node` on macOS), or put one first on PATH";
const GET_NODE_22: &str = "put a Node.js 22 or later first on PATH: `npm install --prefix DIR \
     node@22` installs one into DIR/node_modules/.bin (as .ci/run does)";

/// Whether every dependency must be there (`AGENTLOOP_TEST_ALL=1`).
pub fn all_required() -> bool {
    std::env::var(ALL_ENV).is_ok_and(|value| !value.is_empty() && value != "0")
}

/// The gate itself: `Some(value)` when `found` is, else the skip line (or, with
/// `AGENTLOOP_TEST_ALL=1`, a failure) naming `dependency` and `found`'s reason.
pub fn met<T>(dependency: &str, found: Result<T, String>) -> Option<T> {
    match found {
        Ok(value) => Some(value),
        Err(why) => {
            skip(dependency, &why);
            None
        }
    }
}

/// Says that the current test is skipped for want of `dependency`, or fails it with
/// `AGENTLOOP_TEST_ALL=1`.
pub fn skip(dependency: &str, why: &str) {
    match verdict(skip_line(&current_test(), dependency, why), all_required()) {
        Ok(line) => {
            let _ = writeln!(std::io::stderr().lock(), "{line}");
        }
        Err(failure) => panic!("{failure}"),
    }
}

/// The line to print when skipping, or the failure when every dependency is required.
fn verdict(line: String, all_required: bool) -> Result<String, String> {
    if all_required {
        let what = line.strip_prefix("skipped: ").unwrap_or(&line);
        Err(format!(
            "{what} ({ALL_ENV}=1: a missing dependency fails the test instead of skipping it)"
        ))
    } else {
        Ok(line)
    }
}

fn skip_line(test: &str, dependency: &str, why: &str) -> String {
    format!("skipped: {test} needs {dependency}: {why}")
}

/// The test's name: the harness runs each test on a thread named after it; a bench without
/// the harness runs on `main`, and is named after its binary.
fn current_test() -> String {
    match std::thread::current().name() {
        Some(name) if name != "main" => name.to_owned(),
        _ => std::env::args()
            .next()
            .as_deref()
            .map(Path::new)
            .and_then(Path::file_stem)
            .map(|stem| {
                let stem = stem.to_string_lossy();
                // cargo's `name-0123456789abcdef`
                match stem.rsplit_once('-') {
                    Some((name, hash)) if hash.chars().all(|c| c.is_ascii_hexdigit()) => {
                        name.to_owned()
                    }
                    _ => stem.into_owned(),
                }
            })
            .unwrap_or_else(|| "this test".to_owned()),
    }
}

/// A PostgreSQL for [`crate::postgres::TestSchema`]: the server at `DATABASE_URL` (default
/// `postgres://postgres@127.0.0.1:5432/test`), or a private cluster started from the
/// machine's PostgreSQL binaries.
/// A `DATABASE_URL` whose server answers but refuses the tests fails them: a mistake to fix.
pub async fn postgres() -> bool {
    let found = match crate::postgres::server().await {
        Ok(_) => Ok(()),
        Err(no) if no.misconfigured => panic!("{}", no.message),
        Err(no) => Err(no.message),
    };
    met("PostgreSQL", found).is_some()
}

/// The PostgreSQL server binaries (`initdb`, `pg_ctl`), for tests of the private cluster.
pub fn postgres_binaries() -> bool {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| crate::postgres::server_binaries().map(|_| ()));
    met("the PostgreSQL server binaries", found.clone()).is_some()
}

/// The version of `node` on PATH, looked for once.
fn node_version() -> Result<(u32, String), String> {
    static VERSION: OnceLock<Result<(u32, String), String>> = OnceLock::new();
    VERSION
        .get_or_init(|| {
            let output = Command::new("node")
                .arg("--version")
                .output()
                .map_err(|error| format!("no `node` runs from PATH ({error}): {GET_NODE}"))?;
            let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
            if !output.status.success() {
                return Err(format!(
                    "`node --version` failed ({}): {GET_NODE}",
                    output.status
                ));
            }
            let major = version
                .trim_start_matches('v')
                .split('.')
                .next()
                .and_then(|major| major.parse().ok())
                .ok_or_else(|| format!("`node --version` said {version:?}: {GET_NODE}"))?;
            Ok((major, version))
        })
        .clone()
}

/// Node.js (`node` on PATH), any version the project's npm packages accept (18 or later).
pub fn node() -> bool {
    node_at_least(18, GET_NODE)
}

/// Node.js 22 or later on PATH: the AI SDK's `ai` package wants it.
pub fn node_22() -> bool {
    node_at_least(22, GET_NODE_22)
}

fn node_at_least(major: u32, get: &str) -> bool {
    let found = node_version().and_then(|(found, version)| {
        if found >= major {
            Ok(())
        } else {
            Err(format!("`node` on PATH is {version}; {get}"))
        }
    });
    met(&format!("Node.js {major} or later"), found).is_some()
}

/// The npm packages of `dir` (its `package.json` and `package-lock.json`), with `package`
/// among them: installed by `npm ci` when `package` is not there yet, which needs npm and
/// the npm registry. Once per directory and process.
pub fn npm_packages(dir: &Path, package: &str) -> bool {
    static INSTALLED: Mutex<Option<HashMap<PathBuf, Result<(), String>>>> = Mutex::new(None);
    // Held while installing: the tests of a process wait for one `npm ci`.
    let mut installed = INSTALLED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let found = installed
        .get_or_insert_with(HashMap::new)
        .entry(dir.to_path_buf())
        .or_insert_with(|| npm_ci(dir, package))
        .clone();
    drop(installed);
    met(&format!("the npm package {package}"), found).is_some()
}

fn npm_ci(dir: &Path, package: &str) -> Result<(), String> {
    let marker = dir.join("node_modules").join(package).join("package.json");
    if marker.is_file() {
        return Ok(());
    }
    let output = Command::new("npm")
        .args(["ci", "--no-audit", "--no-fund"])
        .current_dir(dir)
        .output()
        .map_err(|error| {
            format!(
                "it is not installed in {} and npm does not run ({error}): {GET_NODE}",
                dir.display()
            )
        })?;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last: Vec<&str> = stderr.lines().rev().take(3).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        return Err(format!(
            "`npm ci` in {} failed ({}; it needs the npm registry once): {}",
            dir.display(),
            output.status,
            last.join(" / ")
        ));
    }
    if !marker.is_file() {
        return Err(format!(
            "`npm ci` in {} succeeded but {} is missing",
            dir.display(),
            marker.display()
        ));
    }
    Ok(())
}

/// The variable naming the Python interpreter whose packages the tests of Python clients use.
pub const PYTHON_ENV: &str = "AGENTLOOP_PYTHON";

/// A Python interpreter with the PyPI package `module` importable: `AGENTLOOP_PYTHON`, else
/// the virtual environment `.ci/run` makes (`~/.cache/agentloop-ci/python`, with the
/// official `openai` SDK and `pydantic`). Looked for once per module and process.
pub fn python_with(module: &str) -> Option<PathBuf> {
    static FOUND: Mutex<Option<HashMap<String, Result<PathBuf, String>>>> = Mutex::new(None);
    let mut found = FOUND
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let result = found
        .get_or_insert_with(HashMap::new)
        .entry(module.to_string())
        .or_insert_with(|| python_importing(module))
        .clone();
    drop(found);
    met(&format!("Python with the PyPI package {module}"), result)
}

fn python_importing(module: &str) -> Result<PathBuf, String> {
    let get = format!(
        "make the environment `.ci/run` makes (`python3 -m venv ~/.cache/agentloop-ci/python && \
         ~/.cache/agentloop-ci/python/bin/pip install {module}`), or name an interpreter with \
         {PYTHON_ENV}"
    );
    ci_python(PYTHON_ENV, "python", module, &get)
}

/// The Python named by `env`, else the interpreter of `.ci/run`'s virtual environment `venv`
/// (under `~/.cache/agentloop-ci/`), if it imports `module`; `get` says how to make it.
fn ci_python(env: &str, venv: &str, module: &str, get: &str) -> Result<PathBuf, String> {
    let python = match std::env::var_os(env) {
        Some(python) => PathBuf::from(python),
        None => {
            let cache = std::env::var_os("XDG_CACHE_HOME")
                .map(PathBuf::from)
                .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))
                .ok_or("neither XDG_CACHE_HOME nor HOME is set")?;
            cache.join("agentloop-ci").join(venv).join("bin/python")
        }
    };
    let output = Command::new(&python)
        .args(["-c", &format!("import {module}")])
        .output()
        .map_err(|error| format!("{} does not run ({error}): {get}", python.display()))?;
    if output.status.success() {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot import {module}: {get}",
            python.display()
        ))
    }
}

/// The official MCP reference servers: Node.js and their npm packages in `test-servers/`.
pub fn mcp_reference_servers() -> bool {
    let dir = crate::mcp::test_servers_dir();
    let dir = dir.canonicalize().unwrap_or(dir);
    node() && npm_packages(&dir, "@modelcontextprotocol/server-everything")
}

/// Chromium for the panel's browser tests: `AGENTLOOP_CHROMIUM`, else `/usr/bin/chromium`.
pub fn chromium() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        let path = std::env::var_os(CHROMIUM_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM));
        match Command::new(&path).arg("--version").output() {
            Ok(output) if output.status.success() => Ok(path),
            Ok(output) => Err(format!(
                "`{} --version` failed ({}): install it with `apt-get install -y chromium` \
                 (Debian/Ubuntu), or set {CHROMIUM_ENV} to a Chromium binary",
                path.display(),
                output.status
            )),
            Err(error) => Err(format!(
                "none runs at {} ({error}): install it with `apt-get install -y chromium` \
                 (Debian/Ubuntu), or set {CHROMIUM_ENV} to a Chromium binary",
                path.display()
            )),
        }
    });
    met("Chromium", found.clone())
}

/// The variable naming the Python whose `mcp` package (the official Python SDK) runs the
/// Python MCP test servers.
pub const MCP_PYTHON_ENV: &str = "AGENTLOOP_MCP_PYTHON";

const GET_MCP_PYTHON: &str = "make a venv with the official MCP Python SDK: `python3 -m venv \
     ~/.cache/agentloop-ci/mcp-python && ~/.cache/agentloop-ci/mcp-python/bin/pip install \
     mcp==2.3.0` (as .ci/run does), or name a Python that has it in AGENTLOOP_MCP_PYTHON";

/// A Python with the official MCP SDK (`mcp` 2.x, `mcp.server.mcpserver`): the one named by
/// [`MCP_PYTHON_ENV`], else `~/.cache/agentloop-ci/mcp-python/bin/python`. Looked for once.
pub fn mcp_python() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found = FOUND.get_or_init(|| {
        ci_python(
            MCP_PYTHON_ENV,
            "mcp-python",
            "mcp.server.mcpserver",
            GET_MCP_PYTHON,
        )
    });
    met("the MCP Python SDK", found.clone())
}

/// The variable that names a Python with the official A2A SDK (`a2a-sdk` 1.x).
pub const A2A_PYTHON_ENV: &str = "AGENTLOOP_A2A_PYTHON";

const GET_A2A_PYTHON: &str = "make a venv with the official A2A Python SDK: `python3 -m venv \
     ~/.cache/agentloop-ci/a2a && ~/.cache/agentloop-ci/a2a/bin/pip install a2a-sdk==1.3.0` (as \
     .ci/run does), or name a Python that has it in AGENTLOOP_A2A_PYTHON";

/// A Python with the official A2A SDK (`a2a.client`): the one named by [`A2A_PYTHON_ENV`],
/// else `~/.cache/agentloop-ci/a2a/bin/python`. Looked for once.
pub fn a2a_python() -> Option<PathBuf> {
    static FOUND: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let found =
        FOUND.get_or_init(|| ci_python(A2A_PYTHON_ENV, "a2a", "a2a.client", GET_A2A_PYTHON));
    met("the A2A Python SDK", found.clone())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_the_test_what_it_needs_and_why() {
        assert_eq!(
            skip_line("store::a_test", "PostgreSQL", "nothing answers"),
            "skipped: store::a_test needs PostgreSQL: nothing answers"
        );
    }

    #[test]
    fn a_test_is_named_after_its_thread() {
        let name = std::thread::Builder::new()
            .name("module::the_test".into())
            .spawn(current_test)
            .unwrap()
            .join()
            .unwrap();
        assert_eq!(name, "module::the_test");
    }

    #[test]
    fn what_is_there_passes_the_gate() {
        assert_eq!(met("air", Ok::<_, String>(7)), Some(7));
    }

    #[test]
    fn what_is_missing_skips_or_with_test_all_fails() {
        let line = skip_line("a_test", "unobtainium", "none");
        assert_eq!(verdict(line.clone(), false), Ok(line.clone()));
        let failure = verdict(line, true).unwrap_err();
        assert!(
            failure.contains("a_test needs unobtainium: none"),
            "{failure}"
        );
        assert!(failure.contains("AGENTLOOP_TEST_ALL=1"), "{failure}");
    }
}
