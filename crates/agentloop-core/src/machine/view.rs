//! What the model sees: the stable system prompt first, then as much of the conversation as fits
//! `agent.context_tokens`, with tool names in their provider-safe spelling.
//!
//! The conversation is cut in units: a question, an answer, or an assistant turn together with
//! the results of all its tool calls (providers reject a tool result whose call is missing, and a
//! call without its result). Results of earlier runs are shown as a short preview; results of the
//! current run are cut to `tool_output_max_chars`. When the conversation does not fit, the
//! oldest units of the history leave first, then the current run's older results are shortened
//! to previews, then its older units leave; the question and the latest unit always stay.

use std::{collections::HashSet, sync::Arc};

use agentloop_protocol::{ChatMessage, MessageKind, Role, ToolCall};

use super::text;
use crate::settings::{AgentSettings, ModelAttachments};
use crate::{catalog::ToolCatalog, tokens::TokenCounter, tokens::message_tokens};

/// Characters of an earlier run's tool result the model sees.
pub const HISTORY_PREVIEW_CHARS: usize = 400;

/// A message as the model sees it, with its cost.
#[derive(Debug, Clone)]
pub(super) struct Viewed {
    pub message: Arc<ChatMessage>,
    pub tokens: usize,
}

/// Consecutive messages that must be sent or dropped together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unit {
    start: usize,
    end: usize,
    tokens: usize,
}

/// Whether messages of this kind are shown to the model (traces are not).
pub(super) fn is_viewed(kind: MessageKind) -> bool {
    matches!(
        kind,
        MessageKind::Dialogue
            | MessageKind::ToolCall
            | MessageKind::ToolResult
            | MessageKind::Note
            // Read in the run that refused the answer; never by a later run (the store leaves
            // them out of the history).
            | MessageKind::Blocked
    )
}

/// Prepares one message for the model: provider-safe tool names, tool results bounded to
/// `agent.tool_output_max_chars` (or shown as a preview when `earlier`), attachments as they
/// are or, for a text-only model (`agent.attachments.model` not `native`), as a line of text
/// each.
pub(super) fn view_message(
    catalog: &ToolCatalog,
    counter: &dyn TokenCounter,
    message: &ChatMessage,
    settings: &AgentSettings,
    earlier: bool,
) -> Viewed {
    let max_chars = settings.tool_output_max_chars;
    let notes = settings.attachments.model != ModelAttachments::Native;
    let content = match (message.role, &message.content) {
        (Role::Tool, Some(content)) if earlier => Some(preview(
            message.tool_call_id.as_deref().unwrap_or("an earlier call"),
            content,
        )),
        (Role::Tool, Some(content)) => Some(text::bound(content, max_chars)),
        (_, content) => content.clone(),
    };
    let (content, attachments) = match notes && !message.attachments.is_empty() {
        true => {
            let mut text = content.unwrap_or_default();
            for attachment in &message.attachments {
                if !text.is_empty() {
                    text.push('\n');
                }
                text.push_str(&attachment.note());
            }
            (Some(text), Vec::new())
        }
        false => (content, message.attachments.clone()),
    };
    let message = ChatMessage {
        role: message.role,
        content,
        tool_calls: message
            .tool_calls
            .iter()
            .map(|call| ToolCall {
                id: call.id.clone(),
                name: catalog.provider_name(&call.name),
                arguments: call.arguments.clone(),
            })
            .collect(),
        tool_call_id: message.tool_call_id.clone(),
        attachments,
    };
    let tokens = message_tokens(counter, &message);
    Viewed {
        message: Arc::new(message),
        tokens,
    }
}

/// The short form of a tool result from an earlier run; the whole output stays in the store.
pub(super) fn preview(call_id: &str, content: &str) -> String {
    let total = content.chars().count();
    if total <= HISTORY_PREVIEW_CHARS {
        return content.to_string();
    }
    let cut: String = content.chars().take(HISTORY_PREVIEW_CHARS).collect();
    format!(
        "{cut}…\n[earlier result, compacted: {total} characters in all; the whole output is kept \
         in the execution record of {call_id}]"
    )
}

