//! One `tools/call` of an agent: its run started (or a waiting run answered), followed to its
//! end with each step sent as `notifications/progress`, and its end as the tool's result.
//!
//! A run that waits for input asks the client through an elicitation form when the client
//! declared the capability: as an `elicitation/create` request in the call (protocol versions
//! with sessions), or as an `input_required` result whose `requestState` is the run's id (from
//! 2026-07-28, where a server sends no requests: the client answers the form and calls again
//! with the state and its answer). Otherwise the result says what waits and how to answer.

use agentloop_core::protocol::{
    Elicitation, ElicitationAction, ElicitationAnswer, ElicitationMode, EventKind, InputAnswer,
    InputRequest, RunStatus,
};
use futures::StreamExt;
use rmcp::{
    ErrorData, RoleServer,
    model::{
        CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ElicitRequest,
        ElicitRequestParams, InputRequest as McpInputRequest, InputRequests, InputRequiredResult,
        JsonObject, MetaObject, ProgressNotificationParam, ProgressToken, ProtocolVersion,
    },
    service::RequestContext,
};
use serde_json::{Value, json};
use uuid::Uuid;

use super::{
    input::{self, Reply},
    progress,
    tools::{Question, Typed},
};
use crate::{
    conversation,
    live::{Reader, Started},
    openai::models::{self, MAIN_AGENT},
    owned::owned_run,
    request_id::RequestScope,
    state::{AppState, PublicAgent},
};

/// The key of the one input request of an `input_required` result.
const INPUT_KEY: &str = "agentloop_input";

/// Answers a call of the agent `params.name` for `user`.
pub async fn call(
    state: &AppState,
    user: &str,
    params: CallToolRequestParams,
    context: RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let agent = agent_named(state, &params.name)?;
    let typed = match state.agent.settings().typed_output() {
        Ok(output) => output.map(|output| Typed::of(&output.spec).0),
        Err(_) => None,
    };
    let mut call = Call {
        state,
        user,
        progress: context.meta.get_progress_token().map(|token| (token, 0)),
        scope: RequestScope {
            id: crate::request_id::new_id(),
            expose_details: state.config.expose_error_details,
        },
        context,
    };
    let mut started = match call.begin(agent, &params).await {
        Ok(Begun::Run(started)) => started,
        Ok(Begun::Waits(waiting)) => return Ok(waiting.result().into()),
        Err(message) => return Ok(tool_error(message).into()),
    };
    loop {
        let Some(ended) = call.follow(started).await else {
            return Ok(tool_error("the call was cancelled, and its run with it").into());
        };
        match ended.status {
            RunStatus::Completed => return Ok(ended.answer(typed.as_ref()).into()),
            RunStatus::AwaitingInput => {}
            status => {
                let message = ended.error.clone().unwrap_or_else(|| {
                    format!(
                        "the agent's run ended {} without an answer",
                        status.as_str()
                    )
                });
                return Ok(with_ids(tool_error(message), ended.run_id, ended.session_id).into());
            }
        }
        let request = match ended.request.clone() {
            Some(request) => request,
            None => match crate::ag_ui::pending_request(state, ended.run_id).await {
                Ok(Some(request)) => request,
                _ => return Ok(tool_error("the run waits for input the server cannot read").into()),
            },
        };
        let waiting = Waiting {
            run_id: ended.run_id,
            session_id: ended.session_id,
            request,
        };
        match call.ask(&waiting).await {
            Asked::Answer(answer) => match call.resume(waiting.run_id, &answer).await {
                Ok(resumed) => started = resumed,
                Err(message) => return Ok(tool_error(message).into()),
            },
            Asked::Later(response) => return Ok(response),
            Asked::Cannot => return Ok(waiting.result().into()),
        }
    }
}

/// The public agent a tool's name names (`None`: the main agent); an unknown name is a
/// protocol error, as for any tool a server does not have.
fn agent_named<'a>(state: &'a AppState, name: &str) -> Result<Option<&'a PublicAgent>, ErrorData> {
    if name == MAIN_AGENT {
        return Ok(None);
    }
    match state.public_agents.iter().find(|agent| agent.name == name) {
        Some(agent) => Ok(Some(agent)),
        None => Err(ErrorData::invalid_params(
            format!("no tool {name:?}: tools/list lists this server's agents"),
            None,
        )),
    }
}

