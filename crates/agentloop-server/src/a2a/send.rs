//! `SendMessage` and `SendStreamingMessage`: a message without a `taskId` begins a run (a
//! task) in the session its `contextId` names (a new one without); a message with the `taskId`
//! of a task in `TASK_STATE_INPUT_REQUIRED` is its answer (the question's answer, or yes/no to
//! the calls waiting for approval), and the same task goes on.

use agentloop_core::{
    OutputSpec,
    protocol::{InputAnswer, InputKind, InputRequest, RunStatus},
};
use futures::StreamExt;
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    call::{Answer, Call, RpcError, code},
    follow, push_config,
    task::{TaskFold, TaskState},
};
use crate::{
    live::{Reader, Started},
    owned::{owned_run, owned_session},
};

/// What a message says (`params.message`, A2A's `Message`).
#[derive(Debug, Default, PartialEq)]
struct Message {
    /// Its text parts, joined by a blank line.
    text: String,
    /// Its data parts.
    data: Vec<Value>,
    task_id: Option<String>,
    context_id: Option<String>,
    /// `metadata.output` (of the message or the request): the typed answer asked for.
    output: Option<OutputSpec>,
}

impl Message {
    fn read(params: &Value) -> Result<Message, RpcError> {
        let message = &params["message"];
        if !message.is_object() {
            return Err(RpcError::invalid_params("message: required"));
        }
        let parts = message["parts"]
            .as_array()
            .ok_or_else(|| RpcError::invalid_params("message.parts: required"))?;
        let mut texts = Vec::new();
        let mut data = Vec::new();
        for (index, part) in parts.iter().enumerate() {
            if let Some(text) = part["text"].as_str() {
                texts.push(text.to_string());
            } else if let Some(value) = part.get("data") {
                data.push(value.clone());
            } else {
                return Err(RpcError::new(
                    -32005,
                    format!("message.parts[{index}]: only text and data parts are taken"),
                ));
            }
        }
        let id = |field: &str| {
            message[field]
                .as_str()
                .filter(|id| !id.is_empty())
                .map(str::to_string)
        };
        let output = match message["metadata"]
            .get("output")
            .or_else(|| params["metadata"].get("output"))
        {
            None | Some(Value::Null) => None,
            Some(spec) => Some(output_spec(spec)?),
        };
        Ok(Message {
            text: texts.join("\n\n"),
            data,
            task_id: id("taskId"),
            context_id: id("contextId"),
            output,
        })
    }
}

/// `metadata.output`: `{schema, name?, strict?}`, or the JSON Schema itself.
fn output_spec(spec: &Value) -> Result<OutputSpec, RpcError> {
    if !spec.is_object() {
        return Err(RpcError::invalid_params(
            "metadata.output: a JSON Schema, or {schema, name, strict}",
        ));
    }
    let schema = spec.get("schema").unwrap_or(spec);
    Ok(OutputSpec {
        name: spec["name"].as_str().unwrap_or("answer").to_string(),
        schema: schema.clone(),
        strict: spec["strict"].as_bool().unwrap_or(false),
    })
}

pub async fn send_message(call: Call<'_>, streaming: bool) -> Result<Answer, RpcError> {
    let message = Message::read(&call.params)?;
    let push = match call.params["configuration"].get("taskPushNotificationConfig") {
        Some(config) if config.is_object() => {
            push_config::outbox(&call)?;
            // Checked before the task begins; its run id is set once it has one.
            push_config::target_of(config, Uuid::nil(), call.user, 0)?;
            Some(config.clone())
        }
        _ => None,
    };
    let return_now = call.params["configuration"]["returnImmediately"]
        .as_bool()
        .unwrap_or(false);
    let reader = match streaming || !return_now {
        true => Reader::Events,
        false => Reader::Outcome,
    };
    let (started, question) = match &message.task_id {
        Some(task_id) => answer_task(&call, task_id, &message, reader).await?,
        None => (begin(&call, &message, reader).await?, message.text.clone()),
    };
    let run = started.run.clone();
    if let Some(config) = &push {
        let target = push_config::target_of(config, run.id, call.user, run.base_seq)?;
        let outbox = push_config::outbox(&call)?;
        outbox
            .put_push_target(&target)
            .await
            .map_err(|error| RpcError::from(crate::error::ApiError::from(error)))?;
    }
    let mut fold = TaskFold::new(run.id, run.session_id, Some(question));
    let scope = crate::request_id::current();
    if run.base_seq > 0 {
        let earlier = call
            .state
            .store
            .events(run.id, 0)
            .await
            .map_err(|error| RpcError::from(crate::error::ApiError::from(error)))?;
        for event in earlier.iter().filter(|event| event.seq <= run.base_seq) {
            fold.push(event, |event| super::call::shown_error(&scope, event));
        }
    }
    if !started.reads_events() {
        drop(started);
        return Ok(Answer::One(json!({"task": fold.task()})));
    }
    let events = follow::until_done(started.events().boxed());
    if !streaming {
        let mut events = std::pin::pin!(events);
        while let Some(event) = events.next().await {
            fold.push(&event, |event| super::call::shown_error(&scope, event));
        }
        return Ok(Answer::One(json!({"task": fold.task()})));
    }
    Ok(Answer::Stream(follow::updates(fold, events, scope)))
}

