//! The processes a wave runs against: `agentloop serve` (or the Python floor) and the scripted
//! LLM, killed when dropped so that a failing bench leaves nothing running.

use std::{
    io::{BufRead, BufReader},
    path::Path,
    process::{Child, Command, ExitStatus, Stdio},
    sync::{Arc, Mutex},
    time::Duration,
};

use agentloop_test_support::scripted_llm_path;

pub(crate) use crate::chaos::agentloop_command::agentloop;

/// A child process killed when dropped, so a failing bench leaves nothing running.
pub(crate) struct Process(pub(crate) Child);

impl Drop for Process {
    fn drop(&mut self) {
        if matches!(self.0.try_wait(), Ok(None)) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

pub(crate) fn start_llm(
    latency: Duration,
    tool_calls: usize,
    extra: &[String],
) -> (Process, String) {
    let mut child = Command::new(scripted_llm_path())
        .args(["--listen", "127.0.0.1:0", "--tool-calls"])
        .arg(tool_calls.to_string())
        .arg("--tool")
        .arg("test__echo")
        .arg("--latency-ms")
        .arg(latency.as_millis().to_string())
        .args(extra)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start agentloop-scripted-llm");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let base_url = line.trim().to_string();
    assert!(
        base_url.starts_with("http://"),
        "scripted LLM said {line:?}"
    );
    (Process(child), base_url)
}

/// `agentloop serve` on a free port, with an API key it made for the user `bench` (`--key-for`:
/// the only way to call a server on `sqlite::memory:`); its stderr is drained by a thread (a
/// full pipe would stall the server) and kept for the report.
pub(crate) struct Server {
    pub(crate) process: Process,
    pub(crate) address: String,
    pub(crate) key: String,
    pub(crate) stderr: Arc<Mutex<Vec<String>>>,
    pub(crate) reader: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    pub(crate) fn start(dir: &Path) -> Server {
        let mut command = agentloop(dir);
        command.args(["serve", "--listen", "127.0.0.1:0", "--key-for", "bench"]);
        Server::spawn(command)
    }

    /// A server started by `command`, which says where it listens on stderr (a word that
    /// starts with `http://`) and then prints an API key on stdout, as `agentloop serve` does.
    pub(crate) fn spawn(mut command: Command) -> Server {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|error| panic!("start {command:?}: {error}"));
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut address = None;
        let mut before = Vec::new();
        for line in lines.by_ref() {
            let line = line.unwrap();
            address = line
                .split_whitespace()
                .find(|word| word.starts_with("http://"))
                .map(str::to_string);
            before.push(line);
            if address.is_some() {
                break;
            }
        }
        let address = address.unwrap_or_else(|| panic!("{command:?} said {before:?}"));
        // The key follows on stdout once the server listens; the rest of stdout is drained.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut key = String::new();
        stdout.read_line(&mut key).unwrap();
        let key = key.trim().to_string();
        assert!(!key.is_empty(), "{command:?} printed no key: {before:?}");
        std::thread::spawn(move || std::io::copy(&mut stdout, &mut std::io::sink()));
        let stderr = Arc::new(Mutex::new(before));
        let kept = stderr.clone();
        let reader = std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                kept.lock().unwrap().push(line);
            }
        });
        Server {
            process: Process(child),
            address,
            key,
            stderr,
            reader: Some(reader),
        }
    }

    pub(crate) fn pid(&self) -> u32 {
        self.process.0.id()
    }

    /// SIGTERM, then the exit status and what the server wrote on stderr.
    pub(crate) fn stop(mut self) -> (ExitStatus, Vec<String>) {
        let sent = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -TERM failed");
        let status = self.process.0.wait().unwrap();
        if let Some(reader) = self.reader.take() {
            reader.join().unwrap();
        }
        let lines = std::mem::take(&mut *self.stderr.lock().unwrap());
        (status, lines)
    }
}
