//! A connected server, whichever way it is reached: what its tools and its source share.

use std::{future::Future, time::Duration};

use agentloop_core::{
    ToolError, ToolOutput, ToolProgress,
    protocol::{SourceHealth, SourceState, SourceTransport},
};
use rmcp::{
    Peer, RoleClient,
    model::{
        CallToolRequest, CallToolRequestParams, CallToolResponse, CancelledNotification,
        CancelledNotificationParam, ClientRequest, JsonObject, MetaObject, RequestId,
        RequestMetaObject, ServerResult,
    },
    service::{PeerRequestOptions, ServiceError},
};
use tokio::sync::{mpsc::UnboundedSender, watch};

use crate::{
    http::HttpLink,
    notices::{Changes, Notices, ProgressRoutes},
    result::call_output,
    stdio::{StdioLink, StdioSlot},
};

pub(crate) struct Connection {
    server: String,
    notices: Notices,
    link: Link,
    /// How the server is doing; the supervisor moves it.
    health: watch::Sender<SourceHealth>,
    /// Set once the server is shut down: nothing restarts it after that.
    closing: watch::Sender<bool>,
    /// `max_duration_s`: the cap on each call of the server's tools.
    max_duration: Option<Duration>,
}

pub(crate) enum Link {
    Stdio(StdioSlot),
    Http(Box<HttpLink>),
}

impl Connection {
    pub(crate) fn new(server: &str, notices: Notices, link: Link) -> Self {
        let transport = match &link {
            Link::Stdio(_) => SourceTransport::Stdio,
            Link::Http(_) => SourceTransport::Http,
        };
        Self {
            server: server.to_owned(),
            notices,
            link,
            health: watch::Sender::new(SourceHealth::up(transport)),
            closing: watch::Sender::new(false),
            max_duration: None,
        }
    }

    /// Caps each call of the server's tools at `max_duration`.
    pub(crate) fn with_max_duration(mut self, max_duration: Option<Duration>) -> Self {
        self.max_duration = max_duration;
        self
    }

    pub(crate) fn max_duration(&self) -> Option<Duration> {
        self.max_duration
    }

    /// A connection to a server started as a child process.
    pub(crate) fn stdio(server: &str, notices: Notices, link: StdioLink) -> Self {
        Self::new(server, notices, Link::Stdio(StdioSlot::new(link)))
    }

    pub(crate) fn server(&self) -> &str {
        &self.server
    }

    /// Changes of the server's tools.
    pub(crate) fn changes(&self) -> &Changes {
        &self.notices.tools
    }

    pub(crate) fn notices(&self) -> &Notices {
        &self.notices
    }

    pub(crate) fn link(&self) -> &Link {
        &self.link
    }

    /// How the server is doing now.
    pub(crate) fn status(&self) -> SourceHealth {
        let mut health = self.health.borrow().clone();
        if let Link::Http(link) = &self.link {
            // A session opened again because the server forgot it counts too, not only the ones
            // the supervisor opened.
            health.restarts = u32::try_from(link.generation()).unwrap_or(u32::MAX);
        }
        health
    }

    /// Moves the state; the tools follow (they are offered only while the server is up), so
    /// whoever follows [`Changes`] is told.
    pub(crate) fn set_state(&self, state: SourceState) {
        let changed = self.health.send_if_modified(|health| {
            let changed = health.state != state;
            health.state = state;
            changed
        });
        if changed {
            self.notices.tools.bump();
        }
    }

    /// Counts a restart that brought the server back.
    pub(crate) fn count_restart(&self) {
        self.health
            .send_modify(|health| health.restarts = health.restarts.saturating_add(1));
    }

    pub(crate) fn is_closing(&self) -> bool {
        *self.closing.borrow()
    }

    /// Resolves once the server is shut down.
    pub(crate) async fn closed(&self) {
        let mut closing = self.closing.subscribe();
        // The sender lives as long as `self`.
        let _ = closing.wait_for(|closing| *closing).await;
    }

