//! The limit on one message a server sends over stdio, and what happens past it.
//!
//! rmcp drops a line longer than its limit and goes on, so the call it answered waited for its
//! timeout, whose error then blamed the timeout. [`LineLimit`] sits between the server's stdout
//! and rmcp: it cuts such a line short, reads the rest without keeping it, and puts in its place
//! a JSON-RPC error for the request it answered, which names the limit and the size. The call
//! fails at once, as a tool error the model reads, and the connection stays up.

use std::{
    io,
    pin::Pin,
    task::{Context, Poll, ready},
};

use serde_json::json;
use tokio::io::{AsyncRead, ReadBuf};

use crate::{
    message_limit::{INTERNAL_ERROR, too_large},
    top_level::TopLevel,
};

/// How much is read from the server at a time.
const CHUNK: usize = 64 * 1024;

/// A server's stdout, whose lines past `limit` bytes are replaced by an error for the request
/// they answered (or dropped when they answer none). Memory stays bounded: nothing of the line
/// past the limit is kept.
pub(crate) struct LineLimit<R> {
    inner: R,
    input: Box<[u8]>,
    lines: Lines,
}

impl<R> LineLimit<R> {
    pub(crate) fn new(server: &str, inner: R, limit: usize) -> Self {
        Self {
            inner,
            input: vec![0; CHUNK].into_boxed_slice(),
            lines: Lines::new(server, limit),
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineLimit<R> {
    fn poll_read(
        self: Pin<&mut Self>,
        context: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.lines.hand_out(buf) {
                return Poll::Ready(Ok(()));
            }
            let mut read = ReadBuf::new(&mut this.input);
            ready!(Pin::new(&mut this.inner).poll_read(context, &mut read))?;
            let filled = read.filled();
            if filled.is_empty() {
                // The end of the output; an unfinished line is rmcp's to drop.
                return Poll::Ready(Ok(()));
            }
            this.lines.take(filled);
        }
    }
}

/// The bookkeeping of [`LineLimit`], apart from the reader so that it can borrow the input.
struct Lines {
    server: String,
    limit: usize,
    /// Bytes for rmcp, from `handed` on.
    output: Vec<u8>,
    handed: usize,
    /// Bytes of the current line so far, its newline not counted.
    length: usize,
    /// The current line went past the limit: the rest of it is read and counted, not kept.
    over: bool,
    /// The current line's top-level fields, for the id of the request it answers.
    fields: TopLevel,
}

impl Lines {
    fn new(server: &str, limit: usize) -> Self {
        Self {
            server: server.to_owned(),
            limit,
            output: Vec::with_capacity(CHUNK),
            handed: 0,
            length: 0,
            over: false,
            fields: TopLevel::default(),
        }
    }

    /// Copies what is ready into `buf`; false when nothing is.
    fn hand_out(&mut self, buf: &mut ReadBuf<'_>) -> bool {
        let ready = &self.output[self.handed..];
        if ready.is_empty() {
            self.output.clear();
            self.handed = 0;
            return false;
        }
        let count = ready.len().min(buf.remaining());
        buf.put_slice(&ready[..count]);
        self.handed += count;
        true
    }

    fn take(&mut self, mut input: &[u8]) {
        while !input.is_empty() {
            let newline = input.iter().position(|byte| *byte == b'\n');
            let (part, rest) = input.split_at(newline.map_or(input.len(), |at| at + 1));
            input = rest;
            self.fields.feed(part);
            let content = part.len() - usize::from(newline.is_some());
            if !self.over && self.length.saturating_add(content) > self.limit {
                // Ends the line rmcp holds: a piece of JSON it cannot read, which it ignores.
                self.over = true;
                self.output.push(b'\n');
            } else if !self.over {
                self.output.extend_from_slice(part);
            }
            self.length = self.length.saturating_add(content);
            if newline.is_some() {
                if self.over {
                    self.replace_line();
                }
                self.length = 0;
                self.over = false;
                self.fields = TopLevel::default();
            }
        }
    }

    /// Puts an error for the request the line answered in its place.
    fn replace_line(&mut self) {
        let size = self.length;
        let limit = self.limit;
        let server = &self.server;
        let Some(id) = self.fields.answered_id() else {
            tracing::warn!(
                server,
                size,
                limit,
                "MCP server sent a message over the limit that answers no request; it was dropped"
            );
            return;
        };
        tracing::warn!(
            server, size, limit, %id,
            "MCP server answered with a message over the limit; the call fails"
        );
        let message = too_large(server, size, limit);
        let error = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {"code": INTERNAL_ERROR, "message": message},
        });
        if let Ok(line) = serde_json::to_vec(&error) {
            self.output.extend_from_slice(&line);
            self.output.push(b'\n');
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    use tokio::io::AsyncReadExt;

    use super::*;

    /// Reads `input`, given in pieces of `piece` bytes as a pipe does, through a limit of
    /// `limit` bytes.
    async fn through(input: &[u8], piece: usize, limit: usize) -> String {
        let pieces = Pieces(input.chunks(piece).map(<[u8]>::to_vec).collect());
        let mut limited = LineLimit::new("files", pieces, limit);
        let mut output = Vec::new();
        let read = limited.read_to_end(&mut output).await;
        assert!(read.is_ok(), "{read:?}");
        String::from_utf8_lossy(&output).into_owned()
    }

    struct Pieces(std::collections::VecDeque<Vec<u8>>);

    impl AsyncRead for Pieces {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            if let Some(mut piece) = self.0.pop_front() {
                let count = piece.len().min(buf.remaining());
                buf.put_slice(&piece[..count]);
                if count < piece.len() {
                    self.0.push_front(piece.split_off(count));
                }
            }
            Poll::Ready(Ok(()))
        }
    }

    fn answer(id: &str, text: &str) -> String {
        format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{{"text":"{text}"}}}}"#)
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_unchanged() {
        let input = format!("{}\n{}\r\n\n", answer("1", "short"), answer("2", "also"));
        for piece in [1, 3, 7, 1000] {
            assert_eq!(through(input.as_bytes(), piece, 64).await, input);
        }
    }

