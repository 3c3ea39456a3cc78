//! The server's child process, and the rmcp transport over its stdio that notices when it dies
//! and when it answers with more than one message may hold.

use std::{io, process::Stdio, sync::Arc, time::Duration};

use agentloop_core::short_of_resources;
use futures::future::Either;
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{Transport, async_rw::AsyncRwTransport},
};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::{
    McpError, McpServerConfig, lifeline::Lifeline, line_limit::LineLimit,
    message_limit::MAX_MESSAGE_BYTES, stderr::StderrTail,
};

/// How long a server whose output closed may take to exit before it is killed.
const EXIT_PATIENCE: Duration = Duration::from_secs(3);
/// How long a server whose transport was dropped may take to exit before it is killed: long
/// enough for one that is already exiting to report its own status.
const DROP_PATIENCE: Duration = Duration::from_millis(300);
/// How long to wait for the last stderr lines of a server that exited.
const STDERR_PATIENCE: Duration = Duration::from_millis(500);
/// How long a server being shut down may take to exit after its stdin closes, then after
/// SIGTERM, before it is killed (the MCP specification's sequence).
const SHUTDOWN_PATIENCE: Duration = Duration::from_secs(3);

/// Starts the server's process with its stdin and stdout piped to the returned transport and its
/// stderr captured.
pub(crate) fn spawn(
    server: &str,
    program: &str,
    config: &McpServerConfig,
) -> Result<(ChildTransport, Arc<Lifeline>), McpError> {
    let spawn_error = |reason: String| McpError::Spawn {
        server: server.to_owned(),
        command: program.to_owned(),
        reason,
    };
    if let Some(cwd) = &config.cwd
        && !cwd.is_dir()
    {
        // Checked here because the OS reports a missing working directory as a missing command.
        return Err(spawn_error(format!(
            "its working directory {} does not exist; check mcp_servers.{server}.cwd",
            cwd.display()
        )));
    }

    let mut command = Command::new(program);
    command.args(&config.args).envs(&config.env);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    // The last line of defence against orphans: whatever path drops the child kills it.
    command.kill_on_drop(true);

    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .map_err(|error| spawn_error(describe_spawn_error(server, program, &error)))?;
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(spawn_error(
            "its stdin and stdout could not be piped".to_owned(),
        ));
    };
    let stderr = match child.stderr.take() {
        Some(stream) => StderrTail::spawn_reader(server, stream),
        None => StderrTail::empty(server),
    };
    let process = ChildProcess {
        child,
        // rmcp's own limit is never reached: `LineLimit` ends a longer line first.
        transport: AsyncRwTransport::new_client(
            LineLimit::new(server, stdout, MAX_MESSAGE_BYTES),
            stdin,
        )
        .with_max_line_length(MAX_MESSAGE_BYTES.saturating_add(1)),
    };
    let lifeline = Lifeline::new(server, stderr.clone());
    let transport = ChildTransport {
        process: Some(process),
        lifeline: lifeline.clone(),
        stderr,
    };
    Ok((transport, lifeline))
}

fn describe_spawn_error(server: &str, command: &str, error: &io::Error) -> String {
    // The pipes to the child could not be made: not the command's fault.
    if let Some(advice) = short_of_resources(error) {
        return format!("cannot run command `{command}`: {error} ({advice})");
    }
    match error.kind() {
        io::ErrorKind::NotFound => format!(
            "command `{command}` was not found; check mcp_servers.{server}.command (is the \
             program installed and on PATH?)"
        ),
        io::ErrorKind::PermissionDenied => format!(
            "command `{command}` is not executable; check mcp_servers.{server}.command and the \
             file's permissions"
        ),
        _ => format!("cannot run command `{command}`: {error}"),
    }
}

/// The server's process and rmcp's transport over its stdio.
struct ChildProcess {
    child: Child,
    transport: AsyncRwTransport<RoleClient, LineLimit<ChildStdout>, ChildStdin>,
}