/// The messages to send after the system prompt: a window of `history` and `turn` (whose first
/// message is the question) that fits `budget` tokens, where `fixed` tokens are already spent
/// on the system prompt, the tools and any closing instruction.
pub(super) fn fit(
    history: &[Viewed],
    turn: &[Viewed],
    counter: &dyn TokenCounter,
    fixed: usize,
    budget: usize,
) -> Vec<Arc<ChatMessage>> {
    let Some((question, rest)) = turn.split_first() else {
        return Vec::new();
    };
    let available = budget.saturating_sub(fixed + question.tokens);
    let history_units: Vec<Unit> = units(history)
        .into_iter()
        .filter(|unit| is_complete(history, unit))
        .collect();
    let mut turn_units = units(rest);
    let mut kept_history = history_units.len();
    let mut total: usize = history_units
        .iter()
        .chain(&turn_units)
        .map(|u| u.tokens)
        .sum();

    // 1. The oldest history leaves first.
    let mut dropped = 0;
    while total > available && dropped < history_units.len() {
        total -= history_units[dropped].tokens;
        dropped += 1;
    }
    kept_history -= dropped;

    // 2. Then the current run's older results become previews.
    let mut shortened: HashSet<usize> = HashSet::new();
    if total > available {
        for (index, viewed) in rest.iter().enumerate() {
            if total <= available {
                break;
            }
            let last_unit_start = turn_units.last().map_or(usize::MAX, |u| u.start);
            if viewed.message.role != Role::Tool || index >= last_unit_start {
                continue;
            }
            let short = short_form(viewed, counter);
            if short.tokens < viewed.tokens {
                total -= viewed.tokens - short.tokens;
                shortened.insert(index);
            }
        }
    }

    // 3. Then its older units leave, all but the latest.
    let mut first_turn_unit = 0;
    while total > available && first_turn_unit + 1 < turn_units.len() {
        let unit = turn_units[first_turn_unit];
        let cost: usize = (unit.start..unit.end)
            .map(|i| {
                if shortened.contains(&i) {
                    short_form(&rest[i], counter).tokens
                } else {
                    rest[i].tokens
                }
            })
            .sum();
        total -= cost;
        first_turn_unit += 1;
    }
    if total > available {
        tracing::warn!(
            budget,
            needed = total + fixed + question.tokens,
            "the context does not fit agent.context_tokens even after dropping all it can"
        );
    }
    turn_units.drain(..first_turn_unit);

    let mut messages = Vec::new();
    for unit in &history_units[history_units.len() - kept_history..] {
        messages.extend(
            history[unit.start..unit.end]
                .iter()
                .map(|v| v.message.clone()),
        );
    }
    messages.push(question.message.clone());
    for unit in &turn_units {
        for (index, viewed) in rest.iter().enumerate().take(unit.end).skip(unit.start) {
            messages.push(if shortened.contains(&index) {
                short_form(viewed, counter).message
            } else {
                viewed.message.clone()
            });
        }
    }
    messages
}

fn short_form(viewed: &Viewed, counter: &dyn TokenCounter) -> Viewed {
    let mut message = ChatMessage::clone(&viewed.message);
    let call_id = message.tool_call_id.clone().unwrap_or_default();
    message.content = message.content.map(|content| preview(&call_id, &content));
    let tokens = message_tokens(counter, &message);
    Viewed {
        message: Arc::new(message),
        tokens,
    }
}

/// Splits messages into units: an assistant turn with tool calls takes the tool results that
/// follow it and answer its calls; a tool result that answers no call of its unit is an orphan
/// and forms a unit of its own (dropped by `is_complete`).
fn units(messages: &[Viewed]) -> Vec<Unit> {
    let mut units = Vec::new();
    let mut index = 0;
    while index < messages.len() {
        let start = index;
        let message = &messages[index].message;
        index += 1;
        if message.role == Role::Assistant && !message.tool_calls.is_empty() {
            let ids: HashSet<&str> = message.tool_calls.iter().map(|c| c.id.as_str()).collect();
            while index < messages.len()
                && messages[index].message.role == Role::Tool
                && messages[index]
                    .message
                    .tool_call_id
                    .as_deref()
                    .is_some_and(|id| ids.contains(id))
            {
                index += 1;
            }
        }
        let tokens = messages[start..index].iter().map(|v| v.tokens).sum();
        units.push(Unit {
            start,
            end: index,
            tokens,
        });
    }
    units
}

