//! What the user types in the terminal during `agentloop run`: at a prompt, the answer; while
//! the run works, a message that steers it (added before its next LLM call). Lines are read by
//! a thread of their own only when standard input is a terminal; piped input is read at the
//! prompts alone, as before, so that a script's answers are never taken for steering.

use std::io::{BufRead, IsTerminal};

use tokio::sync::mpsc;

pub struct Keyboard {
    /// Lines typed at the terminal; `None` when standard input is not one.
    lines: Option<mpsc::UnboundedReceiver<String>>,
}

impl Keyboard {
    pub fn new() -> Keyboard {
        if !std::io::stdin().is_terminal() {
            return Keyboard { lines: None };
        }
        let (sender, lines) = mpsc::unbounded_channel();
        std::thread::spawn(move || {
            for line in std::io::stdin().lock().lines() {
                let Ok(line) = line else { break };
                if sender.send(line).is_err() {
                    break;
                }
            }
        });
        Keyboard { lines: Some(lines) }
    }

    /// The next line, with its line end; empty at the end of input.
    pub async fn read_line(&mut self) -> anyhow::Result<String> {
        match &mut self.lines {
            Some(lines) => Ok(lines
                .recv()
                .await
                .map(|line| line + "\n")
                .unwrap_or_default()),
            None => {
                let line = tokio::task::spawn_blocking(|| {
                    let mut line = String::new();
                    std::io::stdin().lock().read_line(&mut line).map(|_| line)
                })
                .await??;
                Ok(line)
            }
        }
    }

    /// A line typed while the run works; never, when standard input is not a terminal.
    pub async fn typed(&mut self) -> Option<String> {
        match &mut self.lines {
            Some(lines) => lines.recv().await,
            None => std::future::pending().await,
        }
    }
}
