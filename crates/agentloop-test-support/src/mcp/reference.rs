//! The official MCP reference servers, installed from npm into `test-servers/` at the root of
//! the repository (`package.json` and `package-lock.json` pin their versions).

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::Mutex,
};

static INSTALL: Mutex<()> = Mutex::new(());

/// `test-servers/` at the root of the repository.
pub fn test_servers_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../test-servers")
}

/// The command and arguments starting `@modelcontextprotocol/server-everything` over stdio;
/// runs `npm ci` in `test-servers/` first when its packages are not installed.
pub fn reference_server_everything() -> (String, Vec<String>) {
    let entry = installed(Path::new(
        "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    ));
    (
        "node".to_owned(),
        vec![entry.to_string_lossy().into_owned(), "stdio".to_owned()],
    )
}

/// The command and arguments starting `@modelcontextprotocol/server-filesystem` over stdio,
/// allowed to work in `root` only.
pub fn reference_server_filesystem(root: &Path) -> (String, Vec<String>) {
    let entry = installed(Path::new(
        "node_modules/@modelcontextprotocol/server-filesystem/dist/index.js",
    ));
    (
        "node".to_owned(),
        vec![
            entry.to_string_lossy().into_owned(),
            root.to_string_lossy().into_owned(),
        ],
    )
}

/// The absolute path of `relative` under `test-servers/`, installing the packages if needed.
#[allow(clippy::panic)]
fn installed(relative: &Path) -> PathBuf {
    let dir = test_servers_dir();
    let dir = dir
        .canonicalize()
        .unwrap_or_else(|error| panic!("cannot find {}: {error}", dir.display()));
    let path = dir.join(relative);
    // The lock makes concurrent tests of one process wait for a single `npm ci`.
    let _install = INSTALL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    if !path.is_file() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .unwrap_or_else(|error| {
                panic!(
                    "cannot run `npm ci` in {} (are Node.js and npm installed?): {error}",
                    dir.display()
                )
            });
        if !status.success() {
            panic!(
                "`npm ci` in {} failed ({status}); the MCP reference servers are needed by this \
                 test",
                dir.display()
            );
        }
        if !path.is_file() {
            panic!(
                "`npm ci` in {} succeeded but {} is missing",
                dir.display(),
                path.display()
            );
        }
    }
    path
}
