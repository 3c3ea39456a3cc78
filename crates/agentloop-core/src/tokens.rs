//! Counting tokens, to fit what is sent into `agent.context_tokens`.

use agentloop_protocol::ChatMessage;

/// Counts the tokens of a text for some model's tokenizer.
pub trait TokenCounter: Send + Sync {
    fn count(&self, text: &str) -> usize;
}

/// A deliberately high estimate for models whose tokenizer agentloop does not know: three ASCII
/// characters per token (real tokenizers average about four) and one token per other character
/// (CJK scripts and emoji often take one or more each).
#[derive(Debug, Clone, Copy, Default)]
pub struct EstimatedTokens;

impl TokenCounter for EstimatedTokens {
    fn count(&self, text: &str) -> usize {
        let (ascii, other) = text.chars().fold((0usize, 0usize), |(ascii, other), ch| {
            if ch.is_ascii() {
                (ascii + 1, other)
            } else {
                (ascii, other + 1)
            }
        });
        ascii.div_ceil(3) + other
    }
}

/// Tokens a message takes in a Chat Completions request: its text, its tool calls, its
/// attachments (`attachments::estimated_tokens`: a fixed estimate per image), and the few tokens
/// of framing every message costs.
pub fn message_tokens(counter: &dyn TokenCounter, message: &ChatMessage) -> usize {
    const FRAMING: usize = 4;
    let calls: usize = message
        .tool_calls
        .iter()
        .map(|call| counter.count(&call.name) + counter.count(&call.arguments) + FRAMING)
        .sum();
    let attachments: usize = message
        .attachments
        .iter()
        .map(crate::attachments::estimated_tokens)
        .sum();
    FRAMING + counter.count(message.text_content()) + calls + attachments
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_estimate_errs_on_the_high_side() {
        // "Hello, world!" is 4 tokens for OpenAI's tokenizers.
        assert!(EstimatedTokens.count("Hello, world!") >= 4);
        assert_eq!(EstimatedTokens.count(""), 0);
        // Non-ASCII characters count one each.
        assert_eq!(EstimatedTokens.count("日本語"), 3);
    }

    #[test]
    fn messages_cost_their_text_calls_and_framing() {
        let plain = ChatMessage::user("abcdef");
        assert_eq!(message_tokens(&EstimatedTokens, &plain), 4 + 2);
        let with_call = ChatMessage::assistant_tool_calls(
            None,
            vec![agentloop_protocol::ToolCall {
                id: "c".into(),
                name: "abc".into(),
                arguments: "{}".into(),
            }],
        );
        assert_eq!(message_tokens(&EstimatedTokens, &with_call), 4 + 1 + 1 + 4);
    }
}
