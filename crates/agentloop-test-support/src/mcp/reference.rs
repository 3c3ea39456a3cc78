//! The official MCP reference servers, installed from npm into `test-servers/` at the root of
//! the repository (`package.json` and `package-lock.json` pin their versions).

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::{Mutex, mpsc},
    time::Duration,
};

static INSTALL: Mutex<()> = Mutex::new(());

/// Far longer than Node.js takes to start the server: one that never listens fails the test
/// instead of hanging it.
const HTTP_STARTUP_PATIENCE: Duration = Duration::from_secs(60);

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

/// `@modelcontextprotocol/server-everything` over streamable HTTP, as a child process of the
/// test; dropping it kills the process.
#[derive(Debug)]
pub struct ReferenceHttpServer {
    child: Option<Child>,
    port: u16,
}

impl ReferenceHttpServer {
    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Kills the server and starts a new process on the same port: to its clients, a server
    /// that restarted and forgot their sessions.
    pub fn restart(&mut self) {
        self.kill();
        self.child = Some(spawn_everything_http(self.port));
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for ReferenceHttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Starts `@modelcontextprotocol/server-everything` over streamable HTTP on a free port and
/// waits until it listens; runs `npm ci` first like [`reference_server_everything`].
#[allow(clippy::panic)]
pub fn reference_server_everything_http() -> ReferenceHttpServer {
    // The server takes its port from the environment only, so a free one is found first; the
    // moment between closing it here and the server binding it is the only race.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .unwrap_or_else(|error| panic!("cannot find a free port: {error}"));
    ReferenceHttpServer {
        child: Some(spawn_everything_http(port)),
        port,
    }
}

#[allow(clippy::panic)]
fn spawn_everything_http(port: u16) -> Child {
    let (node, mut args) = reference_server_everything();
    args.truncate(1);
    args.push("streamableHttp".to_owned());
    let mut child = Command::new(node)
        .args(&args)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        // It logs every request on stdout; nobody reads it.
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|error| panic!("cannot start server-everything with node: {error}"));
    let listening = match child.stderr.take() {
        Some(stderr) => wait_for_listening(stderr),
        None => Err("its stderr was not captured".to_owned()),
    };
    if let Err(why) = listening {
        let _ = child.kill();
        let _ = child.wait();
        panic!("server-everything over HTTP on port {port} did not start: {why}");
    }
    child
}

/// Waits for the line announcing the port, in a thread so that a silent server cannot hang the
/// test; the thread then drains stderr so that the server never blocks on a full pipe.
fn wait_for_listening(stderr: std::process::ChildStderr) -> Result<(), String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut waiting = Some(sender);
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { break };
            if waiting.is_none() {
                continue;
            }
            if line.contains("MCP Streamable HTTP Server listening on port") {
                if let Some(sender) = waiting.take() {
                    let _ = sender.send(Ok(()));
                }
            } else {
                seen.push(line);
            }
        }
        if let Some(sender) = waiting {
            let _ = sender.send(Err(format!("it exited; its stderr: {seen:?}")));
        }
    });
    receiver
        .recv_timeout(HTTP_STARTUP_PATIENCE)
        .unwrap_or_else(|_| {
            Err(format!(
                "it did not listen within {HTTP_STARTUP_PATIENCE:?}"
            ))
        })
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
