//! A server's `sampling/createMessage`: answered by the model of the run whose call is in
//! flight (`in_flight.rs`), as one of the run's LLM calls (counted in its usage and budget,
//! traced with purpose `sampling`), or by `sampling_model`. `sampling = "approve"` asks the
//! user first (an elicitation with purpose `sampling`); `deny` refuses.
#![expect(
    deprecated,
    reason = "rmcp marks sampling deprecated (SEP-2577); servers still ask"
)]

use std::sync::Arc;

use agentloop_core::{
    CallPurpose, ModelRequest, Question, SamplingRefused, SamplingRequest, ToolChoice,
    protocol::{ChatMessage, ElicitationAction, ElicitationMode, ElicitationPurpose},
};
use rmcp::{
    ErrorData,
    model::{
        CreateMessageRequestParams, CreateMessageResult, Role, SamplingMessage,
        SamplingMessageContentBlock,
    },
};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::{
    in_flight::CallsInFlight,
    offer::{ClientOffer, SamplingPolicy},
};

/// Answers one `sampling/createMessage` of `server`.
pub(crate) async fn sample(
    server: &str,
    offer: &ClientOffer,
    calls: &CallsInFlight,
    params: CreateMessageRequestParams,
    cancelled: CancellationToken,
) -> Result<CreateMessageResult, ErrorData> {
    let refused = |why: String| {
        tracing::info!(server, %why, "refused the MCP server's sampling request");
        Err(ErrorData::invalid_request(why, None))
    };
    if offer.sampling == SamplingPolicy::Deny {
        return refused(format!(
            "agentloop does not answer sampling requests of this server (mcp_servers.{server}.sampling = \"deny\")"
        ));
    }
    if params.tools.as_ref().is_some_and(|tools| !tools.is_empty()) {
        return refused("agentloop does not offer tools in sampling requests".to_owned());
    }
    let asker = match calls.asker() {
        Ok(asker) => asker,
        Err(why) => return refused(why.reason().to_owned()),
    };
    let request = request(offer, &params)?;
    if offer.sampling == SamplingPolicy::Approve {
        let approval = asker.elicit(approval(server, &params));
        let answer = tokio::select! {
            answer = tokio::time::timeout(offer.elicitation_timeout, approval) => answer,
            () = cancelled.cancelled() => return refused("the server withdrew it".to_owned()),
        };
        match answer {
            Ok(answer) if answer.action == ElicitationAction::Accept => {}
            Ok(_) => return refused("the user did not approve it".to_owned()),
            Err(_elapsed) => {
                return refused("nobody approved it in time (elicitation_timeout_s)".to_owned());
            }
        }
    }
    let reply = tokio::select! {
        reply = asker.sample(request) => reply,
        () = cancelled.cancelled() => return refused("the server withdrew it".to_owned()),
    };
    match reply {
        Ok(reply) => {
            let text = reply.content.clone().unwrap_or_default();
            let model = reply
                .model
                .clone()
                .or_else(|| offer.sampling_model.clone())
                .unwrap_or_else(|| "agentloop".to_owned());
            let stop = match reply.finish_reason.as_deref() {
                Some("length" | "max_tokens") => CreateMessageResult::STOP_REASON_END_MAX_TOKEN,
                _ => CreateMessageResult::STOP_REASON_END_TURN,
            };
            Ok(
                CreateMessageResult::new(SamplingMessage::assistant_text(text), model)
                    .with_stop_reason(stop),
            )
        }
        Err(SamplingRefused::OverBudget) => refused(
            "the run's budget does not allow another LLM call ([agent.budget], the request's budget)"
                .to_owned(),
        ),
        Err(other) => refused(other.to_string()),
    }
}

/// The run's LLM call for `params`: its system prompt, then its messages as text.
fn request(
    offer: &ClientOffer,
    params: &CreateMessageRequestParams,
) -> Result<SamplingRequest, ErrorData> {
    let mut messages = Vec::with_capacity(params.messages.len() + 1);
    if let Some(system) = &params.system_prompt {
        messages.push(Arc::new(ChatMessage::system(system.clone())));
    }
    for message in &params.messages {
        let text = text_of(message);
        messages.push(Arc::new(match message.role {
            Role::User => ChatMessage::user(text),
            Role::Assistant => ChatMessage::assistant(text),
        }));
    }
    if params.messages.is_empty() {
        return Err(ErrorData::invalid_params(
            "the request has no messages",
            None,
        ));
    }
    let request = ModelRequest {
        model: offer.sampling_model.clone(),
        messages,
        tools: Vec::new(),
        tool_choice: ToolChoice::None,
        purpose: CallPurpose::Sampling,
        output: None,
    };
    Ok(SamplingRequest {
        request,
        max_tokens: u64::from(params.max_tokens),
    })
}

/// The text of a message; what is not text is named, not sent.
fn text_of(message: &SamplingMessage) -> String {
    let parts: Vec<String> = message
        .content
        .clone()
        .into_vec()
        .into_iter()
        .map(|block| match block {
            SamplingMessageContentBlock::Text(text) => text.text,
            SamplingMessageContentBlock::Image(_) => "[an image]".to_owned(),
            SamplingMessageContentBlock::Audio(_) => "[an audio clip]".to_owned(),
            SamplingMessageContentBlock::ToolUse(_) => "[a tool call]".to_owned(),
            SamplingMessageContentBlock::ToolResult(_) => "[a tool result]".to_owned(),
            _ => "[content agentloop cannot read]".to_owned(),
        })
        .collect();
    parts.join("\n")
}

/// The question that asks the user to approve a sampling request.
fn approval(server: &str, params: &CreateMessageRequestParams) -> Question {
    let last = params.messages.last().map(text_of).unwrap_or_default();
    Question {
        server: server.to_owned(),
        mode: ElicitationMode::Form,
        message: format!(
            "The MCP server '{server}' asks to use the model (up to {} tokens): {last}",
            params.max_tokens
        ),
        requested_schema: Some(json!({"type": "object", "properties": {}})),
        url: None,
        purpose: ElicitationPurpose::Sampling,
    }
}
