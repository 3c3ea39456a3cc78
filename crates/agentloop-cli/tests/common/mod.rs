//! Running the real `agentloop` binary the way a user does: in a directory of its own, with
//! none of the caller's agentloop or OpenAI environment.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

use std::{
    path::Path,
    process::{Command, Output},
};

use agentloop_test_support::config::TestConfig;

pub mod frontends;

/// `agentloop` in `dir`, with a clean environment, not started yet.
pub fn command(dir: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentloop"));
    command.current_dir(dir);
    clean_env(&mut command);
    command
}

/// Leaves out of `command`'s environment what would configure agentloop.
pub fn clean_env(command: &mut Command) {
    for name in [
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "DATABASE_URL",
        "AGENTLOOP_LISTEN",
        "AGENTLOOP_LOG",
    ] {
        command.env_remove(name);
    }
}

/// Runs `agentloop ARGS` in `dir` to its end (off the async runtime, which serves the test's
/// scripted LLM meanwhile).
pub async fn agentloop(dir: &Path, args: &[&str]) -> Output {
    let mut command = command(dir);
    command.args(args);
    tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap()
}

/// Writes `agentloop.toml` in `dir`: the LLM at `llm_url`, the test MCP server, and `extra`.
pub fn write_config(dir: &Path, llm_url: &str, extra: &str) {
    write_test_config(dir, &TestConfig::new(llm_url).extra(extra));
}

/// Writes `config` as `agentloop.toml` in `dir`.
pub fn write_test_config(dir: &Path, config: &TestConfig) {
    std::fs::write(dir.join("agentloop.toml"), config.toml()).unwrap();
}

pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// `agentloop serve --listen 127.0.0.1:0` in `dir`, started, with the address of its banner.
pub struct Served {
    pub child: std::process::Child,
    pub address: String,
    pub banner: String,
    pub stdout: std::io::BufReader<std::process::ChildStdout>,
    pub stderr: std::io::BufReader<std::process::ChildStderr>,
}

impl Served {
    pub fn start(dir: &Path) -> Served {
        Served::start_with(dir, &[])
    }

    /// Started with more arguments after `serve --listen 127.0.0.1:0`.
    pub fn start_with(dir: &Path, args: &[&str]) -> Served {
        Served::start_command(command(dir), args)
    }

    /// `command` (the binary: [`command`], with more environment; or a shell that `exec`s it
    /// with `"$@"`) given `serve --listen 127.0.0.1:0` and `args`.
    pub fn start_command(mut command: Command, args: &[&str]) -> Served {
        use std::io::BufRead;
        let mut child = command
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
        let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
        let mut banner = String::new();
        stderr.read_line(&mut banner).unwrap();
        let address = banner
            .split_whitespace()
            .find(|word| word.starts_with("http://"))
            .unwrap_or_else(|| panic!("no address in {banner:?}"))
            .to_string();
        Served {
            child,
            address,
            banner,
            stdout,
            stderr,
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGTERM and waits for the exit; returns the status and the rest of stderr.
    pub async fn terminate(mut self) -> (std::process::ExitStatus, String) {
        let terminated = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(terminated.success());
        tokio::task::spawn_blocking(move || {
            let status = self.child.wait().unwrap();
            let mut rest = String::new();
            std::io::Read::read_to_string(&mut self.stderr, &mut rest).unwrap();
            (status, rest)
        })
        .await
        .unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Makes a key for `user` in `dir`'s store; returns the key.
pub async fn create_key(dir: &Path, user: &str) -> String {
    let created = agentloop(dir, &["keys", "create", "--user", user]).await;
    assert!(created.status.success(), "{}", stderr(&created));
    stdout(&created).trim().to_string()
}
