//! Token counts with the model's own tokenizer (tiktoken) for OpenAI-family models; a
//! conservative estimate for Claude and for the others.

use std::sync::Arc;

use agentloop_core::{EstimatedTokens, TokenCounter};
#[cfg(feature = "tiktoken")]
use tiktoken_rs::CoreBPE;

use crate::config::{LlmConfig, Tokenizer};

/// Counts with a tiktoken encoding.
#[cfg(feature = "tiktoken")]
pub struct TiktokenCounter {
    bpe: &'static CoreBPE,
}

#[cfg(feature = "tiktoken")]
impl TokenCounter for TiktokenCounter {
    fn count(&self, text: &str) -> usize {
        self.bpe.count_ordinary(text)
    }
}

/// A conservative count for Claude models. Anthropic publishes no tokenizer for them (only a
/// `count_tokens` endpoint, a network call per message), and Claude's tokenizer spends more
/// tokens on the same text than OpenAI's: about 3.5 English characters per token, fewer for
/// code. So this counts one token per 2.5 ASCII characters, and one per other character (CJK
/// and emoji take one or more each): high for most text, so a context window fitted with it
/// does not overflow.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClaudeTokens;

impl TokenCounter for ClaudeTokens {
    fn count(&self, text: &str) -> usize {
        let (ascii, other) = text.chars().fold((0usize, 0usize), |(ascii, other), ch| {
            if ch.is_ascii() {
                (ascii + 1, other)
            } else {
                (ascii, other + 1)
            }
        });
        (ascii * 2).div_ceil(5) + other
    }
}

/// The counter `config` asks for (`llm.tokenizer`): the model's own, or the estimate.
pub fn token_counter(config: &LlmConfig) -> Arc<dyn TokenCounter> {
    match config.tokenizer {
        Tokenizer::Model => token_counter_for(&config.model),
        Tokenizer::Estimate => Arc::new(EstimatedTokens),
    }
}

/// The counter for `model`: its tiktoken encoding when it is an OpenAI-family model (also
/// behind a router prefix such as `openai/gpt-4o`), [`ClaudeTokens`] for Claude, else the
/// conservative estimate (also for OpenAI's models when built without the `tiktoken` feature).
pub fn token_counter_for(model: &str) -> Arc<dyn TokenCounter> {
    let name = model.rsplit('/').next().unwrap_or(model);
    if name.to_ascii_lowercase().contains("claude") {
        return Arc::new(ClaudeTokens);
    }
    #[cfg(feature = "tiktoken")]
    if let Some(bpe) = tiktoken_rs::tokenizer::get_tokenizer(name)
        .and_then(|tokenizer| tiktoken_rs::bpe_for_tokenizer(tokenizer).ok())
    {
        return Arc::new(TiktokenCounter { bpe });
    }
    Arc::new(EstimatedTokens)
}

// The counts asserted are tiktoken's.
#[cfg(all(test, feature = "tiktoken"))]
mod tests {
    use super::*;

    #[test]
    fn openai_models_use_their_tokenizer() {
        // "Hello, world!" is 4 tokens in o200k_base and cl100k_base.
        for model in ["gpt-4o-mini", "openai/gpt-4o", "gpt-4", "gpt-5-mini"] {
            assert_eq!(
                token_counter_for(model).count("Hello, world!"),
                4,
                "{model}"
            );
        }
    }

    #[test]
    fn claude_models_get_an_estimate_above_their_tokenizer() {
        // 40 ASCII characters: about 11 Claude tokens; counted as 16.
        let text = "The quick brown fox jumps over the dog.!";
        for model in ["claude-3-5-haiku-latest", "anthropic/claude-sonnet-4-5"] {
            assert_eq!(token_counter_for(model).count(text), 16, "{model}");
        }
        assert!(ClaudeTokens.count(text) > EstimatedTokens.count(text));
        assert_eq!(ClaudeTokens.count("日本"), 2);
    }

    #[test]
    fn the_estimate_on_request_even_for_an_openai_model() {
        let config = LlmConfig {
            model: "gpt-4o-mini".into(),
            tokenizer: Tokenizer::Estimate,
            ..LlmConfig::default()
        };
        let text = "Hello, world!";
        assert_eq!(
            token_counter(&config).count(text),
            EstimatedTokens.count(text)
        );
        assert_ne!(
            EstimatedTokens.count(text),
            4,
            "the estimate must differ from tiktoken's 4"
        );
        let own = LlmConfig {
            model: "gpt-4o-mini".into(),
            ..LlmConfig::default()
        };
        assert_eq!(token_counter(&own).count(text), 4);
    }

    #[test]
    fn other_models_get_the_high_estimate() {
        let counter = token_counter_for("llama3.1:8b");
        assert_eq!(
            counter.count("Hello, world!"),
            EstimatedTokens.count("Hello, world!")
        );
        assert!(counter.count("Hello, world!") >= 4);
    }
}

#[cfg(all(test, not(feature = "tiktoken")))]
mod without_tiktoken {
    use super::*;

    /// Run by `cargo test -p agentloop-llm --lib --no-default-features tokens`.
    #[test]
    fn openai_models_get_the_estimate() {
        let text = "Hello, world!";
        assert_eq!(
            token_counter_for("gpt-4o").count(text),
            EstimatedTokens.count(text)
        );
        assert_eq!(token_counter_for("claude-sonnet-4").count("日本"), 2);
    }
}
