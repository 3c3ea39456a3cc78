use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a run failed, as its `error` event, its outcome and its stored row say it: a stable,
/// machine-readable code. Serialises to the documented strings (`llm_timeout`, ...).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// No connection to the LLM: a wrong `llm.base_url`, a server that is not running.
    LlmUnreachable,
    LlmMissingApiKey,
    LlmUnauthorized,
    /// The LLM refused the request (HTTP 4xx).
    LlmRejected,
    /// Still rate limited after the retries.
    LlmRateLimited,
    /// Still failing (HTTP 5xx) after the retries.
    LlmServerError,
    LlmTimeout,
    /// The LLM answered, but its reply was cut.
    LlmTruncatedStream,
    /// The LLM sent a reply agentloop cannot read.
    LlmProtocolError,
    /// The run's steps could not be saved.
    StoreUnavailable,
    SessionNotFound,
    /// Another run holds the session.
    SessionBusy,
    /// The run's context names a workflow the agent does not have.
    UnknownWorkflow,
    /// The run has an output schema and the model gave no answer valid against it, after
    /// its retries (`agent.output_retries`).
    OutputInvalid,
    /// Something agentloop did not expect; the message says what.
    InternalError,
    /// A guardrail refused the question or the answer (the run's status is `blocked`); the
    /// message names the guardrail and its reason.
    Blocked,
}

impl ErrorCode {
    const ALL: [ErrorCode; 16] = [
        ErrorCode::LlmUnreachable,
        ErrorCode::LlmMissingApiKey,
        ErrorCode::LlmUnauthorized,
        ErrorCode::LlmRejected,
        ErrorCode::LlmRateLimited,
        ErrorCode::LlmServerError,
        ErrorCode::LlmTimeout,
        ErrorCode::LlmTruncatedStream,
        ErrorCode::LlmProtocolError,
        ErrorCode::StoreUnavailable,
        ErrorCode::SessionNotFound,
        ErrorCode::SessionBusy,
        ErrorCode::UnknownWorkflow,
        ErrorCode::OutputInvalid,
        ErrorCode::InternalError,
        ErrorCode::Blocked,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::LlmUnreachable => "llm_unreachable",
            ErrorCode::LlmMissingApiKey => "llm_missing_api_key",
            ErrorCode::LlmUnauthorized => "llm_unauthorized",
            ErrorCode::LlmRejected => "llm_rejected",
            ErrorCode::LlmRateLimited => "llm_rate_limited",
            ErrorCode::LlmServerError => "llm_server_error",
            ErrorCode::LlmTimeout => "llm_timeout",
            ErrorCode::LlmTruncatedStream => "llm_truncated_stream",
            ErrorCode::LlmProtocolError => "llm_protocol_error",
            ErrorCode::StoreUnavailable => "store_unavailable",
            ErrorCode::SessionNotFound => "session_not_found",
            ErrorCode::SessionBusy => "session_busy",
            ErrorCode::UnknownWorkflow => "unknown_workflow",
            ErrorCode::OutputInvalid => "output_invalid",
            ErrorCode::InternalError => "internal_error",
            ErrorCode::Blocked => "blocked",
        }
    }

    /// What a person using an application built on agentloop is told: a fixed sentence per
    /// code, with no detail of the server's setup (the detailed message, for the operator,
    /// names URLs, settings and environment variables).
    pub fn user_message(self) -> &'static str {
        match self {
            ErrorCode::LlmUnreachable
            | ErrorCode::LlmMissingApiKey
            | ErrorCode::LlmUnauthorized => {
                "The assistant's model is not available right now. Please try again later."
            }
            ErrorCode::LlmRejected => {
                "The assistant's model could not take this request. Please rephrase it, or \
                 start a new conversation."
            }
            ErrorCode::LlmRateLimited => {
                "The assistant is busy right now. Please try again in a minute."
            }
            ErrorCode::LlmServerError => {
                "The assistant's model had a problem. Please try again shortly."
            }
            ErrorCode::LlmTimeout => {
                "The assistant's model took too long to answer. Please try again, or ask for \
                 less."
            }
            ErrorCode::LlmTruncatedStream | ErrorCode::LlmProtocolError => {
                "The assistant's answer was cut off or could not be read. Please try again."
            }
            ErrorCode::StoreUnavailable => {
                "The conversation could not be saved right now. Please try again in a moment."
            }
            ErrorCode::SessionNotFound => {
                "This conversation no longer exists. Please start a new one."
            }
            ErrorCode::SessionBusy => {
                "This conversation is still busy with an earlier message. Please wait for it \
                 to finish."
            }
            ErrorCode::UnknownWorkflow => {
                "The request asked for something this assistant does not offer."
            }
            ErrorCode::Blocked => {
                "The assistant cannot help with this request. Please rephrase it or ask \
                 something else."
            }
            ErrorCode::OutputInvalid => {
                "The assistant could not give its answer in the form this application needs. \
                 Please try again, or rephrase the request."
            }
            ErrorCode::InternalError => {
                "Something went wrong in the assistant. Please try again; if it keeps \
                 happening, report it with the request id."
            }
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|code| code.as_str() == text)
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for ErrorCode {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for ErrorCode {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_serialises_to_its_documented_string() {
        for code in ErrorCode::ALL {
            let json = serde_json::to_value(code).unwrap_or_default();
            assert_eq!(json, serde_json::json!(code.as_str()));
            assert_eq!(ErrorCode::parse(code.as_str()), Some(code));
        }
    }

    /// A sentence for a person: plain words, ending as a sentence, naming no setting, variable
    /// or address.
    #[test]
    fn every_code_has_a_plain_sentence_for_people() {
        for code in ErrorCode::ALL {
            let message = code.user_message();
            assert!(message.ends_with('.'), "{code}: {message}");
            for internal in ["llm.", "_", "http", "://", "API key", "store", "config"] {
                assert!(!message.contains(internal), "{code}: {message}");
            }
        }
    }
}
