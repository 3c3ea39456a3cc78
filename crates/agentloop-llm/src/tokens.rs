//! Token counts with the model's own tokenizer (tiktoken) for OpenAI-family models; a
//! conservative estimate for the others.

use std::sync::Arc;

use agentloop_core::{EstimatedTokens, TokenCounter};
use tiktoken_rs::CoreBPE;

/// Counts with a tiktoken encoding.
pub struct TiktokenCounter {
    bpe: &'static CoreBPE,
}

impl TokenCounter for TiktokenCounter {
    fn count(&self, text: &str) -> usize {
        self.bpe.count_ordinary(text)
    }
}

/// The counter for `model`: its tiktoken encoding when it is an OpenAI-family model (also
/// behind a router prefix such as `openai/gpt-4o`), else the conservative estimate.
pub fn token_counter_for(model: &str) -> Arc<dyn TokenCounter> {
    let name = model.rsplit('/').next().unwrap_or(model);
    let bpe = tiktoken_rs::tokenizer::get_tokenizer(name)
        .and_then(|tokenizer| tiktoken_rs::bpe_for_tokenizer(tokenizer).ok());
    match bpe {
        Some(bpe) => Arc::new(TiktokenCounter { bpe }),
        None => Arc::new(EstimatedTokens),
    }
}

#[cfg(test)]
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
    fn other_models_get_the_high_estimate() {
        let counter = token_counter_for("llama3.1:8b");
        assert_eq!(
            counter.count("Hello, world!"),
            EstimatedTokens.count("Hello, world!")
        );
        assert!(counter.count("Hello, world!") >= 4);
    }
}