/// Begins the run of a new task.
async fn begin(call: &Call<'_>, message: &Message, reader: Reader) -> Result<Started, RpcError> {
    if message.text.trim().is_empty() {
        return Err(RpcError::invalid_params(
            "message.parts: a new task needs a text part (its question)",
        ));
    }
    let mut request = crate::openai::models::request_for(None, call.user);
    request.query = message.text.clone();
    request.traceparent = call.traceparent.clone();
    request.output = message.output.clone();
    if let Some(context) = &message.context_id {
        request.session_id = Some(match Uuid::parse_str(context) {
            Ok(session) => {
                owned_session(call.state, session, call.user)
                    .await
                    .map_err(|_| {
                        RpcError::invalid_params(format!(
                            "contextId {context}: no such context of yours (leave it out to \
                             begin one)"
                        ))
                    })?;
                session
            }
            Err(_) => crate::conversation::derived("agentloop-a2a", call.user, context),
        });
    }
    let started = Box::pin(
        call.state
            .runs
            .start(&call.state.agent, request, call.user, reader),
    )
    .await?;
    Ok(started)
}

/// Gives the task `task_id`, waiting for input, the message as its answer; the run goes on.
async fn answer_task(
    call: &Call<'_>,
    task_id: &str,
    message: &Message,
    reader: Reader,
) -> Result<(Started, String), RpcError> {
    let run_id = Uuid::parse_str(task_id).map_err(|_| RpcError::task_not_found(task_id))?;
    let run = owned_run(call.state, run_id, call.user)
        .await
        .map_err(|_| RpcError::task_not_found(task_id))?;
    if run.status != RunStatus::AwaitingInput {
        let state = TaskState::of(run.status);
        let hint = match state.is_final() {
            true => "a task that ended takes no more messages: send one with its contextId",
            false => "the task is working: SubscribeToTask follows it",
        };
        return Err(RpcError::new(
            code::UNSUPPORTED_OPERATION,
            format!("task {task_id} is {}: {hint}", state.wire()),
        ));
    }
    let pending = crate::ag_ui::pending_request(call.state, run_id).await?;
    let answer = answer_of(pending.as_ref(), message)?;
    let resumed = call
        .state
        .agent
        .resume(run_id, &answer)
        .await
        .map_err(crate::error::ApiError::from)?;
    let started = call
        .state
        .runs
        .resume(&call.state.agent, resumed, call.user, reader)?;
    Ok((started, run.query))
}

/// The answer a message gives to what the run waits for: a data part in agentloop's own shape
/// (`{answer, approve, deny}`), else its text: the question's answer, or for approvals "yes"
/// (approve every call) or anything else (deny them).
fn answer_of(pending: Option<&InputRequest>, message: &Message) -> Result<InputAnswer, RpcError> {
    let own = message.data.iter().find(|data| {
        ["answer", "approve", "deny"]
            .iter()
            .any(|key| data.get(key).is_some())
    });
    if let Some(own) = own {
        return serde_json::from_value(own.clone()).map_err(|error| {
            RpcError::invalid_params(format!("message.parts: the answer's data part: {error}"))
        });
    }
    let mut answer = InputAnswer::default();
    let text = message.text.trim();
    match pending {
        Some(request) if request.kind == InputKind::Approval => {
            let yes = matches!(
                text.to_lowercase().trim_end_matches(['.', '!']),
                "yes" | "y" | "approve" | "approved" | "ok" | "okay" | "allow"
            );
            for call in &request.calls {
                match yes && !call.client {
                    true => answer.approve.push(call.call_id.clone()),
                    false => answer.deny.push(call.call_id.clone()),
                }
            }
        }
        _ => {
            if text.is_empty() {
                return Err(RpcError::invalid_params(
                    "message.parts: the task asks a question: answer it with a text part",
                ));
            }
            answer.answer = Some(text.to_string());
        }
    }
    Ok(answer)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use agentloop_core::protocol::PendingCall;

    use super::*;

    fn message(parts: Value) -> Message {
        Message::read(&json!({"message": {"role": "ROLE_USER", "messageId": "m", "parts": parts}}))
            .unwrap()
    }

    fn approval() -> InputRequest {
        InputRequest {
            kind: InputKind::Approval,
            question: None,
            calls: vec![PendingCall {
                call_id: "c1".into(),
                tool: "test.record".into(),
                arguments: json!({}),
                client: false,
            }],
            elicitation: None,
        }
    }

    #[test]
    fn a_message_is_its_text_and_data_parts_and_files_are_refused() {
        let read = message(json!([{"text": "a"}, {"data": {"x": 1}}, {"text": "b"}]));
        assert_eq!(read.text, "a\n\nb");
        assert_eq!(read.data, [json!({"x": 1})]);
        let file = Message::read(&json!({"message": {"parts": [{"url": "https://x"}]}}));
        assert_eq!(file.unwrap_err().code, -32005);
        assert!(Message::read(&json!({})).is_err());
        let typed = Message::read(&json!({"message": {"parts": [{"text": "a"}],
            "metadata": {"output": {"type": "object"}}}}))
        .unwrap();
        assert_eq!(typed.output.unwrap().schema, json!({"type": "object"}));
    }

    #[test]
    fn yes_approves_the_calls_anything_else_denies_them_and_a_question_takes_the_text() {
        let yes = answer_of(Some(&approval()), &message(json!([{"text": "Yes."}]))).unwrap();
        assert_eq!(yes.approve, ["c1"]);
        let no = answer_of(Some(&approval()), &message(json!([{"text": "not now"}]))).unwrap();
        assert_eq!(no.deny, ["c1"]);
        let own = answer_of(
            Some(&approval()),
            &message(json!([{"data": {"deny": ["c1"]}}])),
        )
        .unwrap();
        assert_eq!(own.deny, ["c1"]);
        let clarification = InputRequest {
            kind: InputKind::Clarification,
            question: Some("Which?".into()),
            calls: Vec::new(),
            elicitation: None,
        };
        let told = answer_of(Some(&clarification), &message(json!([{"text": "Apollo"}]))).unwrap();
        assert_eq!(told.answer.as_deref(), Some("Apollo"));
        assert!(answer_of(Some(&clarification), &message(json!([]))).is_err());
    }
}