    #[tokio::test]
    async fn an_answer_over_the_limit_becomes_an_error_for_its_request() {
        let long = "x".repeat(200);
        let over = answer("7", &long);
        let input = format!("{}\n{over}\n{}\n", answer("6", "a"), answer("8", "b"));
        for piece in [1, 5, 64, 1000] {
            let output = through(input.as_bytes(), piece, 100).await;
            let lines: Vec<&str> = output.lines().collect();
            assert_eq!(lines.len(), 4, "{output}");
            assert_eq!(lines[0], answer("6", "a"));
            // The line rmcp already holds, cut short: at most the limit.
            assert!(lines[1].len() <= 100, "{}", lines[1]);
            let error: Value = serde_json::from_str(lines[2]).unwrap();
            assert_eq!(error["id"], 7);
            assert_eq!(error["error"]["code"], INTERNAL_ERROR);
            let message = error["error"]["message"].as_str().unwrap();
            assert!(
                message.contains(&format!("{} bytes", over.len())),
                "{message}"
            );
            assert!(message.contains("limit of 100 bytes"), "{message}");
            assert_eq!(lines[3], answer("8", "b"));
        }
    }

    #[tokio::test]
    async fn the_id_is_found_wherever_it_stands() {
        // The TypeScript SDK writes the id last; ids may be strings with escapes.
        let long = "y".repeat(300);
        let input = format!(
            r#"{{"result":{{"text":"{long}","id":99,"nested":{{"id":5}}}},"jsonrpc":"2.0","id":"a\"b,c"}}"#
        ) + "\n";
        let output = through(input.as_bytes(), 13, 100).await;
        let error: Value = serde_json::from_str(output.lines().nth(1).unwrap()).unwrap();
        assert_eq!(error["id"], "a\"b,c");
    }

    #[tokio::test]
    async fn a_notification_over_the_limit_is_dropped() {
        let long = "z".repeat(300);
        let input = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"data":"{long}"}}}}"#
        ) + "\n"
            + &answer("1", "after")
            + "\n";
        let output = through(input.as_bytes(), 50, 100).await;
        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), 2, "{output}");
        assert!(lines[0].len() <= 100);
        assert_eq!(lines[1], answer("1", "after"));
    }
}
