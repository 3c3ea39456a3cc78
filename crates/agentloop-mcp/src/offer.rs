//! What agentloop offers a server in the handshake (its client capabilities: roots,
//! elicitation, sampling), from the server's table of `agentloop.toml`.

use std::{sync::Arc, time::Duration};

use rmcp::model::{
    ClientCapabilities, ElicitationCapability, FormElicitationCapability, RootsCapabilities,
    SamplingCapability, UrlElicitationCapability,
};
use serde::{Deserialize, Serialize};

/// `[mcp_servers.NAME] elicitation`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ElicitationPolicy {
    /// The user is asked (`input_required` with kind `elicitation`).
    #[default]
    Ask,
    /// Every question is declined; the capability is not declared.
    Decline,
}

/// `[mcp_servers.NAME] sampling`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingPolicy {
    /// The run's model answers.
    Allow,
    /// A human approves each request first (an elicitation with purpose `sampling`).
    Approve,
    /// Refused; the capability is not declared.
    #[default]
    Deny,
}

/// What a server is offered, and how its requests are answered.
#[derive(Debug, Clone)]
pub(crate) struct ClientOffer {
    /// `roots`, as URIs: the roots capability is declared only with some.
    pub(crate) roots: Arc<[String]>,
    pub(crate) elicitation: ElicitationPolicy,
    pub(crate) elicitation_timeout: Duration,
    pub(crate) sampling: SamplingPolicy,
    pub(crate) sampling_model: Option<String>,
}

impl ClientOffer {
    /// The client capabilities of the handshake: only what is enabled.
    pub(crate) fn capabilities(&self) -> ClientCapabilities {
        let mut capabilities = ClientCapabilities::default();
        if !self.roots.is_empty() {
            // Fixed for the life of the process: no `roots/list_changed` is ever sent.
            capabilities.roots = Some(RootsCapabilities::default());
        }
        if self.elicitation == ElicitationPolicy::Ask {
            capabilities.elicitation = Some(
                ElicitationCapability::new()
                    .with_form(FormElicitationCapability::new().with_schema_validation(true))
                    .with_url(UrlElicitationCapability::new()),
            );
        }
        if self.sampling != SamplingPolicy::Deny {
            capabilities.sampling = Some(SamplingCapability::default());
        }
        capabilities
    }
}

#[cfg(test)]
impl Default for ClientOffer {
    fn default() -> Self {
        Self {
            roots: Arc::from(Vec::new()),
            elicitation: ElicitationPolicy::Ask,
            elicitation_timeout: Duration::from_secs(600),
            sampling: SamplingPolicy::Deny,
            sampling_model: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_what_is_enabled_is_declared() {
        let asked = ClientOffer::default().capabilities();
        assert!(asked.elicitation.is_some());
        assert!(asked.sampling.is_none() && asked.roots.is_none());
        let closed = ClientOffer {
            elicitation: ElicitationPolicy::Decline,
            sampling: SamplingPolicy::Approve,
            ..ClientOffer::default()
        }
        .capabilities();
        assert!(closed.elicitation.is_none());
        assert!(closed.sampling.is_some());
    }
}
