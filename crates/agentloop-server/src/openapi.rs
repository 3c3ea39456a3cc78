//! The OpenAPI 3.1 document of the API (`GET /openapi.json`), generated from the handlers'
//! annotations with the routes themselves, so that a route cannot be served undocumented.
//! Every response object has a description, as the specification requires: the error answers
//! that mean the same on every route get theirs here, from their status.

use axum::Router;
use utoipa::{
    Modify, OpenApi,
    openapi::{
        RefOr,
        security::{HttpAuthScheme, HttpBuilder, SecurityScheme},
    },
};
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    a2a, ag_ui, attachments, chat, openai, runs, service, sessions, state::AppState, steering,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "agentloop",
        description = "Runs of a tool-calling agent over SSE or JSON. Every request but \
                       /healthz, /readyz, /livez, /metrics and /openapi.json needs `Authorization: Bearer KEY`."
    ),
    modifiers(&BearerKey),
    tags(
        (name = "runs", description = "Start, follow, inspect and cancel runs"),
        (name = "sessions", description = "Conversations"),
        (name = "chat", description = "The AI SDK's chat transport (useChat): the UI message stream"),
        (name = "ag-ui", description = "The AG-UI protocol (@ag-ui/client's HttpAgent, CopilotKit)"),
        (name = "openai", description = "The OpenAI-compatible API (models, Chat Completions, Responses); errors in OpenAI's shape `{error: {message, type, param, code}}`"),
        (name = "a2a", description = "The A2A protocol (1.0, the official a2a-sdk): the agent card and JSON-RPC"),
        (name = "service", description = "Health and metrics"),
    )
)]
struct ApiDoc;

struct BearerKey;

impl Modify for BearerKey {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("A key made by `agentloop keys create --user USER`"))
                    .build(),
            ),
        );
    }
}

/// Every documented route, and the document.
pub(crate) fn routes() -> (Router<AppState>, utoipa::openapi::OpenApi) {
    let (router, mut api) = OpenApiRouter::with_openapi(ApiDoc::openapi())
        .routes(routes!(runs::create_run))
        .routes(routes!(runs::copilot_agent))
        .routes(routes!(runs::get_run))
        .routes(routes!(runs::run_events))
        .routes(routes!(runs::cancel_run))
        .routes(routes!(runs::run_input))
        .routes(routes!(steering::send_message))
        .routes(routes!(runs::get_tool_execution))
        .routes(routes!(chat::post_chat))
        .routes(routes!(chat::chat_stream))
        .routes(routes!(ag_ui::run_agent))
        .routes(routes!(attachments::get_attachment))
        .merge(openai_routes())
        .routes(routes!(a2a::card::agent_card))
        .routes(routes!(a2a::rpc::json_rpc))
        .routes(routes!(sessions::list_sessions))
        .routes(routes!(sessions::get_session, sessions::delete_session))
        .routes(routes!(service::healthz))
        .routes(routes!(service::readyz))
        .routes(routes!(service::livez))
        .routes(routes!(service::metrics))
        .split_for_parts();
    describe_errors(&mut api);
    (router, api)
}

/// The OpenAI-compatible routes, whose errors are rewritten in OpenAI's shape.
fn openai_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(openai::models::list_models))
        .routes(routes!(openai::models::get_model))
        .routes(routes!(openai::chat::chat_completions))
        .routes(routes!(openai::responses::create_response))
        .routes(routes!(
            openai::responses::get_response,
            openai::responses::delete_response
        ))
        .routes(routes!(openai::responses::cancel_response))
        .layer(axum::middleware::map_response(
            openai::errors::openai_errors,
        ))
}

/// Gives the error answers a route lists without a description of its own the one their status
/// has on every route. A success answer is described where it is declared.
fn describe_errors(api: &mut utoipa::openapi::OpenApi) {
    for item in api.paths.paths.values_mut() {
        let operations = [
            &mut item.get,
            &mut item.put,
            &mut item.post,
            &mut item.delete,
            &mut item.options,
            &mut item.head,
            &mut item.patch,
            &mut item.trace,
        ];
        for operation in operations.into_iter().flatten() {
            for (status, response) in operation.responses.responses.iter_mut() {
                let RefOr::T(response) = response else {
                    continue;
                };
                if response.description.is_empty()
                    && let Some(description) = error_description(status)
                {
                    response.description = description.to_string();
                }
            }
        }
    }
}

/// What an error status means on any route of this API.
fn error_description(status: &str) -> Option<&'static str> {
    Some(match status {
        "400" => {
            "The request cannot be read: a malformed body, path or query (`code` and `message` say which)"
        }
        "401" => "Missing or invalid API key",
        "404" => "No such thing of yours (another user's answers the same)",
        "409" => "The request conflicts with the state of what it names (`code` says how)",
        "413" => "Body too large (server.max_body_bytes)",
        "429" => {
            "Too many runs in progress (`too_many_runs`), or the user's daily budget is spent (`budget_exceeded`, until midnight UTC); see Retry-After"
        }
        "503" => "Not available for now (the store, or the server is stopping); see Retry-After",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::Value;

    use super::*;

    #[test]
    fn the_document_is_openapi_3_1_and_every_response_has_a_description() {
        let (_, api) = routes();
        let document = serde_json::to_value(&api).unwrap();
        assert!(
            document["openapi"].as_str().unwrap().starts_with("3.1."),
            "{}",
            document["openapi"]
        );
        let mut missing = Vec::new();
        let mut responses = 0;
        for (path, item) in document["paths"].as_object().unwrap() {
            for (method, operation) in item.as_object().unwrap() {
                let Some(answers) = operation["responses"].as_object() else {
                    continue;
                };
                for (status, response) in answers {
                    responses += 1;
                    let described = response
                        .get("description")
                        .and_then(Value::as_str)
                        .is_some_and(|text| !text.trim().is_empty());
                    if !described && response.get("$ref").is_none() {
                        missing.push(format!("{method} {path} {status}"));
                    }
                }
            }
        }
        assert!(responses > 50, "{responses} responses");
        assert!(
            missing.is_empty(),
            "responses without a description: {missing:#?}"
        );
    }

    /// Every `$ref` names a schema of the document (the event types' `GuardrailSide`, say).
    #[test]
    fn every_schema_reference_resolves() {
        fn refs(value: &Value, out: &mut Vec<String>) {
            match value {
                Value::Object(map) => {
                    if let Some(Value::String(target)) = map.get("$ref") {
                        out.push(target.clone());
                    }
                    map.values().for_each(|value| refs(value, out));
                }
                Value::Array(items) => items.iter().for_each(|value| refs(value, out)),
                _ => {}
            }
        }
        let (_, api) = routes();
        let document = serde_json::to_value(&api).unwrap();
        let mut found = Vec::new();
        refs(&document, &mut found);
        let schemas = &document["components"]["schemas"];
        let dangling: Vec<&String> = found
            .iter()
            .filter(|target| {
                target
                    .strip_prefix("#/components/schemas/")
                    .is_some_and(|name| schemas.get(name).is_none())
            })
            .collect();
        assert!(dangling.is_empty(), "unresolved: {dangling:?}");
        assert!(schemas.get("GuardrailSide").is_some());
        let status = serde_json::to_string(&schemas["RunStatus"]).unwrap();
        assert!(status.contains("blocked"), "{status}");
    }
}
