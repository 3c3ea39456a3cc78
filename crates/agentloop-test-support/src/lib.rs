//! Test doubles that speak the real protocols, for agentloop's own tests and benchmarks:
//! a scripted OpenAI-compatible HTTP server ([`scripted_llm`]) and a small MCP server started as
//! a real child process ([`mcp`]), a PostgreSQL schema per test ([`postgres`]), and the gates of tests that need
//! what a bare machine lacks ([`requires`]).

pub mod clock;
pub mod config;
pub mod faulty_store;
pub mod mcp;
pub mod otlp;
pub mod postgres;
pub mod requires;
pub mod scripted_llm;
pub mod sockets;
pub mod sse;
pub mod tcp_proxy;
pub mod wait;
pub mod webhook;

// Not MCP, but found and built the same way as the test MCP server.
pub use mcp::scripted_llm_path;
