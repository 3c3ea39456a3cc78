//! The OpenAI-compatible API: `GET /v1/models`, `POST /v1/chat/completions` and the
//! Responses API (`/v1/responses`), adapters over the same runs, events, store and keys as
//! `/v1/runs`, so that the official OpenAI SDKs (and what is built on them) talk to the agent.
//! Errors come in OpenAI's shape (`errors`).

pub mod chat;
mod chunks;
pub mod errors;
mod history;
pub mod models;
mod output;
mod response_events;
pub mod responses;
