//! Scripted OpenAI-compatible server.
