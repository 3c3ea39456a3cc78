//! Finding, and building when needed, the binaries of this crate: the test MCP server
//! (`agentloop-test-mcp`) and the scripted LLM as a process (`agentloop-scripted-llm`).
//!
//! Cargo builds a package's binaries only for that package's own integration tests, so tests of
//! other packages build them themselves, once per test process.

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
    time::SystemTime,
};

static BUILD: Mutex<()> = Mutex::new(());

/// The path of the built `agentloop-test-mcp` binary, next to the running test executable;
/// builds it first when it is missing or older than the sources of this crate.
pub fn test_mcp_server_path() -> PathBuf {
    binary_path("agentloop-test-mcp")
}

/// The path of the built `agentloop-scripted-llm` binary, the scripted LLM as a process of its
/// own; found or built like [`test_mcp_server_path`].
pub fn scripted_llm_path() -> PathBuf {
    binary_path("agentloop-scripted-llm")
}

/// The binary `name` of this crate in the running test executable's profile directory, built
/// first when it is missing or older than the sources of this crate.
#[allow(clippy::panic)]
fn binary_path(name: &str) -> PathBuf {
    let profile_dir = profile_dir();
    let binary = profile_dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    // The lock makes concurrent tests of one process wait for a single build.
    let _build = BUILD
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if is_stale(&binary) {
        if let Err(failure) = build(&profile_dir, name) {
            // A crate of the workspace being edited must not stop tests from using the binary
            // that was built before.
            if binary.is_file() {
                eprintln!("warning: {failure}; using the {name} built before");
                return binary;
            }
            panic!("{failure}");
        }
        if !binary.is_file() {
            panic!(
                "cargo built {name} but it is not at {}; is CARGO_TARGET_DIR or --target \
                 set differently for the tests?",
                binary.display()
            );
        }
    }
    binary
}

/// `target/<profile>` of the running test executable (`target/<profile>/deps/test-…`).
#[allow(clippy::panic)]
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap_or_else(|error| panic!("cannot locate the running test executable: {error}"));
    let mut dir = exe
        .parent()
        .unwrap_or_else(|| panic!("the test executable {} has no directory", exe.display()))
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

fn is_stale(binary: &Path) -> bool {
    let Some(built) = modified(binary) else {
        return true;
    };
    let sources = Path::new(env!("CARGO_MANIFEST_DIR"));
    newest_modification(&sources.join("src")).is_some_and(|newest| newest > built)
        || modified(&sources.join("Cargo.toml")).is_some_and(|changed| changed > built)
}

fn modified(path: &Path) -> Option<SystemTime> {
    path.metadata().and_then(|meta| meta.modified()).ok()
}

fn newest_modification(dir: &Path) -> Option<SystemTime> {
    let mut newest = modified(dir);
    for entry in std::fs::read_dir(dir).ok()?.flatten() {
        let path = entry.path();
        let candidate = if path.is_dir() {
            newest_modification(&path)
        } else {
            modified(&path)
        };
        newest = newest.max(candidate);
    }
    newest
}

fn build(profile_dir: &Path, name: &str) -> Result<(), String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command.current_dir(env!("CARGO_MANIFEST_DIR")).args([
        "build",
        "--quiet",
        "-p",
        "agentloop-test-support",
        "--bin",
        name,
    ]);
    if let Some(target_dir) = profile_dir.parent() {
        command.arg("--target-dir").arg(target_dir);
    }
    // Tests run from `target/debug` whether built by `cargo test` or `cargo build`.
    match profile_dir.file_name().and_then(|name| name.to_str()) {
        Some("debug") | None => {}
        Some(profile) => {
            command.args(["--profile", profile]);
        }
    }
    let status = command
        .status()
        .map_err(|error| format!("cannot run cargo to build {name}: {error}"))?;
    if !status.success() {
        return Err(format!(
            "`cargo build -p agentloop-test-support --bin {name}` failed ({status}); see its \
             output above"
        ));
    }
    Ok(())
}
