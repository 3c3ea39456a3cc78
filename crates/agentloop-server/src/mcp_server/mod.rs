//! Agents as MCP servers: `POST /mcp` (streamable HTTP, with the server's Bearer keys) and
//! `agentloop mcp-serve` (stdio, one user) offer each public agent (the main agent and the
//! `[agents.NAME]` marked `public`, as `GET /v1/models` lists them) as an MCP tool that takes
//! `{question, session_id?}` and answers with the agent's answer, or its typed value as
//! `structuredContent` (`outputSchema`) when the agent has an output schema. An adapter over
//! the same runs as every other route: memory, policies, approvals, durability, cost.
//!
//! - The run's steps are `notifications/progress` (`progress`), when the call has a
//!   `progressToken`; a cancelled call (`notifications/cancelled`) cancels its run.
//! - Questions and approvals are elicitation forms when the client can show them, else the
//!   result says how to answer (`input`, `call`).
//! - The tools and their schemas: `tools`.

mod call;
mod input;
mod progress;
mod tools;

use std::sync::Arc;

use axum::{
    Router,
    extract::{FromRequestParts, Request, State},
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    model::{
        CallToolRequestParams, CallToolResponse, Implementation, ListToolsResult,
        PaginatedRequestParams, ServerCapabilities, ServerConfig,
    },
    service::RequestContext,
    transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService, session::local::LocalSessionManager,
    },
};
use tokio_util::sync::CancellationToken;

use crate::{auth::User, state::AppState};

/// What the server tells a client about itself.
const INSTRUCTIONS: &str = "Each tool is an agent: give it a question, get its answer. Pass the \
    session_id from a result's _meta (agentloop/session_id) to continue that conversation.";

/// How long an MCP session (protocols up to 2025-11-25) lives without a message: long enough
/// for a person to answer a form (the session waits for the answer without a word), instead of
/// rmcp's 5 minutes.
const SESSION_IDLE: std::time::Duration = std::time::Duration::from_secs(3600);

/// The MCP server of `state`'s agents, for one caller.
#[derive(Clone)]
pub struct AgentsServer {
    state: AppState,
    /// The user every call runs for (stdio); `None`: the user of each HTTP request's key.
    user: Option<Arc<str>>,
}

impl AgentsServer {
    /// The server for stdio: every call runs for `user`.
    pub fn for_user(state: AppState, user: &str) -> AgentsServer {
        AgentsServer {
            state,
            user: Some(user.into()),
        }
    }

    /// The user a call runs for: the stdio server's, or the one the request's key named
    /// (put in the request's extensions by [`authenticate`]).
    fn user_of(&self, context: &RequestContext<RoleServer>) -> Option<String> {
        if let Some(user) = &self.user {
            return Some(user.to_string());
        }
        context
            .extensions
            .get::<axum::http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<User>())
            .map(|user| user.0.clone())
    }
}

impl ServerHandler for AgentsServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("agentloop", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let output = self.state.agent.settings().typed_output().ok().flatten();
        let tools = tools::list(&self.state.public_agents, output.as_ref().map(|o| &o.spec));
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let Some(user) = self.user_of(&context) else {
            return Err(ErrorData::invalid_request(
                "no API key named the caller",
                None,
            ));
        };
        call::call(&self.state, &user, request, context).await
    }
}

/// `POST /mcp` (and the `GET` / `DELETE` of MCP sessions): the agents over streamable HTTP,
/// for the users of the server's keys (401 before MCP without a valid one). Any `Host` is
/// served: the keys, not the address, guard the agents.
pub fn routes(state: &AppState, stop: CancellationToken) -> Router<AppState> {
    let server = AgentsServer {
        state: state.clone(),
        user: None,
    };
    let config = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(stop)
        .with_max_request_body_bytes(state.config.max_body_bytes)
        .with_sse_keep_alive(Some(state.config.keep_alive()));
    let mut sessions = LocalSessionManager::default();
    sessions.session_config.keep_alive = Some(SESSION_IDLE);
    let service =
        StreamableHttpService::new(move || Ok(server.clone()), Arc::new(sessions), config);
    Router::new()
        .route_service("/mcp", service)
        .route_layer(axum::middleware::from_fn_with_state(
            state.clone(),
            authenticate,
        ))
}

/// The request's user, from its key, in its extensions; 401 (the API's JSON error) without.
async fn authenticate(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let (mut parts, body) = request.into_parts();
    match User::from_request_parts(&mut parts, &state).await {
        Ok(user) => {
            parts.extensions.insert(user);
            next.run(Request::from_parts(parts, body)).await
        }
        Err(error) => error.into_response(),
    }
}

/// Serves the agents over stdin and stdout for `user` until the client closes stdin.
pub async fn serve_stdio(state: AppState, user: &str) -> std::io::Result<()> {
    let server = AgentsServer::for_user(state, user);
    let running = server
        .serve(rmcp::transport::io::stdio())
        .await
        .map_err(std::io::Error::other)?;
    running.waiting().await.map_err(std::io::Error::other)?;
    Ok(())
}