    /// Calls the tool `name`; the server's progress reports for the call go to `progress`.
    /// Dropping the future before the answer tells the server (`notifications/cancelled`).
    pub(crate) async fn call_tool(
        &self,
        name: &str,
        arguments: Option<JsonObject>,
        meta: Option<JsonObject>,
        progress: Option<UnboundedSender<ToolProgress>>,
    ) -> Result<ToolOutput, ToolError> {
        let routes = &self.notices.progress;
        let request = |peer: Peer<RoleClient>| {
            let mut params = CallToolRequestParams::new(name.to_owned());
            params.arguments = arguments.clone();
            params.meta = meta.clone().map(|meta| RequestMetaObject(MetaObject(meta)));
            call_reporting(peer, params, routes, progress.clone())
        };
        let response = match &self.link {
            Link::Stdio(slot) => slot.current().run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        call_output(response.map_err(|error| self.explain(error))?)
    }

    /// Runs `request` on the server's current session, with what agentloop does about a server
    /// that cannot be reached added to its error.
    pub(crate) async fn request<T, F, Fut>(&self, request: F) -> Result<T, ToolError>
    where
        F: Fn(Peer<RoleClient>) -> Fut,
        Fut: Future<Output = Result<T, ServiceError>>,
    {
        let answer = match &self.link {
            Link::Stdio(slot) => slot.current().run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        answer.map_err(|error| self.explain(error))
    }

    pub(crate) async fn list_tools(&self) -> Result<Vec<rmcp::model::Tool>, ToolError> {
        let request = |peer: Peer<RoleClient>| async move { peer.list_all_tools().await };
        let listed = match &self.link {
            Link::Stdio(slot) => slot.current().run(request).await,
            Link::Http(link) => link.run(request).await,
        };
        listed.map_err(|error| match error {
            ToolError::Failed(why) => ToolError::Failed(format!(
                "MCP server '{}' could not list its tools: {why}",
                self.server
            )),
            other => self.explain(other),
        })
    }

    /// Adds to why the server cannot be reached what agentloop does about it, so that the model
    /// knows whether trying again later may help.
    fn explain(&self, error: ToolError) -> ToolError {
        let ToolError::Unavailable(message) = error else {
            return error;
        };
        if self.is_closing() {
            return ToolError::Unavailable(message);
        }
        let note = match &self.health.borrow().state {
            SourceState::Restarting { attempt, .. } => format!(
                "; agentloop is restarting it (attempt {attempt}), and its tools come back once \
                 it is up"
            ),
            SourceState::Down { .. } => "; agentloop gave up restarting it".to_owned(),
            SourceState::Up | SourceState::Starting => String::new(),
        };
        ToolError::Unavailable(message + &note)
    }

    pub(crate) fn is_running(&self) -> bool {
        match &self.link {
            Link::Stdio(slot) => slot.current().is_running(),
            Link::Http(link) => link.is_running(),
        }
    }

    pub(crate) async fn shutdown(&self) {
        self.close_before_stopping();
        match &self.link {
            Link::Stdio(slot) => slot.close().shutdown().await,
            Link::Http(link) => link.shutdown().await,
        }
    }

    pub(crate) fn close_now(&self) {
        self.close_before_stopping();
        match &self.link {
            Link::Stdio(slot) => slot.close().close_now(),
            Link::Http(link) => link.close_now(),
        }
    }

    /// Before the server stops: the supervisor must see that it was shut down, not that it
    /// crashed.
    fn close_before_stopping(&self) {
        self.closing.send_replace(true);
        self.health.send_modify(|health| {
            health.state = SourceState::Down {
                reason: "it was shut down".to_owned(),
            };
        });
        self.notices.close();
    }
}

/// How often a call that ended lets the runtime run the handlers of its last reports.
const STRAGGLER_YIELDS: usize = 4;

/// `tools/call` as rmcp's `call_tool_once` makes it, with the request's progress token routed
/// to `progress` while it runs.
async fn call_reporting(
    peer: Peer<RoleClient>,
    params: CallToolRequestParams,
    routes: &ProgressRoutes,
    progress: Option<UnboundedSender<ToolProgress>>,
) -> Result<CallToolResponse, ServiceError> {
    let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
    let handle = peer
        .send_request_with_option(request, PeerRequestOptions::no_options())
        .await?;
    // Routed as soon as the request is on its way: a report needs the server to have read it.
    let route = progress.map(|sender| routes.route(handle.progress_token.clone(), sender));
    let mut abandoned = Abandoned {
        peer: Some(peer),
        id: handle.id.clone(),
    };
    let answer = handle.await_response().await;
    abandoned.peer = None;
    if route.is_some() {
        // rmcp hands each notification to the handler in a task of its own, spawned before the
        // answer that followed it was handed over: a few turns of the scheduler let the
        // reports the server sent before answering reach the call before its route closes.
        for _ in 0..STRAGGLER_YIELDS {
            tokio::task::yield_now().await;
        }
    }
    drop(route);
    match answer? {
        ServerResult::CallToolResult(result) => Ok(CallToolResponse::Complete(result)),
        ServerResult::InputRequiredResult(result) => Ok(CallToolResponse::InputRequired(result)),
        ServerResult::CreateTaskResult(result) => Ok(CallToolResponse::Task(result)),
        _ => Err(ServiceError::UnexpectedResponse),
    }
}

/// Tells the server about a call nobody waits for any more (a run cancelled or timed out, its
/// call dropped): `notifications/cancelled`, sent from a task of its own, as dropping cannot
/// wait. Disarmed by taking `peer` once the answer came.
struct Abandoned {
    peer: Option<Peer<RoleClient>>,
    id: RequestId,
}

impl Drop for Abandoned {
    fn drop(&mut self) {
        let (Some(peer), Ok(runtime)) = (self.peer.take(), tokio::runtime::Handle::try_current())
        else {
            return;
        };
        let cancelled = CancelledNotification::new(CancelledNotificationParam::new(
            Some(self.id.clone()),
            Some("agentloop no longer waits for the call".to_owned()),
        ));
        runtime.spawn(async move {
            // A server that went away has nothing left to cancel.
            let _ = peer.send_notification(cancelled.into()).await;
        });
    }
}
