//! `[a2a_agents.NAME]`: a remote agent that speaks A2A (1.0, JSON-RPC) as the tool `a2a.NAME`,
//! called like a sub-agent. The card (`{url}/.well-known/agent-card.json`) names the
//! JSON-RPC endpoint; a call sends the question with `SendStreamingMessage` and follows the
//! task: its progress becomes `tool_progress` reports and nested events of the calling run
//! (`parent_run_id`, the remote task's id as their `run_id`), its answer the tool's result (a
//! `DataPart` as the structured result), the cost it reports (`metadata.usage.cost_usd`) the
//! call's cost. A task that asks for input ends the call with the question; the model answers
//! it with `task_id`. A call dropped before its task ended (its time limit, the process
//! stopping) cancels the remote task (`CancelTask`).

use std::sync::{Mutex, PoisonError};

use agentloop_core::{
    InvalidSetting, Tool, ToolContext, ToolError, ToolInfo, ToolOutput, ToolProgress,
    protocol::{Event, EventKind, RunStatus, Usage},
};
use async_trait::async_trait;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use uuid::Uuid;

/// `[a2a_agents.NAME]`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct A2aAgentConfig {
    /// Where the agent is: its card is at `{url}/.well-known/agent-card.json`.
    pub url: String,
    /// Its API key, sent as `Authorization: Bearer KEY`.
    pub key: Option<String>,
    /// The environment variable that holds its API key (instead of `key`).
    pub key_env: Option<String>,
    /// What the model reads about the agent; unset: the card's description.
    pub description: Option<String>,
}

impl A2aAgentConfig {
    pub fn validate(&self, name: &str) -> Result<(), InvalidSetting> {
        let key = format!("a2a_agents.{name}.url");
        if !(self.url.starts_with("http://") || self.url.starts_with("https://")) {
            let message = format!(
                "{key} must be an http:// or https:// address (got {:?})",
                self.url
            );
            return Err(InvalidSetting::new(key, message));
        }
        if self.key.is_some() && self.key_env.is_some() {
            let key = format!("a2a_agents.{name}.key");
            return Err(InvalidSetting::new(
                key,
                format!("a2a_agents.{name}: give key or key_env, not both"),
            ));
        }
        Ok(())
    }
}

/// The tool `a2a.NAME`.
pub struct RemoteAgent {
    info: ToolInfo,
    base: String,
    key: Option<String>,
    client: reqwest::Client,
    /// The JSON-RPC endpoint, once the card was read.
    endpoint: Mutex<Option<String>>,
}

impl RemoteAgent {
    pub fn new(name: &str, config: &A2aAgentConfig) -> Result<RemoteAgent, reqwest::Error> {
        let key = match &config.key_env {
            Some(variable) => std::env::var(variable).ok(),
            None => config.key.clone(),
        };
        let description = config.description.clone().unwrap_or_else(|| {
            format!("Ask the remote agent {name} (over A2A); it answers the question")
        });
        let schema = json!({
            "type": "object",
            "properties": {
                "question": {"type": "string", "description": "What to ask the agent, whole: it sees nothing else"},
                "task_id": {"type": "string", "description": "The task that asked for input, when this answers it"},
                "context_id": {"type": "string", "description": "The conversation to continue (a context id an earlier answer gave)"},
            },
            "required": ["question"],
            "additionalProperties": false,
        });
        let mut info = ToolInfo::new(format!("a2a.{name}"), description, schema);
        info.open_world_hint = Some(true);
        Ok(RemoteAgent {
            info,
            base: config.url.trim_end_matches('/').to_string(),
            key,
            client: reqwest::Client::builder().build()?,
            endpoint: Mutex::new(None),
        })
    }

    fn request(&self, builder: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        match &self.key {
            Some(key) => builder.bearer_auth(key),
            None => builder,
        }
    }

