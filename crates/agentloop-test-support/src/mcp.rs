//! Locating and configuring the test MCP server.
