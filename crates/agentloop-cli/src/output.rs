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
}