impl ChildProcess {
    /// Closes stdin, then escalates to SIGTERM and a kill if the server lingers. Dropped halfway,
    /// the child is killed (`kill_on_drop`).
    async fn shut_down(mut self) -> io::Result<()> {
        self.transport.close().await?;
        if exited_within(&mut self.child, SHUTDOWN_PATIENCE).await? {
            return Ok(());
        }
        #[cfg(unix)]
        if let Some(pid) = self
            .child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .and_then(rustix::process::Pid::from_raw)
        {
            if let Err(error) = rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
                tracing::debug!(%error, "cannot send SIGTERM to an MCP server");
            } else if exited_within(&mut self.child, SHUTDOWN_PATIENCE).await? {
                return Ok(());
            }
        }
        self.child.kill().await
    }
}

async fn exited_within(child: &mut Child, patience: Duration) -> io::Result<bool> {
    match tokio::time::timeout(patience, child.wait()).await {
        Ok(status) => status.map(|_| true),
        Err(_) => Ok(false),
    }
}

/// rmcp's transport over the server's stdio, plus what rmcp does not offer: noticing the moment
/// the server's output closes, reaping the process to learn why, telling the [`Lifeline`], and
/// failing a call whose answer is over the limit of one message ([`LineLimit`]).
pub(crate) struct ChildTransport {
    /// `None` once the server is gone or shut down.
    process: Option<ChildProcess>,
    lifeline: Arc<Lifeline>,
    stderr: Arc<StderrTail>,
}

impl ChildTransport {
    fn on_output_closed(&mut self) {
        self.lifeline.mark_lost();
        if let Some(process) = self.process.take() {
            // Reaped in a task of its own: `receive` is cancelled whenever another event wins the
            // service loop's select, and the exit status must not be lost with it.
            tokio::spawn(reap(
                process,
                self.lifeline.clone(),
                self.stderr.clone(),
                EXIT_PATIENCE,
                "it closed its output but did not exit, so it was killed",
            ));
        }
    }
}

impl Drop for ChildTransport {
    /// rmcp drops the transport without closing it when the handshake fails, often because the
    /// server already exited; reaping it here is what tells the user its exit status.
    fn drop(&mut self) {
        let Some(process) = self.process.take() else {
            return;
        };
        self.lifeline.mark_lost();
        // Without a runtime, dropping the process kills it (`kill_on_drop`), which is all that is
        // left to do.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(reap(
                process,
                self.lifeline.clone(),
                self.stderr.clone(),
                DROP_PATIENCE,
                "it was stopped",
            ));
        }
    }
}

/// Waits for the process to exit, killing it after `patience`, and tells the lifeline why it is
/// gone once its last stderr lines are in.
async fn reap(
    process: ChildProcess,
    lifeline: Arc<Lifeline>,
    stderr: Arc<StderrTail>,
    patience: Duration,
    killed: &'static str,
) {
    let ChildProcess {
        mut child,
        transport,
    } = process;
    drop(transport);
    let why = match tokio::time::timeout(patience, child.wait()).await {
        Ok(Ok(status)) => describe_exit(status),
        Ok(Err(error)) => format!("its exit status is unknown ({error})"),
        Err(_) => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            killed.to_owned()
        }
    };
    stderr.settle(STDERR_PATIENCE).await;
    tracing::debug!(server = %lifeline.server(), "MCP server stopped: {why}");
    lifeline.mark_gone(why);
}

fn describe_exit(status: std::process::ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("it exited with status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("it was killed by signal {signal}");
        }
    }
    format!("it exited ({status})")
}

impl Transport<RoleClient> for ChildTransport {
    type Error = io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        match self.process.as_mut() {
            Some(process) => Either::Left(process.transport.send(item)),
            None => Either::Right(std::future::ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the MCP server process is gone",
            )))),
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.process.as_mut()?.transport.receive().await;
        if message.is_none() {
            self.on_output_closed();
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let Some(process) = self.process.take() else {
            return Ok(());
        };
        self.lifeline.mark_gone("it was shut down");
        process.shut_down().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_command_that_cannot_start_says_what_to_check() {
        let missing = describe_spawn_error("files", "npx", &io::ErrorKind::NotFound.into());
        assert!(missing.contains("mcp_servers.files.command"), "{missing}");
        // Out of open files for the pipes to the child: the limit, not the command.
        let shortage = describe_spawn_error("files", "npx", &io::Error::from_raw_os_error(24));
        assert!(shortage.contains("ulimit -n"), "{shortage}");
        assert!(
            !shortage.contains("mcp_servers.files.command"),
            "{shortage}"
        );
    }
}
