//! `agentloop-test-mcp`: the small MCP server of agentloop's tests, over stdio.

use agentloop_test_support::mcp::TestMcpServer;
use rmcp::ServiceExt;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let running = TestMcpServer::from_env()
        .serve(rmcp::transport::stdio())
        .await?;
    running.waiting().await?;
    Ok(())
}
