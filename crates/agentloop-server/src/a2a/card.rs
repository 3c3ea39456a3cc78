//! The agent card (`GET /.well-known/agent-card.json`, A2A 1.0): who the agent is
//! (`[server.a2a]`), where its JSON-RPC endpoint is, what it supports (streaming; push
//! notifications with a store), and how to authenticate (the server's Bearer keys). No key needed.

use axum::{
    Json,
    extract::State,
    http::{HeaderMap, header},
};
use serde_json::{Value, json};

use crate::{config::A2aSettings, error::ApiError, state::AppState};

/// The version of A2A this server speaks.
pub const PROTOCOL_VERSION: &str = "1.0";

/// The A2A agent card.
///
/// What the agent is and does, its JSON-RPC endpoint (`POST /a2a`), its capabilities and
/// security scheme, in A2A 1.0's JSON (docs/a2a.md).
#[utoipa::path(
    get,
    path = "/.well-known/agent-card.json",
    tag = "a2a",
    responses(
        (status = 200, description = "The agent card", body = Object),
        (status = 404, description = "A2A is turned off (`[server.a2a] enabled = false`)", body = crate::error::ErrorBody),
    )
)]
pub async fn agent_card(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let settings = &state.config.a2a;
    if !settings.enabled {
        return Err(ApiError::not_found("route", "/.well-known/agent-card.json"));
    }
    let base = match &settings.url {
        Some(url) => url.trim_end_matches('/').to_string(),
        None => {
            let host = headers
                .get(header::HOST)
                .and_then(|host| host.to_str().ok())
                .unwrap_or(&state.config.listen);
            format!("http://{host}")
        }
    };
    Ok(Json(card(settings, &base, state.push.is_some())))
}

/// The card of an agent described by `settings`, served at `base`.
pub fn card(settings: &A2aSettings, base: &str, push: bool) -> Value {
    let skills: Vec<Value> = match settings.skills.is_empty() {
        true => vec![json!({
            "id": "ask",
            "name": settings.name,
            "description": settings.description,
            "tags": ["agent"],
        })],
        false => settings
            .skills
            .iter()
            .map(|skill| {
                json!({
                    "id": skill.id,
                    "name": if skill.name.is_empty() { &skill.id } else { &skill.name },
                    "description": skill.description,
                    "tags": skill.tags,
                    "examples": skill.examples,
                })
            })
            .collect(),
    };
    json!({
        "name": settings.name,
        "description": settings.description,
        "version": env!("CARGO_PKG_VERSION"),
        "supportedInterfaces": [{
            "url": format!("{base}/a2a"),
            "protocolBinding": "JSONRPC",
            "protocolVersion": PROTOCOL_VERSION,
        }],
        "capabilities": {
            "streaming": true,
            "pushNotifications": push,
            "extendedAgentCard": false,
        },
        "securitySchemes": {
            "bearer": {"httpAuthSecurityScheme": {
                "scheme": "Bearer",
                "description": "An agentloop API key (`agentloop keys create --user USER`)",
            }},
        },
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}],
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["text/plain", "application/json"],
        "skills": skills,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_card_names_the_endpoint_the_skills_and_the_bearer_scheme() {
        let mut settings = A2aSettings::default();
        let card0 = card(&settings, "http://h:1", true);
        assert_eq!(card0["supportedInterfaces"][0]["url"], "http://h:1/a2a");
        assert_eq!(card0["skills"][0]["id"], "ask");
        settings.skills.push(crate::config::A2aSkill {
            id: "triage".into(),
            ..Default::default()
        });
        let card1 = card(&settings, "http://h:1", true);
        assert_eq!(card1["skills"][0]["name"], "triage");
        assert_eq!(
            card1["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"],
            "Bearer"
        );
    }
}
