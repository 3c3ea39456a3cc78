//! The stderr of a server: read so it never mixes into agentloop's terminal, logged at debug
//! level, and its last lines kept to explain a failure.

use std::{
    collections::VecDeque,
    sync::{Arc, Mutex, MutexGuard},
    time::Duration,
};

use tokio::{
    io::{AsyncBufReadExt, AsyncRead, BufReader},
    sync::watch,
};

/// How many of the last lines are kept for error messages.
const KEPT_LINES: usize = 20;
/// Longer lines are cut: a server dumping a blob on stderr must not flood an error message.
const MAX_LINE_CHARS: usize = 500;

#[derive(Debug)]
pub(crate) struct StderrTail {
    server: String,
    lines: Mutex<VecDeque<String>>,
    closed: watch::Sender<bool>,
}

impl StderrTail {
    /// A tail with nothing to read, for a child whose stderr could not be captured.
    pub(crate) fn empty(server: &str) -> Arc<Self> {
        let tail = Self::new(server);
        tail.closed.send_replace(true);
        tail
    }

    /// Reads `stream` until it closes, in a task of its own.
    pub(crate) fn spawn_reader<R>(server: &str, stream: R) -> Arc<Self>
    where
        R: AsyncRead + Unpin + Send + 'static,
    {
        let tail = Self::new(server);
        let reader = Arc::clone(&tail);
        tokio::spawn(async move { reader.read(stream).await });
        tail
    }

    fn new(server: &str) -> Arc<Self> {
        Arc::new(Self {
            server: server.to_owned(),
            lines: Mutex::new(VecDeque::with_capacity(KEPT_LINES)),
            closed: watch::Sender::new(false),
        })
    }

    async fn read<R: AsyncRead + Unpin>(&self, stream: R) {
        let mut reader = BufReader::new(stream);
        let mut buffer = Vec::new();
        loop {
            buffer.clear();
            match reader.read_until(b'\n', &mut buffer).await {
                Ok(0) => break,
                Ok(_) => self.push(&String::from_utf8_lossy(&buffer)),
                Err(error) => {
                    tracing::debug!(server = %self.server, %error, "cannot read MCP server stderr");
                    break;
                }
            }
        }
        self.closed.send_replace(true);
    }

    fn push(&self, raw: &str) {
        let line = raw.trim_end_matches(['\n', '\r']);
        tracing::debug!(server = %self.server, "stderr: {line}");
        let line: String = match line.char_indices().nth(MAX_LINE_CHARS) {
            Some((cut, _)) => format!("{}…", &line[..cut]),
            None => line.to_owned(),
        };
        let mut lines = self.lock();
        if lines.len() == KEPT_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// Waits a little for the stream to close, so that what a dying server wrote last is read
    /// before it is reported; a grandchild holding stderr open must not stall the report.
    pub(crate) async fn settle(&self, patience: Duration) {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(patience, closed.wait_for(|closed| *closed)).await;
    }

    pub(crate) fn last_lines(&self) -> Vec<String> {
        self.lock().iter().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<String>> {
        // A panic while holding the lock cannot leave the deque half-updated in a way that
        // matters for diagnostics, so a poisoned lock is still good to use.
        self.lines
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn keeps_the_last_lines_and_cuts_long_ones() {
        let mut text = String::new();
        for i in 0..30 {
            text.push_str(&format!("line {i}\r\n"));
        }
        text.push_str(&"x".repeat(MAX_LINE_CHARS + 10));
        let tail = StderrTail::spawn_reader("test", std::io::Cursor::new(text.into_bytes()));
        tail.settle(Duration::from_secs(5)).await;

        let lines = tail.last_lines();
        assert_eq!(lines.len(), KEPT_LINES);
        assert_eq!(lines[0], "line 11");
        assert_eq!(lines[KEPT_LINES - 2], "line 29");
        assert_eq!(lines[KEPT_LINES - 1].chars().count(), MAX_LINE_CHARS + 1);
    }
}
