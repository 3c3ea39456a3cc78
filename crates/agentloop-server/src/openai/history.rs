//! Which session a Chat Completions request continues when it names none. A client of this API
//! sends the whole conversation every time; the session already has it. Each run a request
//! starts gets an id derived from the user and a hash of the messages up to its question
//! (`run_key`). The next request's history ends with that question and the run's answer: the
//! messages up to its last user message hash to the same key, so one lookup of a run by id
//! finds the session. A candidate is taken only when the session went no further (its last run
//! is that run) and, for an answer, when the client's copy of it is the stored one: else the
//! sent history is not a prefix of what is stored, and the request starts a new session that
//! shows the model the sent history.
//!
//! The same conversation begun twice (two chats that open alike) makes a second run of the same
//! key: the copies are numbered (`copy`), up to [`MAX_COPIES`]; past that a run gets a random
//! id and its conversation a new session on each request.

use agentloop_core::protocol::ChatMessage;
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;
use uuid::Uuid;

use crate::conversation;

/// Runs of one key tried before a run gets a random id.
pub const MAX_COPIES: u32 = 8;

/// A message of Chat Completions.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct Message {
    /// `system`, `developer`, `user`, `assistant` or `tool`.
    pub role: String,
    /// Text, or content parts (`{type: "text", text}` are read).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Value>,
    /// Of an assistant message: the calls it made.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// Of a tool message: the call it answers.
    #[serde(default)]
    pub tool_call_id: Option<String>,
}

impl Message {
    /// Its text: the content when text, else its `text` parts joined.
    pub fn text(&self) -> String {
        match &self.content {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Array(parts)) => parts
                .iter()
                .filter(|part| matches!(part["type"].as_str(), Some("text" | "input_text")))
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        }
    }

    fn is_instruction(&self) -> bool {
        matches!(self.role.as_str(), "system" | "developer")
    }
}

/// The key of a run whose question is the last of `messages`: a hash of each message's role,
/// text, calls and the call it answers.
pub fn run_key(messages: &[Message]) -> String {
    let canonical: Vec<Value> = messages
        .iter()
        .map(|message| {
            let calls: Vec<Value> = message
                .tool_calls
                .iter()
                .flatten()
                .map(|call| {
                    json!([
                        call["id"],
                        call["function"]["name"],
                        call["function"]["arguments"]
                    ])
                })
                .collect();
            json!([message.role, message.text(), calls, message.tool_call_id])
        })
        .collect();
    let digest = Sha256::digest(Value::Array(canonical).to_string().as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The id of copy `copy` of the run of `key` for `user`.
pub fn run_id(user: &str, key: &str, copy: u32) -> Uuid {
    conversation::derived("agentloop-openai-run", user, &format!("{key}:{copy}"))
}

/// Where a request's messages stand.
#[derive(Debug)]
pub struct Split<'a> {
    /// The messages before the question (or before the tool results).
    pub prior: &'a [Message],
    /// The messages that started the run the request continues: up to its last user message
    /// before the new question (or the one the tool results answer).
    pub started: Option<&'a [Message]>,
    /// The client's copy of the last answer in `prior`, when it has one.
    pub answer: Option<String>,
    /// The tool results that end the messages (they answer a paused run).
    pub results: &'a [Message],
}

/// `messages` split for what a request does: a question at the end, or tool results that
/// answer the run of their user message.
pub fn split(messages: &[Message]) -> Split<'_> {
    let results_from = messages
        .iter()
        .rposition(|message| message.role != "tool")
        .map_or(0, |index| index + 1);
    let results = &messages[results_from..];
    let (prior, last_user) = if results.is_empty() {
        let prior = &messages[..messages.len().saturating_sub(1)];
        (prior, prior.iter().rposition(|m| m.role == "user"))
    } else {
        let prior = &messages[..results_from];
        (prior, prior.iter().rposition(|m| m.role == "user"))
    };
    let answer = match last_user {
        Some(index) if results.is_empty() => prior[index + 1..]
            .iter()
            .rev()
            .find(|message| message.role == "assistant" && !message.text().is_empty())
            .map(Message::text),
        _ => None,
    };
    Split {
        prior,
        started: last_user.map(|index| &messages[..=index]),
        answer,
        results,
    }
}

/// What the client's system and developer messages say.
pub fn instructions(messages: &[Message]) -> Vec<String> {
    messages
        .iter()
        .filter(|message| message.is_instruction())
        .map(Message::text)
        .filter(|text| !text.trim().is_empty())
        .collect()
}

/// The dialogue of `messages` as the model reads it: user and assistant text, calls and
/// results left out (their outputs are the client's).
pub fn dialogue(messages: &[Message]) -> Vec<ChatMessage> {
    messages
        .iter()
        .filter_map(|message| {
            let text = message.text();
            match message.role.as_str() {
                "user" if !text.is_empty() => Some(ChatMessage::user(text)),
                "assistant" if !text.is_empty() => Some(ChatMessage::assistant(text)),
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn messages(value: Value) -> Vec<Message> {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_next_request_finds_the_run_of_its_last_question() {
        let first = messages(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": "What is 2+2?"},
        ]));
        let next = messages(json!([
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "What is 2+2?"}]},
            {"role": "assistant", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ]));
        let split = split(&next);
        assert_eq!(run_key(split.started.unwrap()), run_key(&first));
        assert_eq!(split.answer.as_deref(), Some("4"));
        assert_eq!(split.prior.len(), 3);
        assert!(split.results.is_empty());
        // Another user's, another copy, another text: other runs.
        let key = run_key(&first);
        assert_ne!(run_id("ann", &key, 0), run_id("bob", &key, 0));
        assert_ne!(run_id("ann", &key, 0), run_id("ann", &key, 1));
        let other = messages(
            json!([{"role": "system", "content": "be brief"}, {"role": "user", "content": "What is 2+3?"}]),
        );
        assert_ne!(run_key(&other), key);
        // A first question continues nothing.
        assert!(super::split(&first).started.is_none());
    }

    #[test]
    fn tool_results_answer_the_run_of_their_user_message() {
        let first = messages(json!([{"role": "user", "content": "Pick a color"}]));
        let answered = messages(json!([
            {"role": "user", "content": "Pick a color"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "pick", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "red"},
        ]));
        let split = split(&answered);
        assert_eq!(split.results.len(), 1);
        assert_eq!(run_key(split.started.unwrap()), run_key(&first));
        assert_eq!(split.answer, None);
    }

    #[test]
    fn the_dialogue_keeps_text_and_instructions_are_the_system_messages() {
        let sent = messages(json!([
            {"role": "developer", "content": "speak French"},
            {"role": "user", "content": "hi"},
            {"role": "assistant", "content": null, "tool_calls": []},
            {"role": "assistant", "content": "salut"},
        ]));
        assert_eq!(instructions(&sent), ["speak French"]);
        let dialogue = dialogue(&sent);
        assert_eq!(dialogue.len(), 2);
        assert_eq!(dialogue[1].text_content(), "salut");
    }
}
