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
/// once per bench, not once per wave.
fn python() -> &'static Path {
    static PYTHON: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PYTHON.get_or_init(python_with_httpx)
}

fn python_with_httpx() -> PathBuf {
    let venv = Path::new(env!("CARGO_TARGET_TMPDIR")).join("floor-venv");
    let python = venv.join("bin/python");
    let has_httpx = |python: &Path| {
        Command::new(python)
            .args(["-c", "import httpx"])
            .status()
            .is_ok_and(|status| status.success())
    };
    if has_httpx(&python) {
        return python;
    }
    println!("the floor: installing {HTTPX} into {}", venv.display());
    let made = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&venv)
        .status()
        .expect("python3, to run the Python floor (--floor)");
    assert!(made.success(), "python3 -m venv {} failed", venv.display());
    let installed = Command::new(venv.join("bin/pip"))
        .args(["install", "--quiet", "--disable-pip-version-check", HTTPX])
        .status()
        .expect("the virtual environment's pip");
    assert!(
        installed.success(),
        "pip install {HTTPX} failed: the floor needs PyPI once (or that package in {})",
        venv.display()
    );
    assert!(
        has_httpx(&python),
        "httpx is not importable after pip install"
    );
    python
}

/// The floor serving on a free port, calling the scripted LLM at `llm_url`.
pub(super) fn command(llm_url: &str, model: &str) -> Command {
    let mut command = Command::new(python());
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
