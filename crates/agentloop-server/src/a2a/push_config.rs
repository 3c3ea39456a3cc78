//! The push notification configs of a task (A2A's `TaskPushNotificationConfig`): set with
//! `CreateTaskPushNotificationConfig` (or with the message that begins the task, in its
//! `configuration`), read, listed and deleted; kept in the store's outbox (`push`).

use agentloop_core::{PushOutbox, PushTarget, protocol::RunInfo};
use serde_json::{Value, json};
use uuid::Uuid;

use super::call::{Answer, Call, RpcError, code, required_str};
use crate::{error::ApiError, owned::owned_run};

/// The outbox, or the error of a server without one.
pub fn outbox<'a>(call: &'a Call<'_>) -> Result<&'a dyn PushOutbox, RpcError> {
    call.state.push.as_deref().ok_or_else(|| {
        RpcError::new(
            code::PUSH_NOT_SUPPORTED,
            "push notifications need a store (this server has none)",
        )
    })
}

/// The run of the task `params.taskId`, when it is the caller's.
async fn task_run(call: &Call<'_>) -> Result<RunInfo, RpcError> {
    let id = required_str(&call.params, "taskId")?;
    let run_id = Uuid::parse_str(id).map_err(|_| RpcError::task_not_found(id))?;
    owned_run(call.state, run_id, call.user)
        .await
        .map_err(|_| RpcError::task_not_found(id))
}

/// The target a config (`TaskPushNotificationConfig`'s JSON) names, for the run `run_id` of
/// `user_id`, told only of the state changes after `after_seq`.
pub fn target_of(
    config: &Value,
    run_id: Uuid,
    user_id: &str,
    after_seq: u64,
) -> Result<PushTarget, RpcError> {
    let url = config["url"].as_str().unwrap_or_default();
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(RpcError::invalid_params(
            "url: the http:// or https:// address notifications are posted to",
        ));
    }
    let text = |value: &Value| {
        value
            .as_str()
            .filter(|text| !text.is_empty())
            .map(str::to_string)
    };
    Ok(PushTarget {
        run_id,
        id: text(&config["id"]).unwrap_or_else(|| Uuid::now_v7().to_string()),
        user_id: user_id.to_string(),
        url: url.to_string(),
        token: text(&config["token"]),
        auth_scheme: text(&config["authentication"]["scheme"]),
        auth_credentials: text(&config["authentication"]["credentials"]),
        after_seq,
    })
}

/// A target as A2A's config.
fn config_of(target: &PushTarget) -> Value {
    let mut config = json!({
        "id": target.id,
        "taskId": target.run_id.to_string(),
        "url": target.url,
    });
    if let Some(token) = &target.token {
        config["token"] = json!(token);
    }
    if let Some(scheme) = &target.auth_scheme {
        config["authentication"] = json!({"scheme": scheme});
        if let Some(credentials) = &target.auth_credentials {
            config["authentication"]["credentials"] = json!(credentials);
        }
    }
    config
}

fn store_error(error: agentloop_core::StoreError) -> RpcError {
    ApiError::from(error).into()
}

pub async fn create(call: Call<'_>) -> Result<Answer, RpcError> {
    let outbox = outbox(&call)?;
    let run = task_run(&call).await?;
    let last = call
        .state
        .store
        .events(run.id, 0)
        .await
        .map_err(store_error)?
        .last()
        .map_or(0, |event| event.seq);
    let target = target_of(&call.params, run.id, &run.user_id, last)?;
    outbox.put_push_target(&target).await.map_err(store_error)?;
    Ok(Answer::One(config_of(&target)))
}

pub async fn get(call: Call<'_>) -> Result<Answer, RpcError> {
    let outbox = outbox(&call)?;
    let run = task_run(&call).await?;
    let id = required_str(&call.params, "id")?;
    let targets = outbox.push_targets(run.id).await.map_err(store_error)?;
    let target = targets
        .iter()
        .find(|target| target.id == id)
        .ok_or_else(|| {
            RpcError::invalid_params(format!("id: task {} has no push config {id:?}", run.id))
        })?;
    Ok(Answer::One(config_of(target)))
}

pub async fn list(call: Call<'_>) -> Result<Answer, RpcError> {
    let outbox = outbox(&call)?;
    let run = task_run(&call).await?;
    let targets = outbox.push_targets(run.id).await.map_err(store_error)?;
    let configs: Vec<Value> = targets.iter().map(config_of).collect();
    Ok(Answer::One(json!({"configs": configs})))
}

pub async fn delete(call: Call<'_>) -> Result<Answer, RpcError> {
    let outbox = outbox(&call)?;
    let run = task_run(&call).await?;
    let id = required_str(&call.params, "id")?;
    if !outbox
        .delete_push_target(run.id, id)
        .await
        .map_err(store_error)?
    {
        return Err(RpcError::invalid_params(format!(
            "id: task {} has no push config {id:?}",
            run.id
        )));
    }
    Ok(Answer::One(json!({})))
}
