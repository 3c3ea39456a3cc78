use std::collections::VecDeque;
use std::sync::Mutex;

use agentloop_core::protocol::Role;
use agentloop_core::{CallPurpose, ToolSpec};
use serde_json::{Value, json};

use super::*;

/// Answers from a list and keeps every request; streams each reply's text like a real client,
/// so a leak of raw JSON to the caller would show.
struct Canned {
    replies: Mutex<VecDeque<Result<ModelReply, LlmError>>>,
    requests: Mutex<Vec<ModelRequest>>,
}

impl Canned {
    fn new(replies: Vec<Result<ModelReply, LlmError>>) -> Arc<Self> {
        Arc::new(Self {
            replies: Mutex::new(replies.into()),
            requests: Mutex::new(Vec::new()),
        })
    }

    fn requests(&self) -> Vec<ModelRequest> {
        self.requests.lock().unwrap().clone()
    }
}

#[async_trait]
impl Llm for Canned {
    async fn complete(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelReply, LlmError> {
        self.requests.lock().unwrap().push(request.clone());
        let reply = self
            .replies
            .lock()
            .unwrap()
            .pop_front()
            .expect("a canned reply is left");
        if let Some(text) = reply
            .as_ref()
            .ok()
            .and_then(|reply| reply.content.as_deref())
        {
            on_text(text);
        }
        reply
    }
}

fn text(content: &str) -> Result<ModelReply, LlmError> {
    Ok(ModelReply {
        content: Some(content.into()),
        tool_calls: Vec::new(),
        finish_reason: Some("stop".into()),
        usage: Some(Usage {
            prompt_tokens: 10,
            completion_tokens: 5,
            ..Usage::default()
        }),
        model: None,
        id: None,
    })
}

fn request(tool_choice: ToolChoice) -> ModelRequest {
    ModelRequest {
        model: None,
        messages: vec![
            Arc::new(ChatMessage::system("You are helpful.")),
            Arc::new(ChatMessage::user("echo hi")),
        ],
        tools: vec![Arc::new(ToolSpec {
            name: "test__echo".into(),
            description: "Echoes the text.".into(),
            parameters: Arc::new(json!({"type": "object"})),
        })],
        tool_choice,
        purpose: match tool_choice {
            ToolChoice::Auto => CallPurpose::Step,
            ToolChoice::None => CallPurpose::Finalize,
        },
        output: None,
    }
}

/// Runs one `complete` and returns the reply and what reached `on_text`.
async fn complete(
    inner: &Arc<Canned>,
    request: &ModelRequest,
) -> (Result<ModelReply, LlmError>, Vec<String>) {
    let planner = JsonToolCalling::new(inner.clone());
    let mut seen = Vec::new();
    let mut on_text = |text: &str| seen.push(text.to_string());
    let reply = planner.complete(request, &mut on_text).await;
    (reply, seen)
}

#[tokio::test]
async fn a_tool_action_becomes_a_tool_call_and_only_the_reasoning_is_shown() {
    let inner = Canned::new(vec![text(
        r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "hi"}, "reasoning": "The user asked for an echo."}"#,
    )]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls.len(), 1);
    let call = &reply.tool_calls[0];
    assert_eq!(call.name, "test__echo");
    assert_eq!(call.arguments, r#"{"text":"hi"}"#);
    assert!(
        call.id.starts_with("call_") && call.id.len() > 10,
        "{}",
        call.id
    );
    assert_eq!(
        reply.content.as_deref(),
        Some("The user asked for an echo.")
    );
    assert_eq!(seen, ["The user asked for an echo."]);
    assert_eq!(reply.finish_reason.as_deref(), Some("stop"));
    assert_eq!(reply.usage.map(|u| u.total()), Some(15));

    let sent = &inner.requests()[0];
    assert!(sent.tools.is_empty());
    assert_eq!(sent.messages[1].role, Role::System);
    assert!(sent.messages[1].text_content().contains("test__echo"));
}

