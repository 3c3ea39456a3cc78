//! The server's child process, and the rmcp transport over its stdio that notices when it dies.

use std::{io, process::Stdio, sync::Arc, time::Duration};

use agentloop_core::short_of_resources;
use futures::future::Either;
use rmcp::{
    RoleClient,
    service::{RxJsonRpcMessage, TxJsonRpcMessage},
    transport::{TokioChildProcess, Transport},
};
use tokio::process::Command;

use crate::{McpError, McpServerConfig, lifeline::Lifeline, stderr::StderrTail};

/// How long a server whose output closed may take to exit before it is killed.
const EXIT_PATIENCE: Duration = Duration::from_secs(3);
/// How long a server whose transport was dropped may take to exit before it is killed: long
/// enough for one that is already exiting to report its own status.
const DROP_PATIENCE: Duration = Duration::from_millis(300);
/// How long to wait for the last stderr lines of a server that exited.
const STDERR_PATIENCE: Duration = Duration::from_millis(500);

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

    let (process, stderr) = TokioChildProcess::builder(command)
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|error| spawn_error(describe_spawn_error(server, program, &error)))?;
    let stderr = match stderr {
        Some(stream) => StderrTail::spawn_reader(server, stream),
        None => StderrTail::empty(server),
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

/// rmcp's child-process transport, plus what rmcp does not offer: noticing the moment the
/// server's output closes, reaping the process to learn why, and telling the [`Lifeline`].
pub(crate) struct ChildTransport {
    /// `None` once the server is gone or shut down.
    process: Option<TokioChildProcess>,
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
    process: TokioChildProcess,
    lifeline: Arc<Lifeline>,
    stderr: Arc<StderrTail>,
    patience: Duration,
    killed: &'static str,
) {
    let why = match process.into_inner() {
        Some(mut child) => match tokio::time::timeout(patience, child.wait()).await {
            Ok(Ok(status)) => describe_exit(status),
            Ok(Err(error)) => format!("its exit status is unknown ({error})"),
            Err(_) => {
                let _ = child.start_kill();
                let _ = child.wait().await;
                killed.to_owned()
            }
        },
        None => "its process is gone".to_owned(),
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
            Some(process) => Either::Left(process.send(item)),
            None => Either::Right(std::future::ready(Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "the MCP server process is gone",
            )))),
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let message = self.process.as_mut()?.receive().await;
        if message.is_none() {
            self.on_output_closed();
        }
        message
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        let Some(mut process) = self.process.take() else {
            return Ok(());
        };
        self.lifeline.mark_gone("it was shut down");
        // Closes stdin, then escalates to SIGTERM and SIGKILL if the server lingers.
        process.graceful_shutdown().await
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
