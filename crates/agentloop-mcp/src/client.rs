//! agentloop's side of an MCP session: what it tells the server about itself, and what it does
//! with the server's notifications.

use std::sync::Arc;

use agentloop_core::ToolProgress;
#[expect(
    deprecated,
    reason = "rmcp marks sampling deprecated (SEP-2577); servers still ask"
)]
use rmcp::model::{CreateMessageRequestParams, CreateMessageResult};
#[expect(
    deprecated,
    reason = "rmcp marks roots deprecated (SEP-2577); servers still ask"
)]
use rmcp::model::{ListRootsResult, Root};
use rmcp::{
    ClientHandler, ErrorData, RoleClient,
    model::{
        ClientConfig, ElicitRequestParams, ElicitResult, Implementation, ProgressNotificationParam,
        ProtocolVersion,
    },
    service::{NotificationContext, RequestContext, RunningService},
};

use crate::{
    notices::{Notices, log_message},
    offer::ClientOffer,
};

/// A running rmcp client session with one server.
pub(crate) type Service = RunningService<RoleClient, Client>;

/// The rmcp client handler of every session: the handshake's client info, and the server's
/// notifications routed by [`Notices`] (a list changed: a counter bumped, progress to
/// its call, log messages to agentloop's log).
pub(crate) struct Client {
    server: String,
    notices: Notices,
    /// What the server is offered (roots, elicitation, sampling) and how its requests are
    /// answered.
    offer: Arc<ClientOffer>,
}

impl Client {
    pub(crate) fn new(server: &str, notices: Notices, offer: Arc<ClientOffer>) -> Self {
        Self {
            server: server.to_owned(),
            notices,
            offer,
        }
    }
}

impl ClientHandler for Client {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            self.offer.capabilities(),
            Implementation::new("agentloop", env!("CARGO_PKG_VERSION")),
        )
        // The legacy `initialize` handshake is what every server speaks today, over stdio and
        // over HTTP (where it also opens the session); it must name a version that still has
        // one.
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    #[expect(
        deprecated,
        reason = "rmcp marks roots deprecated (SEP-2577); servers still ask"
    )]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(ListRootsResult::new(
            self.offer
                .roots
                .iter()
                .map(|uri| Root::new(uri.as_str()))
                .collect(),
        ))
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        let calls = &self.notices.calls;
        Ok(crate::elicit::elicit(&self.server, &self.offer, calls, request, context.ct).await)
    }

    #[expect(
        deprecated,
        reason = "rmcp marks sampling deprecated (SEP-2577); servers still ask"
    )]
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let calls = &self.notices.calls;
        crate::sampling::sample(&self.server, &self.offer, calls, params, context.ct).await
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server changed its tool list");
        self.notices.tools.bump();
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server changed its resource list");
        self.notices.resources.bump();
    }

    async fn on_resource_updated(
        &self,
        params: rmcp::model::ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(server = %self.server, uri = %params.uri, "MCP server updated a resource");
        self.notices.resources.bump();
    }

    async fn on_prompt_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "MCP server changed its prompt list");
        self.notices.prompts.bump();
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let progress = ToolProgress {
            progress: params.progress,
            total: params.total,
            message: params.message,
        };
        self.notices
            .progress
            .deliver(&params.progress_token, progress);
    }

    #[expect(
        deprecated,
        reason = "rmcp marks logging deprecated (SEP-2577); servers still send it"
    )]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        log_message(&self.server, &params);
        if let Some(call) = self.notices.calls.only() {
            call.log(crate::notices::tool_log(&params));
        }
    }
}
