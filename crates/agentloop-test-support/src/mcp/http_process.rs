//! The test MCP server over HTTP as a child process of a test: started, found by the URL it
//! prints, killed (like a crash) and started again on the same port, killed on drop.

use std::{
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use super::{LOG_ENV, TOKEN_ENV, test_mcp_server_path};

/// Far longer than the server takes to bind its port: a server that never says where it
/// listens fails the test instead of hanging it.
const STARTUP_PATIENCE: Duration = Duration::from_secs(60);

/// A running `agentloop-test-mcp --http`; dropping it kills the process.
#[derive(Debug)]
pub struct TestMcpHttp {
    child: Option<Child>,
    url: String,
    /// `host:port` actually bound, so that a restart takes the same port.
    addr: String,
    log: Option<PathBuf>,
    token: Option<String>,
}

/// Starts the test server over HTTP on a free port of 127.0.0.1, logging its calls to `log`
/// when given.
pub fn test_mcp_server_http(log: Option<&Path>) -> TestMcpHttp {
    TestMcpHttp::spawn("127.0.0.1:0", log, None)
}

impl TestMcpHttp {
    /// Starts the test server over HTTP on `addr` (`127.0.0.1:0` for a free port), logging its
    /// calls to `log` and requiring `Authorization: Bearer <token>` on every request when given.
    #[allow(clippy::panic)]
    pub fn spawn(addr: &str, log: Option<&Path>, token: Option<&str>) -> TestMcpHttp {
        let mut command = Command::new(test_mcp_server_path());
        command
            .args(["--http", addr])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        if let Some(log) = log {
            command.env(LOG_ENV, log);
        }
        if let Some(token) = token {
            command.env(TOKEN_ENV, token);
        }
        let mut child = command
            .spawn()
            .unwrap_or_else(|error| panic!("cannot start agentloop-test-mcp --http: {error}"));
        let url = match child.stdout.take().map(first_line) {
            Some(Ok(line)) if line.starts_with("http://") => line,
            Some(Ok(line)) => {
                let _ = child.kill();
                let _ = child.wait();
                panic!("agentloop-test-mcp --http {addr} printed {line:?} instead of its URL");
            }
            Some(Err(why)) => {
                let _ = child.kill();
                let status = child.wait();
                panic!("agentloop-test-mcp --http {addr} {why} (exit: {status:?}); see its stderr");
            }
            None => panic!("the stdout of agentloop-test-mcp was not captured"),
        };
        let bound = url
            .trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_owned();
        TestMcpHttp {
            child: Some(child),
            url,
            addr: bound,
            log: log.map(Path::to_path_buf),
            token: token.map(str::to_owned),
        }
    }

    /// The MCP endpoint, `http://127.0.0.1:PORT/mcp`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The `host:port` the server listens on.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// The pid of the server's process, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the server at once, like a crash: it forgets every session.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server and starts a new process on the same address, with the same log and
    /// token: to its clients, a server that restarted and forgot their sessions.
    pub fn restart(&mut self) {
        self.kill();
        let restarted = Self::spawn(&self.addr, self.log.as_deref(), self.token.as_deref());
        *self = restarted;
    }
}

impl Drop for TestMcpHttp {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The first line of `stdout`, read in a thread so that a silent server cannot hang the test;
/// the thread then drains the rest so that the server never blocks on a full pipe.
fn first_line(stdout: std::process::ChildStdout) -> Result<String, String> {
    let (sender, receiver) = mpsc::channel();
    std::thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        let mut line = String::new();
        let first = match reader.read_line(&mut line) {
            Ok(0) => Err("exited before printing its URL".to_owned()),
            Ok(_) => Ok(line.trim().to_owned()),
            Err(error) => Err(format!("could not be read: {error}")),
        };
        let _ = sender.send(first);
        let mut rest = String::new();
        while matches!(reader.read_line(&mut rest), Ok(n) if n > 0) {
            rest.clear();
        }
    });
    receiver
        .recv_timeout(STARTUP_PATIENCE)
        .unwrap_or_else(|_| Err(format!("did not print its URL within {STARTUP_PATIENCE:?}")))
}
