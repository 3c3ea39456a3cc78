//! Writing to stdout without a panic when the reader has gone (`agentloop tools --json | head
//! -1`).
//!
//! Rust starts every program with SIGPIPE ignored, so a write to a pipe whose reader closed
//! fails with `EPIPE` (`io::ErrorKind::BrokenPipe`) instead of killing the process; `println!`
//! turns that error into a panic (exit 101). Restoring the default SIGPIPE action would need
//! `unsafe` libc calls (the workspace denies `unsafe` outside the store's VFS) and would also
//! kill the process in the middle of a run, before it is saved. So every line for stdout goes
//! through [`outln!`], which returns the error, and `main` ends quietly with status 0 on a
//! broken pipe ([`is_broken_pipe`]): the reader wanted no more, which is not a failure of the
//! command (the shell's `cmd | head` works the same way with tools that die of SIGPIPE, except
//! that their status is 141).
//!
//! A run is different: it goes on after its output stops being read, and it holds its session.
//! `run` and `resume` watch for the reader going away ([`ReaderGone`]) and cancel the run at its
//! next safe point (see `commands::run`).

use tokio_util::sync::CancellationToken;

/// The exit status of a command whose stdout's reader went away before the command was done:
/// that of a program killed by SIGPIPE, as the shell reports it (128 + 13).
pub const READER_GONE_STATUS: u8 = 141;

/// `println!` that returns the `io::Result` instead of panicking: use it as `outln!(...)?`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// Whether `error` is, or was caused by, a write to a closed pipe.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|error| error.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Whether the reader of stdout has gone (the `head` of `agentloop run --json | head -1` read
/// its line and exited). Known at once on Unix, where a pipe whose reader closed says so
/// ([`ReaderGone::watch`]), and at the latest when a write fails with `EPIPE`
/// ([`ReaderGone::mark`]).
#[derive(Debug, Clone, Default)]
pub struct ReaderGone(CancellationToken);

impl ReaderGone {
    /// Starts watching stdout: a thread that waits, without a timeout, for stdout to report an
    /// error or a hang-up (a pipe or a socket whose reader closed). A terminal, a file or
    /// `/dev/null` never does, and the thread then waits until the process ends.
    pub fn watch() -> Self {
        let gone = Self::default();
        #[cfg(unix)]
        {
            let watched = gone.clone();
            let started = std::thread::Builder::new()
                .name("stdout-reader".into())
                .spawn(move || {
                    if reader_left() {
                        watched.mark();
                    }
                });
            if let Err(error) = started {
                tracing::debug!(%error, "cannot watch stdout; a closed pipe is seen when written");
            }
        }
        gone
    }

    /// The reader is gone: a write to stdout failed with `EPIPE`.
    pub fn mark(&self) {
        self.0.cancel();
    }

    pub fn is_gone(&self) -> bool {
        self.0.is_cancelled()
    }

    /// Waits until the reader is gone (forever if it stays).
    pub async fn gone(&self) {
        self.0.cancelled().await;
    }
}

/// Blocks until stdout reports that its reader left (`POLLERR` for a pipe without a reader,
/// `POLLHUP` for a socket or terminal hung up); false when it cannot tell.
#[cfg(unix)]
fn reader_left() -> bool {
    use rustix::event::{PollFd, PollFlags, poll};
    let stdout = std::io::stdout();
    loop {
        // No events asked for: poll reports only errors and hang-ups, which it always does.
        let mut fds = [PollFd::new(&stdout, PollFlags::empty())];
        match poll(&mut fds, None) {
            Ok(_) => {
                let events = fds[0].revents();
                if events.intersects(PollFlags::ERR | PollFlags::HUP) {
                    return true;
                }
                if events.contains(PollFlags::NVAL) {
                    return false;
                }
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(_) => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_found_under_context() {
        let error = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("printing the tools");
        assert!(is_broken_pipe(&error));
        let other = anyhow::Error::new(std::io::Error::from(std::io::ErrorKind::NotFound));
        assert!(!is_broken_pipe(&other));
    }

    #[test]
    fn a_reader_marked_gone_wakes_whoever_waits_for_it() {
        let gone = ReaderGone::default();
        assert!(!gone.is_gone());
        let waiting = gone.clone();
        gone.mark();
        assert!(waiting.is_gone());
        futures::executor::block_on(waiting.gone());
    }
}
