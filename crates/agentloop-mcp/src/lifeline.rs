//! Whether a server still runs, and why not once it stopped: what lets calls to a dead server
//! fail at once with a useful message instead of waiting for a response that will never come.

use std::{sync::Arc, time::Duration};

use tokio::sync::watch;

use crate::stderr::StderrTail;

/// How long a report waits for the exit status and the last stderr lines of a server whose
/// output just closed; they normally arrive within milliseconds.
const DEATH_REPORT_PATIENCE: Duration = Duration::from_secs(2);

#[derive(Debug, Clone, PartialEq, Eq)]
enum Liveness {
    Running,
    /// Its output closed: it is exiting, and why is not known yet.
    Lost,
    /// It is gone, for the reason given (`it exited with status 1`).
    Gone(String),
}

#[derive(Debug)]
pub(crate) struct Lifeline {
    server: String,
    state: watch::Sender<Liveness>,
    stderr: Arc<StderrTail>,
}

impl Lifeline {
    pub(crate) fn new(server: &str, stderr: Arc<StderrTail>) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            state: watch::Sender::new(Liveness::Running),
            stderr,
        })
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    pub(crate) fn is_running(&self) -> bool {
        *self.state.borrow() == Liveness::Running
    }

    pub(crate) fn mark_lost(&self) {
        self.state.send_if_modified(|state| {
            let running = *state == Liveness::Running;
            if running {
                *state = Liveness::Lost;
            }
            running
        });
    }

    /// Records why the server is gone; the first reason wins.
    pub(crate) fn mark_gone(&self, why: impl Into<String>) {
        let why = why.into();
        self.state.send_if_modified(|state| {
            let known = matches!(state, Liveness::Gone(_));
            if !known {
                *state = Liveness::Gone(why);
            }
            !known
        });
    }

    /// Resolves once the server stops running.
    pub(crate) async fn stopped(&self) {
        let mut state = self.state.subscribe();
        let _ = state.wait_for(|state| *state != Liveness::Running).await;
    }

    /// Why the server stopped (waiting a little for its exit status when it just stopped) and the
    /// last lines of its stderr.
    pub(crate) async fn report(&self) -> DeathReport {
        let why = if self.is_running() {
            None
        } else {
            let mut state = self.state.subscribe();
            let gone = tokio::time::timeout(
                DEATH_REPORT_PATIENCE,
                state.wait_for(|state| matches!(state, Liveness::Gone(_))),
            )
            .await;
            match gone {
                Ok(Ok(state)) => match &*state {
                    Liveness::Gone(why) => Some(why.clone()),
                    _ => None,
                },
                _ => Some("its connection closed".to_owned()),
            }
        };
        DeathReport {
            why,
            stderr: self.stderr.last_lines(),
        }
    }

    /// What a call to the stopped server fails with.
    pub(crate) async fn unavailable_message(&self) -> String {
        let report = self.report().await;
        let mut message = format!(
            "MCP server '{}' is not running: {}",
            self.server,
            report.why()
        );
        if !report.stderr.is_empty() {
            message.push_str("; last stderr lines:");
            push_lines(&mut message, &report.stderr, "\n    ");
        }
        message
    }
}

/// What is known about a server that stopped or failed to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeathReport {
    why: Option<String>,
    stderr: Vec<String>,
}

impl DeathReport {
    /// Why the server stopped, in a few words (`it exited with status 3`).
    pub(crate) fn why(&self) -> &str {
        self.why.as_deref().unwrap_or("its connection closed")
    }

    /// The last lines of its stderr, oldest first.
    pub(crate) fn stderr(&self) -> &[String] {
        &self.stderr
    }

    /// The report without why the server stopped, for when agentloop itself stopped it.
    pub(crate) fn without_reason(self) -> Self {
        Self { why: None, ..self }
    }

    /// Indented lines to append to an error message; empty when nothing is known.
    pub(crate) fn as_details(&self) -> String {
        let mut details = String::new();
        if let Some(why) = &self.why {
            details.push_str("\n  ");
            details.push_str(why);
        }
        if !self.stderr.is_empty() {
            details.push_str("\n  last stderr lines:");
            push_lines(&mut details, &self.stderr, "\n    ");
        }
        details
    }
}

fn push_lines(text: &mut String, lines: &[String], separator: &str) {
    for line in lines {
        text.push_str(separator);
        text.push_str(line);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_first_reason_wins_and_reaches_the_message() {
        let lifeline = Lifeline::new("files", StderrTail::empty("files"));
        assert!(lifeline.is_running());

        lifeline.mark_lost();
        assert!(!lifeline.is_running());
        lifeline.mark_gone("it exited with status 1");
        lifeline.mark_gone("it was shut down");
        lifeline.mark_lost();

        lifeline.stopped().await;
        assert_eq!(
            lifeline.unavailable_message().await,
            "MCP server 'files' is not running: it exited with status 1"
        );
    }

    #[test]
    fn details_are_indented_lines_after_the_message() {
        let report = DeathReport {
            why: Some("it exited with status 1".to_owned()),
            stderr: vec!["boom".to_owned(), "bang".to_owned()],
        };
        assert_eq!(
            report.as_details(),
            "\n  it exited with status 1\n  last stderr lines:\n    boom\n    bang"
        );
        assert_eq!(
            report.without_reason().as_details(),
            "\n  last stderr lines:\n    boom\n    bang"
        );
        let nothing = DeathReport {
            why: None,
            stderr: Vec::new(),
        };
        assert_eq!(nothing.as_details(), "");
    }
}
