//! `agentloop-test-mcp --http ADDR`: the test server over streamable HTTP, each session with the
//! same tools as over stdio, optionally behind a bearer token.

use std::{io::Write, sync::Arc};

use axum::{
    extract::{Request, State},
    http::{
        StatusCode,
        header::{AUTHORIZATION, WWW_AUTHENTICATE},
    },
    middleware::Next,
    response::{IntoResponse, Response},
};
use rmcp::transport::{
    StreamableHttpServerConfig, StreamableHttpService,
    streamable_http_server::session::local::LocalSessionManager,
};

use super::server::TestMcpServer;

/// The environment variable holding the token every HTTP request must carry as
/// `Authorization: Bearer <token>`; without it, requests need no token.
pub const TOKEN_ENV: &str = "AGENTLOOP_TEST_MCP_TOKEN";

/// Serves `server` at `http://ADDR/mcp` until the process is killed, after printing that URL
/// (with the port actually bound) as the first line of stdout.
pub async fn serve_http(
    addr: &str,
    server: TestMcpServer,
    token: Option<String>,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let service: StreamableHttpService<TestMcpServer, LocalSessionManager> =
        StreamableHttpService::new(
            move || Ok(server.clone()),
            Arc::default(),
            StreamableHttpServerConfig::default(),
        );
    let mut router = axum::Router::new().nest_service("/mcp", service);
    if let Some(token) = token {
        let expected: Arc<str> = format!("Bearer {token}").into();
        router = router.layer(axum::middleware::from_fn_with_state(
            expected,
            require_token,
        ));
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "http://{bound}/mcp")?;
    stdout.flush()?;
    drop(stdout);
    axum::serve(listener, router).await
}

async fn require_token(State(expected): State<Arc<str>>, request: Request, next: Next) -> Response {
    let given = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok());
    if given == Some(&*expected) {
        return next.run(request).await;
    }
    (
        StatusCode::UNAUTHORIZED,
        [(WWW_AUTHENTICATE, "Bearer")],
        "missing or wrong bearer token",
    )
        .into_response()
}
