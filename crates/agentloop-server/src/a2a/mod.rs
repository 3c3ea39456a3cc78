//! A2A (the Agent2Agent protocol, version 1.0 as the official `a2a-sdk` 1.x speaks it), an
//! adapter over the same runs, store and keys as `/v1/runs`: the agent card (`card`), the
//! JSON-RPC endpoint (`rpc`), where a task is a run and its `contextId` the run's session;
//! the task as a fold of the run's events (`task`), sending messages (`send`), reading,
//! cancelling and following tasks (`tasks`, `follow`); push notifications of
//! their state changes from a durable outbox in the store (`push_config`, `push`).

mod call;
pub mod card;
mod follow;
pub mod push;
mod push_config;
pub mod rpc;
mod send;
mod task;
mod tasks;