struct Call<'a> {
    state: &'a AppState,
    user: &'a str,
    context: RequestContext<RoleServer>,
    /// The client's progress token and the progress sent so far.
    progress: Option<(ProgressToken, u32)>,
    scope: RequestScope,
}

enum Begun {
    Run(Started),
    Waits(Waiting),
}

enum Asked {
    Answer(InputAnswer),
    /// The client answers in a later call (`input_required`).
    Later(CallToolResponse),
    /// No form could be shown or it was dismissed.
    Cannot,
}

impl Call<'_> {
    /// The run the call starts, or the waiting run it answers (`requestState` and the answer
    /// to the form; or `session_id` naming a session whose run waits, the question its answer).
    async fn begin(
        &mut self,
        agent: Option<&PublicAgent>,
        params: &CallToolRequestParams,
    ) -> Result<Begun, String> {
        if let Some(state) = &params.request_state {
            return self.answered(state, params).await;
        }
        let question = Question::read(params.arguments.as_ref())?;
        let mut session_id = None;
        if let Some(id) = question
            .session_id
            .as_deref()
            .filter(|id| !id.trim().is_empty())
        {
            let (id_of, session) = conversation::find(self.state.store.as_ref(), self.user, id)
                .await
                .map_err(|error| format!("the store failed: {error}"))?;
            match session {
                Some(session) if session.user_id != self.user => {
                    return Err(format!("there is no session {id:?} of yours"));
                }
                Some(_) => {
                    let last = self
                        .state
                        .store
                        .session_runs(id_of)
                        .await
                        .map_err(|error| format!("the store failed: {error}"))?
                        .pop();
                    if let Some(run) = last.filter(|run| run.status == RunStatus::AwaitingInput) {
                        let request = crate::ag_ui::pending_request(self.state, run.id)
                            .await
                            .ok()
                            .flatten()
                            .ok_or("the session's run waits for input the server cannot read")?;
                        let answer = input::answer_from_text(&request, &question.question)?;
                        return self.resume(run.id, &answer).await.map(Begun::Run);
                    }
                }
                None => {}
            }
            session_id = Some(id_of);
        }
        let mut request = models::request_for(agent, self.user);
        request.query = question.question;
        request.session_id = session_id;
        let started = self
            .state
            .runs
            .start(&self.state.agent, request, self.user, Reader::Events)
            .await
            .map_err(|error| error.message)?;
        Ok(Begun::Run(started))
    }

    /// A call again after `input_required`: `state` names the waiting run.
    async fn answered(
        &mut self,
        state: &str,
        params: &CallToolRequestParams,
    ) -> Result<Begun, String> {
        let not_ours = || String::from("requestState names no run of yours that waits for input");
        let run_id = Uuid::parse_str(state).map_err(|_| not_ours())?;
        let run = owned_run(self.state, run_id, self.user)
            .await
            .map_err(|_| not_ours())?;
        if run.status != RunStatus::AwaitingInput {
            return Err(format!(
                "run {run_id} does not wait for input any more (it is {})",
                run.status.as_str()
            ));
        }
        let request = crate::ag_ui::pending_request(self.state, run_id)
            .await
            .ok()
            .flatten()
            .ok_or("the run waits for input the server cannot read")?;
        let reply = params
            .input_responses
            .as_ref()
            .and_then(|responses| responses.get(INPUT_KEY))
            .map_or(Reply::Cancel, Reply::read);
        let waiting = Waiting {
            run_id,
            session_id: run.session_id,
            request,
        };
        match input::answer_of(&waiting.request, &reply) {
            Some(answer) => self.resume(run_id, &answer).await.map(Begun::Run),
            None => Ok(Begun::Waits(waiting)),
        }
    }

    async fn resume(&self, run_id: Uuid, answer: &InputAnswer) -> Result<Started, String> {
        let resumed = self
            .state
            .agent
            .resume(run_id, answer)
            .await
            .map_err(|error| crate::error::ApiError::from(error).message)?;
        self.state
            .runs
            .resume(&self.state.agent, resumed, self.user, Reader::Events)
            .map_err(|error| error.message)
    }

    /// Follows the run to its end (or its pause), each step a progress notification; `None`
    /// when the client cancelled the call (the run is cancelled too).
    async fn follow(&mut self, started: Started) -> Option<Ended> {
        let run = started.run.clone();
        // The client's cancel may drop this call's future instead of reaching the select
        // below: the run is cancelled then too.
        let mut abandoned = CancelOnDrop(Some(run.clone()));
        let mut events = std::pin::pin!(started.events());
        let mut ended = Ended {
            run_id: run.id,
            session_id: run.session_id,
            status: RunStatus::Failed,
            answer: String::new(),
            output: None,
            request: None,
            error: None,
        };
        loop {
            let event = tokio::select! {
                event = events.next() => event,
                () = self.context.ct.cancelled() => {
                    run.cancel();
                    return None;
                }
            };
            let Some(event) = event else {
                abandoned.0 = None;
                ended.error = Some(String::from(
                    "the run's events ended before the run did (the server is stopping); call again",
                ));
                return Some(ended);
            };
            if let Some(message) = progress::step_message(&event) {
                self.report(message).await;
            }
            if event.parent_run_id.is_some() {
                continue;
            }
            match event.kind {
                EventKind::FinalResponse { delta } => ended.answer.push_str(&delta),
                // A tool of the run asks (MCP elicitation): the run goes on, its call waits.
                EventKind::InputRequired {
                    elicitation: Some(asked),
                    ..
                } => self.relay(run.id, *asked),
                EventKind::InputRequired {
                    kind,
                    question,
                    calls,
                    elicitation,
                } => {
                    ended.request = Some(InputRequest {
                        kind,
                        question,
                        calls,
                        elicitation,
                    });
                }
                EventKind::Error { code, message } => {
                    let shown = crate::disclosure::run_error(&self.scope, run.id, code, &message);
                    ended.error = Some(shown.message);
                }
                EventKind::Done { status, output, .. } => {
                    abandoned.0 = None;
                    ended.status = status;
                    ended.output = output;
                    return Some(ended);
                }
                _ => {}
            }
        }
    }

    /// Hands a question a tool of the run asks (a form) to this call's client, when it can show
    /// forms, and its answer to the call that waits; in the background, as the run goes on.
    /// A client without forms (or a URL question) leaves the question to `POST
    /// /v1/runs/{id}/input`, and to its timeout.
    fn relay(&self, run_id: Uuid, asked: Elicitation) {
        let elicits = self
            .context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        let Some(schema) = asked.requested_schema.clone() else {
            return;
        };
        let Ok(requested_schema) = serde_json::from_value(schema) else {
            return;
        };
        if !elicits || asked.mode != ElicitationMode::Form {
            return;
        }
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message: asked.message.clone(),
            requested_schema,
        };
        let peer = self.context.peer.clone();
        let agent = self.state.agent.clone();
        tokio::spawn(async move {
            let reply = match peer.create_elicitation(params).await {
                Ok(result) => {
                    serde_json::to_value(&result).map_or(Reply::Cancel, |v| Reply::read(&v))
                }
                Err(error) => {
                    tracing::warn!(%error, %run_id, "the client's elicitation failed");
                    return;
                }
            };
            let (action, content) = match reply {
                Reply::Accept(content) => (ElicitationAction::Accept, Some(content)),
                Reply::Decline => (ElicitationAction::Decline, None),
                Reply::Cancel => (ElicitationAction::Cancel, None),
            };
            let answer = ElicitationAnswer {
                id: Some(asked.id),
                action,
                content,
            };
            if let Err(error) = agent.answer_question(run_id, answer) {
                tracing::info!(%error, %run_id, "the client's answer to a tool's question was not taken");
            }
        });
    }

    /// One `notifications/progress`, when the client asked for them.
    async fn report(&mut self, message: String) {
        let Some((token, sent)) = &mut self.progress else {
            return;
        };
        *sent += 1;
        let notification =
            ProgressNotificationParam::new(token.clone(), f64::from(*sent)).with_message(message);
        if let Err(error) = self.context.peer.notify_progress(notification).await {
            tracing::debug!(%error, "a progress notification was not sent");
        }
    }

    /// Asks the client for what `waiting` waits for, when it can show a form.
    async fn ask(&self, waiting: &Waiting) -> Asked {
        let elicits = self
            .context
            .client_capabilities()
            .is_some_and(|capabilities| capabilities.elicitation.is_some());
        let client_tools = waiting.request.calls.iter().any(|call| call.client);
        if !elicits || client_tools {
            return Asked::Cannot;
        }
        let (message, schema) = input::form(&waiting.request);
        let Ok(requested_schema) = serde_json::from_value(schema) else {
            return Asked::Cannot;
        };
        let params = ElicitRequestParams::FormElicitationParams {
            meta: None,
            message,
            requested_schema,
        };
        let stateless = self
            .context
            .protocol_version()
            .is_some_and(|v| v.as_str() >= ProtocolVersion::V_2026_07_28.as_str());
        if stateless {
            let mut requests = InputRequests::new();
            requests.insert(
                INPUT_KEY.to_string(),
                McpInputRequest::Elicitation(ElicitRequest::new(params)),
            );
            let result = InputRequiredResult::new(Some(requests), Some(waiting.run_id.to_string()));
            return Asked::Later(CallToolResponse::InputRequired(result));
        }
        match self.context.peer.create_elicitation(params).await {
            Ok(result) => {
                let reply =
                    serde_json::to_value(&result).map_or(Reply::Cancel, |v| Reply::read(&v));
                match input::answer_of(&waiting.request, &reply) {
                    Some(answer) => Asked::Answer(answer),
                    None => Asked::Cannot,
                }
            }
            Err(error) => {
                tracing::warn!(%error, run_id = %waiting.run_id, "the client's elicitation failed");
                Asked::Cannot
            }
        }
    }
}

