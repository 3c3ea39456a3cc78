//! A session with a server started as a child process, over its stdio; the process of the
//! moment, replaced when the server is restarted.

use std::{
    future::Future,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use agentloop_core::ToolError;
use rmcp::{Peer, RoleClient, ServiceError, ServiceExt, service::ClientInitializeError};

use crate::{
    McpError, McpServerConfig,
    client::{Client, Service},
    config::unusable_startup_timeout,
    lifeline::Lifeline,
    notices::Notices,
    process::{self, ChildTransport},
};

/// The link to the server's current process: the supervisor puts a new one in place of a dead
/// one, and calls always go to the one of the moment.
pub(crate) struct StdioSlot {
    slot: Mutex<Slot>,
}

struct Slot {
    link: Arc<StdioLink>,
    /// Set by shutdown: no new process may take the place of the old one after it.
    closed: bool,
}

impl StdioSlot {
    pub(crate) fn new(link: StdioLink) -> Self {
        Self {
            slot: Mutex::new(Slot {
                link: Arc::new(link),
                closed: false,
            }),
        }
    }

    pub(crate) fn current(&self) -> Arc<StdioLink> {
        self.lock().link.clone()
    }

    /// Puts the link to a restarted process in place; gives it back when the slot was closed
    /// meanwhile, for the caller to stop.
    pub(crate) fn replace(&self, link: Arc<StdioLink>) -> Result<(), Arc<StdioLink>> {
        let mut slot = self.lock();
        if slot.closed {
            return Err(link);
        }
        slot.link = link;
        Ok(())
    }

    /// Closes the slot and returns the link of the moment, to stop it.
    pub(crate) fn close(&self) -> Arc<StdioLink> {
        let mut slot = self.lock();
        slot.closed = true;
        slot.link.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Slot> {
        // Both fields are only ever replaced whole.
        self.slot.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

pub(crate) struct StdioLink {
    server: String,
    lifeline: Arc<Lifeline>,
    peer: Peer<RoleClient>,
    /// `None` once shut down.
    service: Mutex<Option<Service>>,
}

impl StdioLink {
    /// Performs the MCP handshake with a server whose process was just started; the caller
    /// bounds the time.
    pub(crate) async fn handshake(
        server: &str,
        transport: ChildTransport,
        lifeline: Arc<Lifeline>,
        notices: Notices,
        offer: Arc<crate::offer::ClientOffer>,
    ) -> Result<StdioLink, McpError> {
        match Client::new(server, notices, offer).serve(transport).await {
            Ok(service) => Ok(StdioLink {
                server: server.to_owned(),
                peer: service.peer().clone(),
                lifeline,
                service: Mutex::new(Some(service)),
            }),
            Err(error) => Err(McpError::Handshake {
                server: server.to_owned(),
                reason: describe_handshake_error(&error, lifeline.is_running()),
                details: lifeline.report().await.as_details(),
            }),
        }
    }

    pub(crate) fn lifeline(&self) -> &Arc<Lifeline> {
        &self.lifeline
    }

    pub(crate) fn is_running(&self) -> bool {
        self.lifeline.is_running()
    }

    /// Runs one request; fails at once when the server stops meanwhile.
    pub(crate) async fn run<T, F, Fut>(&self, request: F) -> Result<T, ToolError>
    where
        F: FnOnce(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        if !self.lifeline.is_running() {
            return Err(self.unavailable().await);
        }
        // rmcp only fails pending requests after its service loop has wound down, which can take
        // seconds; the lifeline knows the moment the server's output closes.
        let result = tokio::select! {
            result = request(self.peer.clone()) => result,
            () = self.lifeline.stopped() => return Err(self.unavailable().await),
        };
        match result {
            Ok(value) => Ok(value),
            Err(ServiceError::McpError(error)) => {
                Err(ToolError::Failed(error.message.into_owned()))
            }
            Err(_) if !self.lifeline.is_running() => Err(self.unavailable().await),
            Err(ServiceError::TransportClosed | ServiceError::TransportSend(_)) => {
                Err(self.unavailable().await)
            }
            Err(error) => Err(ToolError::Failed(format!(
                "the request to MCP server '{}' failed: {error}",
                self.server
            ))),
        }
    }

    async fn unavailable(&self) -> ToolError {
        ToolError::Unavailable(self.lifeline.unavailable_message().await)
    }

    /// Closes stdin, then terminates the server if it does not exit by itself.
    pub(crate) async fn shutdown(&self) {
        let service = self.lock_service().take();
        if let Some(mut service) = service {
            self.lifeline.mark_gone("it was shut down");
            if let Err(error) = service.close().await {
                tracing::debug!(server = %self.server, %error, "MCP client task failed while closing");
            }
        }
    }

    /// Dropping the rmcp service cancels it, which closes the transport and stops the child;
    /// calls through tools still held elsewhere must fail at once rather than wait for that.
    pub(crate) fn close_now(&self) {
        self.lifeline.mark_gone("it was shut down");
        drop(self.lock_service().take());
    }

    fn lock_service(&self) -> MutexGuard<'_, Option<Service>> {
        // The guarded value is only ever taken whole, so a poisoned lock holds nothing broken.
        self.service
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Starts the server's process and completes the MCP handshake within `startup_timeout_s`:
/// at the start, and for each restart.
pub(crate) async fn launch(
    name: &str,
    program: &str,
    config: &McpServerConfig,
    notices: Notices,
) -> Result<StdioLink, McpError> {
    let Some(timeout) = config.startup_timeout() else {
        return Err(unusable_startup_timeout(name).into());
    };
    let (transport, lifeline) = process::spawn(name, program, config)?;
    let handshake = StdioLink::handshake(
        name,
        transport,
        lifeline.clone(),
        notices,
        Arc::new(config.offer()),
    );
    match tokio::time::timeout(timeout, handshake).await {
        Ok(handshake) => handshake,
        Err(_elapsed) => Err(McpError::StartupTimeout {
            server: name.to_owned(),
            seconds: config.startup_timeout_s,
            // Stopped by the timeout itself: only its stderr can tell why it was slow.
            details: lifeline.report().await.without_reason().as_details(),
        }),
    }
}

fn describe_handshake_error(error: &ClientInitializeError, running: bool) -> String {
    if !running {
        // A broken pipe or a closed connection is only the symptom; the details say why.
        return "the server stopped before answering".to_owned();
    }
    match error {
        ClientInitializeError::TransportError { error, context } => {
            format!("cannot {context}: {}", error.error)
        }
        ClientInitializeError::ConnectionClosed(awaited) => {
            format!("the server closed the connection before sending its {awaited}")
        }
        ClientInitializeError::JsonRpcError(error) => {
            format!("the server refused to initialize: {}", error.message)
        }
        other => other.to_string(),
    }
}