/// A unit the provider accepts: not an orphan tool result, and a tool-call turn with a result
/// for every call.
fn is_complete(messages: &[Viewed], unit: &Unit) -> bool {
    let first = &messages[unit.start].message;
    match first.role {
        Role::Tool => false,
        Role::Assistant if !first.tool_calls.is_empty() => {
            let answered: HashSet<&str> = messages[unit.start + 1..unit.end]
                .iter()
                .filter_map(|v| v.message.tool_call_id.as_deref())
                .collect();
            first
                .tool_calls
                .iter()
                .all(|call| answered.contains(call.id.as_str()))
        }
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::tokens::EstimatedTokens;

    fn viewed(message: ChatMessage, earlier: bool) -> Viewed {
        let catalog = ToolCatalog::new(Vec::new(), &BTreeMap::new());
        let settings = AgentSettings {
            tool_output_max_chars: 1_000,
            ..AgentSettings::default()
        };
        view_message(&catalog, &EstimatedTokens, &message, &settings, earlier)
    }

    fn call(id: &str) -> ChatMessage {
        ChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall {
                id: id.into(),
                name: "kb.search".into(),
                arguments: "{}".into(),
            }],
        )
    }

    fn texts(messages: &[Arc<ChatMessage>]) -> Vec<String> {
        messages
            .iter()
            .map(|m| match m.role {
                Role::Tool => format!("result:{}", m.tool_call_id.clone().unwrap_or_default()),
                Role::Assistant if !m.tool_calls.is_empty() => {
                    format!("call:{}", m.tool_calls[0].id)
                }
                _ => m.text_content().to_string(),
            })
            .collect()
    }

    fn session(exchanges: usize, earlier: bool) -> Vec<Viewed> {
        let mut out = Vec::new();
        for i in 0..exchanges {
            out.push(viewed(
                ChatMessage::user(format!("q{i} {}", "x".repeat(60))),
                earlier,
            ));
            out.push(viewed(call(&format!("c{i}")), earlier));
            out.push(viewed(
                ChatMessage::tool_result(format!("c{i}"), "r".repeat(60)),
                earlier,
            ));
            out.push(viewed(
                ChatMessage::assistant(format!("a{i} {}", "y".repeat(60))),
                earlier,
            ));
        }
        out
    }

    #[test]
    fn everything_is_sent_when_it_fits() {
        let history = session(2, true);
        let turn = vec![viewed(ChatMessage::user("now"), false)];
        let sent = fit(&history, &turn, &EstimatedTokens, 0, 100_000);
        assert_eq!(sent.len(), 9);
        assert_eq!(sent.last().unwrap().text_content(), "now");
    }

    #[test]
    fn the_oldest_history_leaves_first_and_never_splits_a_tool_call_from_its_result() {
        let history = session(5, true);
        let turn = vec![viewed(ChatMessage::user("now"), false)];
        let all: usize = history.iter().map(|v| v.tokens).sum();
        for budget in (0..all + 20).step_by(7) {
            let sent = fit(&history, &turn, &EstimatedTokens, 0, budget);
            let used: usize = sent
                .iter()
                .map(|m| message_tokens(&EstimatedTokens, m))
                .sum();
            assert!(
                used <= budget.max(message_tokens(&EstimatedTokens, &turn[0].message)),
                "budget {budget}: {used}"
            );
            assert_eq!(
                sent.last().unwrap().text_content(),
                "now",
                "the question always stays"
            );
            // Whatever was kept is the most recent part, and every result follows its call.
            let labels = texts(&sent);
            for (i, label) in labels.iter().enumerate() {
                if let Some(id) = label.strip_prefix("result:") {
                    assert_eq!(
                        labels[i - 1],
                        format!("call:{id}"),
                        "budget {budget}: {labels:?}"
                    );
                }
                if let Some(id) = label.strip_prefix("call:") {
                    assert_eq!(
                        labels[i + 1],
                        format!("result:{id}"),
                        "budget {budget}: {labels:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn orphans_and_incomplete_turns_of_the_history_are_never_sent() {
        let history = vec![
            viewed(ChatMessage::tool_result("gone", "orphan"), true),
            viewed(ChatMessage::user("q"), true),
            viewed(call("c1"), true),
            viewed(ChatMessage::assistant("crashed before the result"), true),
        ];
        let turn = vec![viewed(ChatMessage::user("now"), false)];
        let sent = texts(&fit(&history, &turn, &EstimatedTokens, 0, 100_000));
        assert_eq!(sent, ["q", "crashed before the result", "now"]);
    }

    #[test]
    fn earlier_results_are_previews_naming_their_record() {
        let long = viewed(ChatMessage::tool_result("c9", "z".repeat(5_000)), true);
        let content = long.message.text_content();
        assert!(content.starts_with(&"z".repeat(HISTORY_PREVIEW_CHARS)));
        assert!(
            content.contains("5000 characters") && content.contains("c9"),
            "{content}"
        );
        assert!(content.chars().count() < HISTORY_PREVIEW_CHARS + 200);
    }

    #[test]
    fn the_current_run_shortens_old_results_before_dropping_them() {
        let turn = vec![
            viewed(ChatMessage::user("now"), false),
            viewed(call("a"), false),
            viewed(ChatMessage::tool_result("a", "1".repeat(900)), false),
            viewed(call("b"), false),
            viewed(ChatMessage::tool_result("b", "2".repeat(900)), false),
        ];
        // Room for everything with the first result shortened, not for both in full.
        let full: usize = turn.iter().map(|v| v.tokens).sum();
        let saved = turn[2].tokens - short_form(&turn[2], &EstimatedTokens).tokens;
        let budget = full - saved;
        let sent = fit(&[], &turn, &EstimatedTokens, 0, budget);
        assert_eq!(
            texts(&sent),
            ["now", "call:a", "result:a", "call:b", "result:b"]
        );
        assert!(sent[2].text_content().contains("compacted"));
        assert_eq!(
            sent[4].text_content(),
            "2".repeat(900),
            "the latest result stays whole"
        );
        // With less room, the older unit leaves, the latest stays.
        let sent = fit(&[], &turn, &EstimatedTokens, 0, budget - 1);
        assert_eq!(texts(&sent), ["now", "call:b", "result:b"]);
    }
}