/// Cancels its run when dropped still holding it: a call that ends before its run did.
struct CancelOnDrop(Option<std::sync::Arc<crate::live::LiveRun>>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(run) = self.0.take() {
            run.cancel();
        }
    }
}

/// A run that waits for input.
struct Waiting {
    run_id: Uuid,
    session_id: Uuid,
    request: InputRequest,
}

impl Waiting {
    /// The result that says what waits and how to answer.
    fn result(&self) -> CallToolResult {
        let text = input::needs_input_text(&self.request, self.run_id, self.session_id);
        let mut result = with_ids(
            CallToolResult::success(vec![ContentBlock::text(text)]),
            self.run_id,
            self.session_id,
        );
        if let Some(meta) = &mut result.meta {
            meta.0.insert(
                "agentloop/input_required".into(),
                serde_json::to_value(&self.request).unwrap_or(Value::Null),
            );
        }
        result
    }
}

/// How a run ended, as its events told.
struct Ended {
    run_id: Uuid,
    session_id: Uuid,
    status: RunStatus,
    answer: String,
    output: Option<Value>,
    request: Option<InputRequest>,
    error: Option<String>,
}

impl Ended {
    /// The answer as the tool's result: the text, or the typed value as structured content
    /// (and its JSON as the text, for clients that read only text).
    fn answer(&self, typed: Option<&Typed>) -> CallToolResult {
        let result = match (typed, &self.output) {
            (Some(typed), Some(value)) => {
                let mut result = CallToolResult::structured(typed.content(value.clone()));
                result.content = vec![ContentBlock::text(value.to_string())];
                result
            }
            _ => CallToolResult::success(vec![ContentBlock::text(self.answer.clone())]),
        };
        with_ids(result, self.run_id, self.session_id)
    }
}

/// `result` with the run's and the session's ids in `_meta` (`agentloop/run_id`,
/// `agentloop/session_id`): the session continues with `session_id`.
fn with_ids(mut result: CallToolResult, run_id: Uuid, session_id: Uuid) -> CallToolResult {
    let mut meta = JsonObject::new();
    meta.insert("agentloop/run_id".into(), json!(run_id));
    meta.insert("agentloop/session_id".into(), json!(session_id));
    result.meta = Some(MetaObject(meta));
    result
}

fn tool_error(message: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(message.into())])
}