#[tokio::test]
async fn a_tool_action_without_reasoning_shows_nothing_and_ids_differ() {
    let reply = r#"{"action": "tool", "tool": "test__echo"}"#;
    let inner = Canned::new(vec![text(reply), text(reply)]);
    let (first, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    let (second, _) = complete(&inner, &request(ToolChoice::Auto)).await;
    let (first, second) = (first.unwrap(), second.unwrap());
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(first.content, None);
    assert_eq!(first.tool_calls[0].arguments, "{}");
    assert_ne!(first.tool_calls[0].id, second.tool_calls[0].id);
}

#[tokio::test]
async fn a_finalize_action_is_the_answer_shown_once() {
    let inner = Canned::new(vec![text(
        "```json\n{\"action\": \"finalize\", \"answer\": \"hi\"}\n```",
    )]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    let reply = reply.unwrap();
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.content.as_deref(), Some("hi"));
    assert_eq!(seen, ["hi"]);
    assert_eq!(inner.requests().len(), 1);
}

#[tokio::test]
async fn a_malformed_reply_is_sent_back_once_with_the_error() {
    let inner = Canned::new(vec![
        text("I will call echo now"),
        text(r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "hi"}}"#),
    ]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls[0].name, "test__echo");
    assert!(
        seen.is_empty(),
        "the broken reply never reaches the user: {seen:?}"
    );
    assert_eq!(
        reply.usage.map(|u| u.total()),
        Some(30),
        "both attempts count"
    );

    let requests = inner.requests();
    assert_eq!(requests.len(), 2);
    let retry = &requests[1].messages;
    assert_eq!(retry.len(), requests[0].messages.len() + 2);
    let echoed = &retry[retry.len() - 2];
    assert_eq!(echoed.role, Role::Assistant);
    assert_eq!(echoed.text_content(), "I will call echo now");
    let correction = &retry[retry.len() - 1];
    assert_eq!(correction.role, Role::User);
    assert!(
        correction
            .text_content()
            .contains("could not be read: the reply holds no JSON object"),
        "{}",
        correction.text_content()
    );
}

#[tokio::test]
async fn two_malformed_replies_give_an_empty_reply() {
    let inner = Canned::new(vec![text("no json"), text("{\"action\": \"dance\"}")]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    let reply = reply.unwrap();
    assert_eq!(reply.content, None);
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.text(), None);
    assert_eq!(reply.usage.map(|u| u.total()), Some(30));
    assert!(seen.is_empty(), "{seen:?}");
    assert_eq!(inner.requests().len(), 2);
}

#[tokio::test]
async fn the_forced_summary_refuses_a_tool_action_and_takes_the_answer() {
    let inner = Canned::new(vec![
        text(r#"{"action": "tool", "tool": "test__echo"}"#),
        text(r#"{"action": "finalize", "answer": "Done."}"#),
    ]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::None)).await;
    let reply = reply.unwrap();
    assert!(reply.tool_calls.is_empty());
    assert_eq!(reply.content.as_deref(), Some("Done."));
    assert_eq!(seen, ["Done."]);
    let requests = inner.requests();
    let correction = requests[1]
        .messages
        .last()
        .unwrap()
        .text_content()
        .to_string();
    assert!(
        correction.contains("calling tools is not possible now"),
        "{correction}"
    );
}

#[tokio::test]
async fn errors_of_the_inner_llm_pass_through() {
    let error = LlmError::Rejected {
        status: 400,
        message: "bad request".into(),
    };
    let inner = Canned::new(vec![Err(error.clone())]);
    let (reply, seen) = complete(&inner, &request(ToolChoice::Auto)).await;
    assert_eq!(reply, Err(error.clone()));
    assert!(seen.is_empty());

    let inner = Canned::new(vec![text("garbage"), Err(LlmError::TruncatedStream)]);
    let (reply, _) = complete(&inner, &request(ToolChoice::Auto)).await;
    assert_eq!(reply, Err(LlmError::TruncatedStream));
}

#[tokio::test]
async fn a_made_up_tool_name_is_passed_through() {
    let inner = Canned::new(vec![text(
        r#"{"action": "tool", "tool": "delete_everything", "parameters": {}}"#,
    )]);
    let (reply, _) = complete(&inner, &request(ToolChoice::Auto)).await;
    let reply = reply.unwrap();
    assert_eq!(reply.tool_calls[0].name, "delete_everything");
    let arguments: Value = serde_json::from_str(&reply.tool_calls[0].arguments).unwrap();
    assert_eq!(arguments, json!({}));
}

#[tokio::test]
async fn plans_and_reviews_keep_their_own_json_and_lose_only_native_tools() {
    let plan = r#"{"goal": "echo", "sub_tasks": []}"#;
    let inner = Canned::new(vec![text(plan)]);
    let mut original = request(ToolChoice::None);
    original.purpose = CallPurpose::Plan;
    let (reply, seen) = complete(&inner, &original).await;
    let reply = reply.unwrap();
    assert_eq!(
        reply.content.as_deref(),
        Some(plan),
        "passed through unread"
    );
    assert_eq!(seen, [plan], "the caller decides what to show");
    let sent = &inner.requests()[0];
    assert!(sent.tools.is_empty());
    assert_eq!(sent.purpose, CallPurpose::Plan);
    assert!(!sent.messages[1].text_content().contains(r#""action""#));
}
