//! `agentloop-test-mcp`: the small MCP server of agentloop's tests, over stdio, or over
//! streamable HTTP with `--http ADDR` (it then prints its URL on the first line of stdout).

use agentloop_test_support::mcp::{TOKEN_ENV, TestMcpServer, serve_http};
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.as_slice() {
        [] => {
            let running = TestMcpServer::from_env()
                .serve(rmcp::transport::stdio())
                .await?;
            running.waiting().await?;
        }
        [flag, addr] if flag == "--http" => {
            let token = std::env::var(TOKEN_ENV)
                .ok()
                .filter(|token| !token.is_empty());
            serve_http(addr, TestMcpServer::from_env(), token).await?;
        }
        _ => {
            return Err(
                "usage: agentloop-test-mcp [--http ADDR]  (stdio without arguments; ADDR such \
                 as 127.0.0.1:0)"
                    .into(),
            );
        }
    }
    Ok(())
}