    /// The JSON-RPC endpoint its card names (read once).
    async fn endpoint(&self) -> Result<String, ToolError> {
        if let Some(endpoint) = self.lock().clone() {
            return Ok(endpoint);
        }
        let url = format!("{}/.well-known/agent-card.json", self.base);
        let unavailable =
            |why: String| ToolError::Unavailable(format!("the agent card at {url}: {why}"));
        let response = self
            .request(self.client.get(&url))
            .send()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        if !response.status().is_success() {
            return Err(unavailable(format!("HTTP {}", response.status())));
        }
        let card: Value = response
            .json()
            .await
            .map_err(|error| unavailable(error.to_string()))?;
        let endpoint = card["supportedInterfaces"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|interface| interface["protocolBinding"] == "JSONRPC")
            .and_then(|interface| interface["url"].as_str())
            .or_else(|| card["url"].as_str())
            .ok_or_else(|| unavailable("it names no JSON-RPC interface".to_string()))?
            .to_string();
        *self.lock() = Some(endpoint.clone());
        Ok(endpoint)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<String>> {
        self.endpoint.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The arguments of a call.
#[derive(Debug, Deserialize)]
struct Ask {
    question: String,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    context_id: Option<String>,
}

/// Cancels the remote task when the call is dropped before the task ended.
struct CancelOnDrop {
    client: reqwest::Client,
    endpoint: String,
    key: Option<String>,
    task: Option<String>,
    ended: bool,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let (Some(task), false) = (self.task.take(), self.ended) else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let mut request = self.client.post(&self.endpoint).json(&json!({
            "jsonrpc": "2.0", "id": "cancel", "method": "CancelTask", "params": {"id": task},
        }));
        if let Some(key) = &self.key {
            request = request.bearer_auth(key);
        }
        runtime.spawn(async move {
            if let Err(error) = request.send().await {
                tracing::warn!(%error, %task, "cannot cancel a remote A2A task");
            }
        });
    }
}

/// What the call learned of its task.
#[derive(Debug, Default)]
struct Followed {
    task: Option<String>,
    context: Option<String>,
    state: String,
    answer: String,
    data: Option<Value>,
    message: Option<String>,
    usage: Option<Value>,
}

impl Followed {
    /// Takes one stream result in; returns the progress message it carries, if any.
    fn push(&mut self, result: &Value) -> Option<(String, Option<Value>)> {
        let (status, task) = match (result.get("task"), result.get("statusUpdate")) {
            (Some(task), _) => {
                self.task = task["id"].as_str().map(str::to_string);
                self.context = task["contextId"].as_str().map(str::to_string);
                for artifact in task["artifacts"].as_array().into_iter().flatten() {
                    self.take_parts(&artifact["parts"], false);
                }
                self.usage = task["metadata"].get("usage").cloned().or(self.usage.take());
                (&task["status"], true)
            }
            (None, Some(update)) => {
                if let Some(usage) = update["metadata"].get("usage") {
                    self.usage = Some(usage.clone());
                }
                (&update["status"], false)
            }
            (None, None) => {
                if let Some(update) = result.get("artifactUpdate") {
                    let append = update["append"].as_bool().unwrap_or(false);
                    self.take_parts(&update["artifact"]["parts"], append);
                }
                return None;
            }
        };
        self.state = status["state"].as_str().unwrap_or_default().to_string();
        let message = &status["message"];
        let text: Vec<&str> = message["parts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|part| part["text"].as_str())
            .collect();
        if text.is_empty() || task {
            return None;
        }
        self.message = Some(text.join("\n"));
        Some((
            text.join("\n"),
            message["metadata"].get("agentloop").cloned(),
        ))
    }

    fn take_parts(&mut self, parts: &Value, append: bool) {
        let mut text = String::new();
        for part in parts.as_array().into_iter().flatten() {
            if let Some(chunk) = part["text"].as_str() {
                text.push_str(chunk);
            } else if let Some(data) = part.get("data") {
                self.data = Some(data.clone());
            }
        }
        if append {
            self.answer.push_str(&text);
        } else if !text.is_empty() || self.data.is_some() {
            self.answer = text;
        }
    }

    fn cost(&self) -> Option<f64> {
        self.usage.as_ref()?.get("cost_usd")?.as_f64()
    }
}

#[async_trait]
impl Tool for RemoteAgent {
    fn info(&self) -> &ToolInfo {
        &self.info
    }

    async fn call(&self, arguments: Value, context: ToolContext) -> Result<ToolOutput, ToolError> {
        let ask: Ask = serde_json::from_value(arguments)
            .map_err(|error| ToolError::InvalidArguments(error.to_string()))?;
        let endpoint = self.endpoint().await?;
        let mut message = json!({
            "messageId": context.idempotency_key(),
            "role": "ROLE_USER",
            "parts": [{"text": ask.question}],
        });
        if let Some(task) = &ask.task_id {
            message["taskId"] = json!(task);
        }
        if let Some(context_id) = &ask.context_id {
            message["contextId"] = json!(context_id);
        }
        let body = json!({
            "jsonrpc": "2.0", "id": context.call_id, "method": "SendStreamingMessage",
            "params": {"message": message},
        });
        let response = self
            .request(self.client.post(&endpoint))
            .header("accept", "text/event-stream")
            .json(&body)
            .send()
            .await
            .map_err(|error| ToolError::Unavailable(format!("{endpoint}: {error}")))?;
        if !response.status().is_success() {
            return Err(ToolError::Failed(format!(
                "{endpoint}: HTTP {}",
                response.status()
            )));
        }
        let mut guard = CancelOnDrop {
            client: self.client.clone(),
            endpoint: endpoint.clone(),
            key: self.key.clone(),
            task: None,
            ended: false,
        };
        let mut followed = Followed::default();
        let mut relay = Relay::new(&context);
        let mut bytes = response.bytes_stream();
        let mut buffer = String::new();
        let mut progress = 0.0;
        while let Some(chunk) = bytes.next().await {
            let chunk = chunk.map_err(|error| ToolError::Failed(format!("{endpoint}: {error}")))?;
            buffer.push_str(&String::from_utf8_lossy(&chunk));
            while let Some(end) = buffer.find("\n\n") {
                let frame: String = buffer.drain(..end + 2).collect();
                let data: String = frame
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim_start)
                    .collect::<Vec<_>>()
                    .join("\n");
                if data.is_empty() {
                    continue;
                }
                let Ok(response) = serde_json::from_str::<Value>(&data) else {
                    continue;
                };
                if let Some(error) = response.get("error") {
                    guard.ended = true;
                    let text = error["message"].as_str().unwrap_or("the agent refused");
                    return Err(ToolError::Failed(text.to_string()));
                }
                let said = followed.push(&response["result"]);
                if guard.task.is_none() {
                    guard.task.clone_from(&followed.task);
                    relay.started(&followed);
                }
                if let Some((text, event)) = said {
                    progress += 1.0;
                    context.report_progress(ToolProgress {
                        progress,
                        total: None,
                        message: Some(text),
                    });
                    relay.event(event);
                }
            }
        }
        guard.ended = true;
        relay.done(&followed);
        answer(&self.info.name, followed)
    }
}

/// The call's result from its task's last state.
fn answer(tool: &str, followed: Followed) -> Result<ToolOutput, ToolError> {
    let task = followed.task.clone().unwrap_or_default();
    match followed.state.as_str() {
        "TASK_STATE_COMPLETED" => {
            let mut output = match followed.data.clone() {
                Some(data) => ToolOutput::json(data),
                None => ToolOutput::text(followed.answer.clone()),
            };
            output.cost_usd = followed.cost();
            Ok(output)
        }
        "TASK_STATE_INPUT_REQUIRED" => Ok(ToolOutput::text(format!(
            "The agent needs input before it goes on: {} (answer it by calling {tool} again with \
             task_id {task:?} and the answer as the question)",
            followed.message.unwrap_or_default()
        ))),
        state => Err(ToolError::Failed(format!(
            "the agent's task {task} ended {}: {}",
            state.trim_start_matches("TASK_STATE_").to_lowercase(),
            followed.message.unwrap_or_default()
        ))),
    }
}

/// The remote task as nested events of the calling run.
struct Relay {
    sender: Option<tokio::sync::mpsc::UnboundedSender<Event>>,
    parent: Uuid,
    run_id: Uuid,
    seq: u64,
}

impl Relay {
    fn new(context: &ToolContext) -> Relay {
        Relay {
            sender: context.events.clone(),
            parent: context.run_id,
            run_id: Uuid::nil(),
            seq: 0,
        }
    }

    fn send(&mut self, kind: EventKind) {
        let Some(sender) = &self.sender else {
            return;
        };
        self.seq += 1;
        let _ = sender.send(Event {
            run_id: self.run_id,
            seq: self.seq,
            parent_run_id: Some(self.parent),
            kind,
        });
    }

    fn started(&mut self, followed: &Followed) {
        let id = |text: &Option<String>| text.as_deref().and_then(|id| Uuid::parse_str(id).ok());
        self.run_id = id(&followed.task).unwrap_or_else(Uuid::now_v7);
        let session_id = id(&followed.context).unwrap_or(self.run_id);
        self.send(EventKind::RunStarted { session_id });
    }

    /// A progress message's agentloop event (a remote agentloop's), when it carries one.
    fn event(&mut self, event: Option<Value>) {
        let Some(kind) = event.and_then(|event| serde_json::from_value::<EventKind>(event).ok())
        else {
            return;
        };
        if matches!(
            kind,
            EventKind::ToolSelected { .. } | EventKind::ToolExecuted { .. }
        ) {
            self.send(kind);
        }
    }

    fn done(&mut self, followed: &Followed) {
        let status = match followed.state.as_str() {
            "TASK_STATE_COMPLETED" => RunStatus::Completed,
            "TASK_STATE_INPUT_REQUIRED" => RunStatus::AwaitingInput,
            "TASK_STATE_CANCELED" => RunStatus::Cancelled,
            "TASK_STATE_REJECTED" => RunStatus::Blocked,
            _ => RunStatus::Failed,
        };
        let usage = followed
            .usage
            .clone()
            .and_then(|usage| serde_json::from_value::<Usage>(usage).ok())
            .unwrap_or_default();
        self.send(EventKind::Done {
            status,
            iterations: 0,
            tools_used: 0,
            message_id: None,
            usage,
            should_refresh: false,
            output: followed.data.clone(),
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_followed_task_gathers_its_answer_and_cost() {
        let mut followed = Followed::default();
        followed.push(&json!({"task": {"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}));
        let said = followed.push(&json!({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING",
            "message": {"parts": [{"text": "Calling x"}], "metadata": {"agentloop": {"type": "thinking", "iteration": 1}}}}}}));
        assert_eq!(said.unwrap().0, "Calling x");
        followed.push(
            &json!({"artifactUpdate": {"artifact": {"parts": [{"text": "Hel"}]}, "append": false}}),
        );
        followed.push(
            &json!({"artifactUpdate": {"artifact": {"parts": [{"text": "lo"}]}, "append": true}}),
        );
        followed.push(
            &json!({"statusUpdate": {"status": {"state": "TASK_STATE_COMPLETED"},
            "metadata": {"usage": {"cost_usd": 0.25}}}}),
        );
        assert_eq!(followed.answer, "Hello");
        let output = answer("a2a.x", followed).unwrap();
        assert_eq!(output.text, "Hello");
        assert_eq!(output.cost_usd, Some(0.25));
    }

    #[test]
    fn a_failed_task_is_a_tool_error_and_a_question_asks_for_the_task_id() {
        let mut failed = Followed::default();
        failed.push(
            &json!({"statusUpdate": {"status": {"state": "TASK_STATE_FAILED",
            "message": {"parts": [{"text": "no model"}]}}}}),
        );
        assert!(answer("a2a.x", failed).is_err());
        let mut asks = Followed::default();
        asks.push(&json!({"task": {"id": "t1", "status": {"state": "TASK_STATE_WORKING"}}}));
        asks.push(
            &json!({"statusUpdate": {"status": {"state": "TASK_STATE_INPUT_REQUIRED",
            "message": {"parts": [{"text": "Which one?"}]}}}}),
        );
        let output = answer("a2a.x", asks).unwrap();
        assert!(output.text.contains("Which one?") && output.text.contains("t1"));
    }

    #[test]
    fn the_url_must_be_http() {
        let bad = A2aAgentConfig {
            url: "ftp://x".into(),
            ..A2aAgentConfig::default()
        };
        assert!(bad.validate("x").is_err());
    }
}
