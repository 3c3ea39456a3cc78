//! `GET /v1/models`: the agents this server offers as models. The main agent is `agentloop`;
//! each sub-agent marked `public = true` (`[agents.NAME]`) is `NAME`, and a request that names
//! it runs with that agent's prompt, model, step limit and tools.

use agentloop_core::{RunContext, RunRequest};
use axum::{Json, extract::State};
use serde::Serialize;
use serde_json::{Value, json};
use utoipa::ToSchema;

use crate::{
    auth::User,
    error::{ApiError, ErrorBody},
    extract::PathId,
    state::{AppState, PublicAgent},
};

/// The model id of the main agent.
pub const MAIN_AGENT: &str = "agentloop";

/// OpenAI's model object.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelObject {
    pub id: String,
    /// `model`.
    pub object: &'static str,
    /// Always 0: an agent has no creation date.
    pub created: i64,
    /// `agentloop`.
    pub owned_by: &'static str,
}

fn model_object(id: &str) -> ModelObject {
    ModelObject {
        id: id.to_string(),
        object: "model",
        created: 0,
        owned_by: "agentloop",
    }
}

/// List the agents offered as models (OpenAI's `models.list`).
#[utoipa::path(
    get,
    path = "/v1/models",
    tag = "openai",
    responses(
        (status = 200, description = "`{object: \"list\", data: [model]}`: `agentloop` and each public sub-agent", body = Object),
        (status = 401, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn list_models(State(state): State<AppState>, User(_): User) -> Json<Value> {
    let mut data = vec![model_object(MAIN_AGENT)];
    data.extend(
        state
            .public_agents
            .iter()
            .filter(|agent| agent.name != MAIN_AGENT)
            .map(|agent| model_object(&agent.name)),
    );
    Json(json!({"object": "list", "data": data}))
}

/// One model (OpenAI's `models.retrieve`).
#[utoipa::path(
    get,
    path = "/v1/models/{id}",
    tag = "openai",
    params(("id" = String, Path, description = "`agentloop` or a public sub-agent's name")),
    responses(
        (status = 200, description = "The model", body = ModelObject),
        (status = 401, body = ErrorBody), (status = 404, body = ErrorBody),
    ),
    security(("api_key" = []))
)]
pub async fn get_model(
    State(state): State<AppState>,
    User(_): User,
    id: PathId,
) -> Result<Json<ModelObject>, ApiError> {
    agent_of(&state, Some(&id.0))?;
    Ok(Json(model_object(&id.0)))
}

/// The public sub-agent a request's `model` names; `None` for the main agent (`agentloop`, or
/// no model); 404 `model_not_found` for any other name.
pub fn agent_of<'a>(
    state: &'a AppState,
    model: Option<&str>,
) -> Result<Option<&'a PublicAgent>, ApiError> {
    match model {
        None | Some(MAIN_AGENT) => Ok(None),
        Some(name) => match state.public_agents.iter().find(|agent| agent.name == name) {
            Some(agent) => Ok(Some(agent)),
            None => Err(ApiError::new(
                axum::http::StatusCode::NOT_FOUND,
                "model_not_found",
                format!(
                    "the model {name:?} does not exist: GET /v1/models lists this server's \
                     agents (`{MAIN_AGENT}` and its public sub-agents)"
                ),
            )),
        },
    }
}

/// A run of `agent` (the main one when `None`) for `user`: its prompt, model, limit and tools.
pub fn request_for(agent: Option<&PublicAgent>, user: &str) -> RunRequest {
    let context = RunContext {
        user_id: Some(user.to_string()),
        workflow: agent.and_then(|agent| agent.workflow.clone()),
        ..RunContext::default()
    };
    match agent {
        None => RunRequest {
            context,
            ..RunRequest::default()
        },
        Some(agent) => RunRequest {
            system_prompt: Some(agent.system_prompt.clone()),
            model: agent.model.clone(),
            max_iterations: agent.max_iterations,
            context,
            ..RunRequest::default()
        },
    }
}

/// `prompt` with what the client's system messages (or `instructions`) say, added to it.
pub fn with_instructions(prompt: &str, instructions: &[String]) -> String {
    let mut prompt = prompt.to_string();
    if !instructions.is_empty() {
        prompt.push_str("\n\nWhat the application says:");
        for text in instructions {
            prompt.push_str("\n\n");
            prompt.push_str(text);
        }
    }
    prompt
}
