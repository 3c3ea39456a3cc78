//! The floor the performance issue measures agentloop against: an agent loop written by hand in
//! Python with httpx, no framework (`floor.py`), serving the bench's runs on the same machine,
//! with the same scripted LLM, in the same invocation (`--floor`). Its tools run in its own
//! process and it saves nothing: what any agent costs at least in Python.
//!
//! httpx is installed, pinned, into a virtual environment of its own under cargo's target
//! directory the first time (PyPI; a few seconds), and used from there afterwards.

use std::path::{Path, PathBuf};

use super::*;

/// The httpx the floor is measured with.
const HTTPX: &str = "httpx==0.28.1";

/// The floor's script, next to this file.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/load/floor.py")
}

/// A Python with httpx: the bench's own virtual environment, made on first use, and looked for
/// once per bench, not once per wave; or why there is none.
fn python() -> Result<&'static Path, String> {
    static PYTHON: std::sync::OnceLock<Result<PathBuf, String>> = std::sync::OnceLock::new();
    PYTHON
        .get_or_init(python_with_httpx)
        .as_deref()
        .map_err(Clone::clone)
}

/// Whether the floor can run: Python 3 with httpx (from PyPI, the first time).
pub(super) fn available() -> Result<(), String> {
    python().map(|_| ())
}

fn python_with_httpx() -> Result<PathBuf, String> {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("floor-venv");
    let python = venv.join("bin/python");
    let has_httpx = |python: &Path| {
        Command::new(python)
            .args(["-c", "import httpx"])
            .status()
            .is_ok_and(|status| status.success())
    };
    if has_httpx(&python) {
        return Ok(python);
    }
    println!("the floor: installing {HTTPX} into {}", venv.display());
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .map_err(|error| {
            format!(
                "python3 does not run ({error}): install Python 3 with its venv module \
                 (`apt-get install python3-venv` on Debian/Ubuntu)"
            )
        })?;
    if !made.success() {
        return Err(format!(
            "`python3 -m venv {}` failed ({made}): install Python's venv module \
             (`apt-get install python3-venv` on Debian/Ubuntu)",
            venv.display()
        ));
    }
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", HTTPX])
        .status()
        .map_err(|error| format!("the virtual environment's pip does not run: {error}"))?;
    if !installed.success() || !has_httpx(&python) {
        return Err(format!(
            "`pip install {HTTPX}` failed ({installed}): the floor needs PyPI once (or that \
             package in {})",
            venv.display()
        ));
    }
    Ok(python)
}

/// The floor serving on a free port, calling the scripted LLM at `llm_url`.
pub(super) fn command(llm_url: &str, model: &str) -> Command {
    let python = python().unwrap_or_else(|why| panic!("the Python floor: {why}"));
    let mut command = Command::new(python);
    command.arg(script()).args([
        "--llm",
        llm_url,
        "--model",
        model,
        "--listen",
        "127.0.0.1:0",
    ]);
    command
}
