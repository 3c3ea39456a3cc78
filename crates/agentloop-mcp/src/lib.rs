//! MCP tool sources.
