//! A server's `elicitation/create`: asked of the user of the run whose call is in flight
//! (`in_flight.rs`), through the run (`input_required` with kind `elicitation`); declined
//! when the server's `elicitation` is `decline`, when no run can be told, or when nobody
//! answers within `elicitation_timeout_s`.

use agentloop_core::{
    Question,
    protocol::{
        ElicitationAction as Action, ElicitationAnswer, ElicitationMode, ElicitationPurpose,
    },
};
use rmcp::model::{ElicitRequestParams, ElicitResult, ElicitationAction};
use tokio_util::sync::CancellationToken;

use crate::{
    in_flight::CallsInFlight,
    offer::{ClientOffer, ElicitationPolicy},
};

/// Answers one `elicitation/create` of `server`.
pub(crate) async fn elicit(
    server: &str,
    offer: &ClientOffer,
    calls: &CallsInFlight,
    request: ElicitRequestParams,
    cancelled: CancellationToken,
) -> ElicitResult {
    if offer.elicitation == ElicitationPolicy::Decline {
        tracing::debug!(
            server,
            "declined the MCP server's question (elicitation = \"decline\")"
        );
        return declined();
    }
    let asker = match calls.asker() {
        Ok(asker) => asker,
        Err(why) => {
            tracing::warn!(
                server,
                reason = why.reason(),
                "declined the MCP server's question"
            );
            return declined();
        }
    };
    let Some(question) = question(server, request) else {
        tracing::warn!(
            server,
            "declined the MCP server's question of a mode agentloop does not know"
        );
        return declined();
    };
    let answer = tokio::select! {
        answer = tokio::time::timeout(offer.elicitation_timeout, asker.elicit(question)) => answer,
        // The server withdrew it (`notifications/cancelled`).
        () = cancelled.cancelled() => return declined(),
    };
    match answer {
        Ok(answer) => result(answer),
        Err(_elapsed) => {
            tracing::info!(
                server,
                seconds = offer.elicitation_timeout.as_secs_f64(),
                "nobody answered the MCP server's question in time (elicitation_timeout_s); declined"
            );
            declined()
        }
    }
}

/// A question as the run shows it.
fn question(server: &str, request: ElicitRequestParams) -> Option<Question> {
    Some(match request {
        ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } => Question {
            server: server.to_owned(),
            mode: ElicitationMode::Form,
            message,
            requested_schema: serde_json::to_value(&requested_schema).ok(),
            url: None,
            purpose: ElicitationPurpose::Question,
        },
        ElicitRequestParams::UrlElicitationParams { message, url, .. } => Question {
            server: server.to_owned(),
            mode: ElicitationMode::Url,
            message,
            requested_schema: None,
            url: Some(url),
            purpose: ElicitationPurpose::Question,
        },
        // A mode of a later protocol, which agentloop cannot show.
        _ => return None,
    })
}

fn result(answer: ElicitationAnswer) -> ElicitResult {
    let action = match answer.action {
        Action::Accept => ElicitationAction::Accept,
        Action::Decline => ElicitationAction::Decline,
        Action::Cancel => ElicitationAction::Cancel,
    };
    match answer
        .content
        .filter(|_| action == ElicitationAction::Accept)
    {
        Some(content) => ElicitResult::new(action).with_content(content),
        None => ElicitResult::new(action),
    }
}

fn declined() -> ElicitResult {
    ElicitResult::new(ElicitationAction::Decline)
}
