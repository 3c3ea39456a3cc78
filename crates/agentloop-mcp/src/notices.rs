//! What a server tells agentloop without being asked, routed to whoever waits for it: changes
//! of its lists, the progress of a call, its log messages.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, MutexGuard},
};

use agentloop_core::ToolProgress;
#[expect(
    deprecated,
    reason = "rmcp marks logging deprecated (SEP-2577); servers still send it"
)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ProgressToken};
use tokio::sync::{mpsc::UnboundedSender, watch};

/// Shared by a server's source, its connection and the rmcp handler of each of its sessions
/// (a restart or a new HTTP session keeps them).
#[derive(Debug, Clone)]
pub(crate) struct Notices {
    /// `notifications/tools/list_changed`, and new sessions.
    pub(crate) tools: Changes,
    /// `notifications/resources/list_changed` and `resources/updated`, and new sessions.
    pub(crate) resources: Changes,
    /// `notifications/prompts/list_changed`, and new sessions.
    pub(crate) prompts: Changes,
    pub(crate) progress: ProgressRoutes,
    /// The calls in flight, which take the server's questions and sampling requests.
    pub(crate) calls: crate::in_flight::CallsInFlight,
}

impl Notices {
    pub(crate) fn new() -> Self {
        Self {
            tools: Changes::new(),
            resources: Changes::new(),
            prompts: Changes::new(),
            progress: ProgressRoutes::default(),
            calls: crate::in_flight::CallsInFlight::default(),
        }
    }

    /// A new session may offer other lists than the one it replaces.
    pub(crate) fn new_session(&self) {
        self.tools.bump();
        self.resources.bump();
        self.prompts.bump();
    }

    /// Nothing waits for anything any more: the source shut down.
    pub(crate) fn close(&self) {
        self.tools.close();
        self.resources.close();
        self.prompts.close();
    }
}

/// Counts the changes of one of a server's lists (its tools, resources or prompts); [`crate::McpSource::changes`] hands out
/// receivers, [`crate::McpSource::tools`] lists again when it moved. Closed when the source
/// shuts down, which ends whatever waits for changes.
#[derive(Debug, Clone)]
pub(crate) struct Changes {
    /// `None` once closed.
    sender: Arc<Mutex<Option<watch::Sender<u64>>>>,
    /// Reads the count after closing too.
    count: watch::Receiver<u64>,
}

impl Changes {
    pub(crate) fn new() -> Self {
        let (sender, count) = watch::channel(0);
        Self {
            sender: Arc::new(Mutex::new(Some(sender))),
            count,
        }
    }

    pub(crate) fn bump(&self) {
        if let Some(sender) = &*self.lock() {
            sender.send_modify(|count| *count = count.wrapping_add(1));
        }
    }

    pub(crate) fn current(&self) -> u64 {
        *self.count.borrow()
    }

    /// A receiver that has seen the current count.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        match &*self.lock() {
            Some(sender) => sender.subscribe(),
            None => self.count.clone(),
        }
    }

    pub(crate) fn close(&self) {
        drop(self.lock().take());
    }

    fn lock(&self) -> MutexGuard<'_, Option<watch::Sender<u64>>> {
        // The sender is only ever taken whole, so a poisoned lock holds nothing broken.
        self.sender
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Where the progress of each call in flight goes, by the progress token of its request.
#[derive(Debug, Clone, Default)]
pub(crate) struct ProgressRoutes {
    routes: Arc<Mutex<HashMap<ProgressToken, UnboundedSender<ToolProgress>>>>,
}

impl ProgressRoutes {
    /// Routes the progress of the request with `token` to `sender` until the guard is dropped.
    pub(crate) fn route(
        &self,
        token: ProgressToken,
        sender: UnboundedSender<ToolProgress>,
    ) -> ProgressRoute {
        self.lock().insert(token.clone(), sender);
        ProgressRoute {
            routes: self.clone(),
            token,
        }
    }

    /// Hands a report to its call; a report of a call that ended is dropped.
    pub(crate) fn deliver(&self, token: &ProgressToken, progress: ToolProgress) {
        if let Some(sender) = self.lock().get(token) {
            let _ = sender.send(progress);
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<ProgressToken, UnboundedSender<ToolProgress>>> {
        // Only whole entries are inserted and removed: a poisoned lock holds nothing broken.
        self.routes
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Removes its route when dropped: with the call's answer, or the call itself.
pub(crate) struct ProgressRoute {
    routes: ProgressRoutes,
    token: ProgressToken,
}

impl Drop for ProgressRoute {
    fn drop(&mut self) {
        self.routes.lock().remove(&self.token);
    }
}

/// A server's `notifications/message` as its call's record keeps it.
#[expect(
    deprecated,
    reason = "rmcp marks logging deprecated (SEP-2577); servers still send it"
)]
pub(crate) fn tool_log(
    message: &LoggingMessageNotificationParam,
) -> agentloop_core::protocol::ToolLog {
    let level = serde_json::to_value(message.level)
        .ok()
        .and_then(|level| level.as_str().map(str::to_owned))
        .unwrap_or_else(|| "info".to_owned());
    agentloop_core::protocol::ToolLog {
        level,
        logger: message.logger.clone(),
        message: match &message.data {
            serde_json::Value::String(text) => text.clone(),
            other => other.to_string(),
        },
    }
}

/// A server's `notifications/message` in agentloop's log, at the matching level: debug at
/// debug, info and notice at info, warning at warn, error and above at error.
#[expect(
    deprecated,
    reason = "rmcp marks logging deprecated (SEP-2577); servers still send it"
)]
pub(crate) fn log_message(server: &str, message: &LoggingMessageNotificationParam) {
    let logger = message.logger.as_deref().unwrap_or_default();
    let data = match &message.data {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    match message.level {
        LoggingLevel::Debug => {
            tracing::debug!(target: "agentloop_mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(target: "agentloop_mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Warning => {
            tracing::warn!(target: "agentloop_mcp::server_log", server, logger, "{data}")
        }
        LoggingLevel::Error
        | LoggingLevel::Critical
        | LoggingLevel::Alert
        | LoggingLevel::Emergency => {
            tracing::error!(target: "agentloop_mcp::server_log", server, logger, "{data}")
        }
    }
}
