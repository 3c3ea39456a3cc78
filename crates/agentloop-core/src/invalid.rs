//! The error of every configuration check (apart from the settings, so that the modules the
//! settings use can name it).

/// A configuration value that its TOML type cannot rule out. The message names the key and what
/// it accepts.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidSetting {
    /// The key as written in `agentloop.toml`: `agent.parallel_tools`, `tools."a.b".timeout_s`.
    pub key: String,
    pub message: String,
}

impl From<crate::cost::InvalidPrice> for InvalidSetting {
    fn from(error: crate::cost::InvalidPrice) -> Self {
        Self::new(error.key, error.message)
    }
}

impl InvalidSetting {
    pub fn new(key: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            key: key.into(),
            message: message.into(),
        }
    }
}
