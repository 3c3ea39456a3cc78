//! The chat UI protocols agentloop speaks besides its own events: pure mappings from
//! agentloop's events to each protocol's messages (the routes are beside the other routes).

pub mod ag_ui;
pub mod ai_sdk;
