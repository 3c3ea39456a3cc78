//! What a client is told of a run's error. The detailed message is the operator's: it names the
//! LLM's address, the setting or environment variable to fix, the database; it stays in the
//! store (`agentloop sessions show`, `agentloop run` show it) and goes to the server's log with
//! the request's id and the run's id. Over HTTP, every protocol (the native events and JSON
//! answers, AG-UI, the AI SDK) tells the code, a plain sentence chosen by the code
//! ([`ErrorCode::user_message`]) and the request's id, from the one function
//! [`client_error`]; `[server] expose_error_details` sends the detailed message instead, for
//! development.

use std::borrow::Cow;

use agentloop_core::protocol::{ErrorCode, Event, EventKind, RunInfo};
use serde::Serialize;
use uuid::Uuid;

use crate::error::ErrorDetail;
use crate::request_id::RequestScope;

/// The error a client is told: `code`, the message for its people (or, with `expose_details`,
/// the detailed one), and the request's id.
pub(crate) fn client_error(
    code: ErrorCode,
    detail: &str,
    request_id: &str,
    expose_details: bool,
) -> ErrorDetail {
    // A guardrail's refusal is for the user: it names the guardrail and its reason.
    let message = if expose_details || code == ErrorCode::Blocked {
        detail
    } else {
        code.user_message()
    };
    ErrorDetail {
        code: code.as_str().to_string(),
        message: message.to_string(),
        details: None,
        request_id: request_id.to_string(),
    }
}

/// Run `run_id`'s error as the answer to the request of `scope` tells it: the detailed message
/// is logged once, with the request's id and the run's.
pub(crate) fn run_error(
    scope: &RequestScope,
    run_id: Uuid,
    code: ErrorCode,
    detail: &str,
) -> ErrorDetail {
    tracing::warn!(request_id = %scope.id, %run_id, %code, error = detail, "a run's error is sent to a client");
    client_error(code, detail, &scope.id, scope.expose_details)
}

/// `event` as a client may see it: an `error` event with the message of [`run_error`] and the
/// request's id (after the event's own fields, in their order); any other event as it is.
pub(crate) fn shown_event<'a>(scope: &RequestScope, event: &'a Event) -> ShownEvent<'a> {
    let EventKind::Error { code, message } = &event.kind else {
        return ShownEvent {
            event: Cow::Borrowed(event),
            request_id: None,
        };
    };
    let error = run_error(scope, event.run_id, *code, message);
    let shown = Event {
        kind: EventKind::Error {
            code: *code,
            message: error.message,
        },
        ..event.clone()
    };
    ShownEvent {
        event: Cow::Owned(shown),
        request_id: Some(error.request_id),
    }
}

/// An event as a client may see it ([`shown_event`]).
#[derive(Debug, Serialize)]
pub(crate) struct ShownEvent<'a> {
    #[serde(flatten)]
    event: Cow<'a, Event>,
    #[serde(skip_serializing_if = "Option::is_none")]
    request_id: Option<String>,
}

/// `run` as a client may see it: its error's message the plain one (see [`client_error`]).
pub(crate) fn shown_run(scope: &RequestScope, mut run: RunInfo) -> RunInfo {
    if let (Some(code), false) = (run.error_code, scope.expose_details) {
        run.error_message = Some(code.user_message().to_string());
    }
    run
}

/// The sentence AG-UI and the AI SDK show, which have no field for the request's id.
pub(crate) fn with_request_id(error: &ErrorDetail) -> String {
    format!("{} (request id {})", error.message, error.request_id)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DETAIL: &str = "the LLM at http://127.0.0.1:53439/v1/chat/completions refused the API \
                          key (401 Incorrect API key provided). Set MOCK_KEY to a valid key";

    #[test]
    fn a_client_gets_the_code_a_plain_sentence_and_the_request_id() {
        let error = client_error(ErrorCode::LlmUnauthorized, DETAIL, "req-1", false);
        assert_eq!(error.code, "llm_unauthorized");
        assert_eq!(error.message, ErrorCode::LlmUnauthorized.user_message());
        assert_eq!(error.request_id, "req-1");
        for internal in ["127.0.0.1", "http", "MOCK_KEY", "API key"] {
            assert!(!error.message.contains(internal), "{}", error.message);
        }
        assert_eq!(
            with_request_id(&error),
            format!("{} (request id req-1)", error.message)
        );
    }

    #[test]
    fn with_details_exposed_the_client_gets_the_detailed_message() {
        let error = client_error(ErrorCode::LlmUnauthorized, DETAIL, "req-1", true);
        assert_eq!(
            (error.code.as_str(), error.message.as_str()),
            ("llm_unauthorized", DETAIL)
        );
        assert_eq!(error.request_id, "req-1");
    }

    #[test]
    fn an_error_event_shows_the_plain_message_and_the_request_id_and_others_are_untouched() {
        let scope = RequestScope {
            id: "req-2".into(),
            expose_details: false,
        };
        let run_id = Uuid::nil();
        let error = Event {
            run_id,
            seq: 3,
            parent_run_id: None,
            kind: EventKind::Error {
                code: ErrorCode::LlmUnauthorized,
                message: DETAIL.to_string(),
            },
        };
        let text = serde_json::to_string(&shown_event(&scope, &error)).unwrap();
        // The event's own fields first, in their order, then the request's id.
        assert!(
            text.starts_with(
                r#"{"run_id":"00000000-0000-0000-0000-000000000000","seq":3,"type":"error","#
            ),
            "{text}"
        );
        let shown: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(shown["type"], "error");
        assert_eq!(shown["code"], "llm_unauthorized");
        assert_eq!(shown["seq"], 3);
        assert_eq!(shown["request_id"], "req-2");
        assert_eq!(shown["message"], ErrorCode::LlmUnauthorized.user_message());
        let thinking = Event {
            kind: EventKind::Thinking { iteration: 1 },
            ..error
        };
        assert_eq!(
            serde_json::to_string(&shown_event(&scope, &thinking)).unwrap(),
            serde_json::to_string(&thinking).unwrap()
        );
    }

    #[test]
    fn a_stored_run_shows_the_plain_message_unless_details_are_exposed() {
        let run: RunInfo = serde_json::from_value(serde_json::json!({
            "id": Uuid::nil(), "session_id": Uuid::nil(), "user_id": "ann", "query": "hi",
            "status": "failed", "iterations": 1, "tools_used": 0,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0},
            "error_code": "llm_unauthorized", "error_message": DETAIL,
            "save_chat": true, "started_at": "2025-01-01T00:00:00Z",
        }))
        .unwrap_or_else(|error| unreachable!("{error}"));
        let hidden = RequestScope {
            id: "r".into(),
            expose_details: false,
        };
        let shown = shown_run(&hidden, run.clone());
        assert_eq!(
            shown.error_message.as_deref(),
            Some(ErrorCode::LlmUnauthorized.user_message())
        );
        let exposed = RequestScope {
            expose_details: true,
            ..hidden
        };
        assert_eq!(shown_run(&exposed, run.clone()), run);
    }

    #[test]
    fn every_code_maps_to_its_own_code_and_never_to_the_detail() {
        for code in [
            ErrorCode::LlmUnreachable,
            ErrorCode::LlmMissingApiKey,
            ErrorCode::LlmRejected,
            ErrorCode::LlmTimeout,
            ErrorCode::StoreUnavailable,
            ErrorCode::InternalError,
        ] {
            let error = client_error(code, DETAIL, "r", false);
            assert_eq!(error.code, code.as_str());
            assert_ne!(error.message, DETAIL);
        }
    }
}
