//! What LLM calls cost: the price table (built-in prices of the common models, `built_in.rs`,
//! under `[prices."MODEL"]` of `agentloop.toml`, loaded by the facade) and the cost of one call's
//! usage. Pure: no configuration parsing, no I/O.
//!
//! A model's price is found by its exact name, then by the name without its provider prefix
//! (`openai/gpt-4o-mini` → `gpt-4o-mini`), then without a date suffix (`gpt-4o-mini-2024-07-18`,
//! `claude-3-5-haiku-20241022` → their undated names): providers answer with dated snapshot
//! names, and a snapshot is billed as its undated model unless the table names it itself.

mod built_in;

use std::collections::BTreeMap;

use agentloop_protocol::Usage;
use serde::{Deserialize, Serialize};

pub use built_in::CHECKED as BUILT_IN_PRICES_CHECKED;

/// A price that is not a number of USD, 0 or more; `key` names it as written in
/// `agentloop.toml` (`prices."gpt-4o-mini".input`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct InvalidPrice {
    pub key: String,
    pub message: String,
}

/// How much Anthropic bills a cache write above the normal input price (its 5-minute cache).
pub const CACHE_WRITE_FACTOR: f64 = 1.25;

const PER_MILLION: f64 = 1_000_000.0;

/// The price of one model, in USD per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Input tokens that were not read from a cache.
    pub input: f64,
    pub output: f64,
    /// Input tokens read from the provider's prompt cache; default: `input` (no discount
    /// assumed, so a cost is never under-counted).
    #[serde(default)]
    pub cached_input: Option<f64>,
    /// Input tokens written to Anthropic's prompt cache; default: 1.25 × `input`.
    #[serde(default)]
    pub cache_write: Option<f64>,
}

impl Price {
    /// The cost of `usage` at this price: uncached input × input + cache reads × cached_input +
    /// cache writes × cache_write + output × output.
    pub fn cost(&self, usage: &Usage) -> f64 {
        let cached = usage.cache_read_tokens;
        let written = usage.cache_creation_tokens;
        let uncached = usage.prompt_tokens.saturating_sub(cached + written);
        let cached_price = self.cached_input.unwrap_or(self.input);
        let write_price = self.cache_write.unwrap_or(self.input * CACHE_WRITE_FACTOR);
        (uncached as f64 * self.input
            + cached as f64 * cached_price
            + written as f64 * write_price
            + usage.completion_tokens as f64 * self.output)
            / PER_MILLION
    }

    fn check(&self, model: &str) -> Result<(), InvalidPrice> {
        let fields = [
            ("input", Some(self.input)),
            ("output", Some(self.output)),
            ("cached_input", self.cached_input),
            ("cache_write", self.cache_write),
        ];
        for (field, value) in fields {
            if let Some(value) = value
                && !(value.is_finite() && value >= 0.0)
            {
                let key = format!("prices.\"{model}\".{field}");
                let message = format!(
                    "{key} must be a price in USD per million tokens, 0 or more (got {value})"
                );
                return Err(InvalidPrice { key, message });
            }
        }
        Ok(())
    }
}

/// Prices by model name.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// A table of `prices`; every price must be a finite number, 0 or more.
    pub fn new(prices: BTreeMap<String, Price>) -> Result<Self, InvalidPrice> {
        for (model, price) in &prices {
            price.check(model)?;
        }
        Ok(Self { prices })
    }

    /// The built-in prices (`built_in.rs`) with `configured` over them: a configured model
    /// replaces the built-in entry of the same name, and every configured price is checked.
    pub fn with_built_in(configured: BTreeMap<String, Price>) -> Result<Self, InvalidPrice> {
        let mut table = Self::new(configured)?;
        for (name, price) in Self::built_in().prices {
            table.prices.entry(name).or_insert(price);
        }
        Ok(table)
    }

    /// The built-in prices alone.
    pub fn built_in() -> Self {
        let prices = built_in::PRICES
            .iter()
            .map(|&(name, input, cached_input, cache_write, output)| {
                let price = Price {
                    input,
                    output,
                    cached_input,
                    cache_write,
                };
                (name.to_string(), price)
            })
            .collect();
        Self { prices }
    }

    pub fn is_empty(&self) -> bool {
        self.prices.is_empty()
    }

    /// The price of `model`: by its exact name, without its provider prefix, then without a
    /// date suffix.
    pub fn price(&self, model: &str) -> Option<&Price> {
        let bare = model.rsplit('/').next().unwrap_or(model);
        [model, bare]
            .into_iter()
            .chain(undated(bare))
            .find_map(|name| self.prices.get(name))
    }

    /// The cost of one call of `model` that spent `usage`; `None` when the model has no price.
    pub fn cost(&self, model: &str, usage: &Usage) -> Option<f64> {
        self.price(model).map(|price| price.cost(usage))
    }
}

/// `name` without a trailing date: `-2024-07-18` (OpenAI) or `-20241022` (Anthropic).
fn undated(name: &str) -> Option<&str> {
    let digits =
        |text: &str, len: usize| text.len() == len && text.bytes().all(|b| b.is_ascii_digit());
    let (head, tail) = name.rsplit_once('-')?;
    if digits(tail, 8) {
        return Some(head);
    }
    let (head, month) = head.rsplit_once('-')?;
    let (head, year) = head.rsplit_once('-')?;
    (digits(tail, 2) && digits(month, 2) && digits(year, 4)).then_some(head)
}

/// The prices a run's calls are charged at, and the model a call is for when it names none.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Pricing {
    pub prices: std::sync::Arc<PriceTable>,
    /// The configured model (`llm.model`): what a request without a model of its own asks.
    pub default_model: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> PriceTable {
        let price = |input, output| Price {
            input,
            output,
            cached_input: None,
            cache_write: None,
        };
        PriceTable::new(BTreeMap::from([
            (
                "gpt-4o-mini".to_string(),
                Price {
                    cached_input: Some(0.075),
                    ..price(0.15, 0.60)
                },
            ),
            ("claude-3-5-haiku".to_string(), price(0.80, 4.0)),
            ("gpt-4o-2024-05-13".to_string(), price(5.0, 15.0)),
            ("gpt-4o".to_string(), price(2.5, 10.0)),
        ]))
        .unwrap()
    }

    fn usage(prompt: u64, completion: u64, read: u64, written: u64) -> Usage {
        Usage {
            prompt_tokens: prompt,
            completion_tokens: completion,
            cache_read_tokens: read,
            cache_creation_tokens: written,
            ..Usage::default()
        }
    }

    #[test]
    fn a_call_costs_uncached_input_cache_reads_and_output_at_their_prices() {
        let table = table();
        // 600 uncached × 0.15 + 400 cached × 0.075 + 200 output × 0.60, per million.
        let cost = table
            .cost("gpt-4o-mini", &usage(1000, 200, 400, 0))
            .unwrap();
        assert!((cost - 0.000_24).abs() < 1e-12, "{cost}");
    }

    #[test]
    fn cache_writes_default_to_a_quarter_above_input_and_cache_reads_to_input() {
        let table = table();
        // 100 uncached × 0.80 + 1000 written × 1.00 + 500 read × 0.80 + 10 output × 4.0.
        let cost = table
            .cost("claude-3-5-haiku", &usage(1600, 10, 500, 1000))
            .unwrap();
        let expected = (100.0 * 0.80 + 1000.0 * 1.0 + 500.0 * 0.80 + 10.0 * 4.0) / 1e6;
        assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
    }

    #[test]
    fn models_match_exactly_then_behind_a_provider_prefix_then_without_a_date() {
        let table = table();
        assert_eq!(table.price("openai/gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(table.price("gpt-4o-mini-2024-07-18").unwrap().input, 0.15);
        assert_eq!(
            table
                .price("anthropic/claude-3-5-haiku-20241022")
                .unwrap()
                .input,
            0.80
        );
        // A snapshot with its own price keeps it.
        assert_eq!(table.price("gpt-4o-2024-05-13").unwrap().input, 5.0);
        assert_eq!(table.price("gpt-4o-2024-08-06").unwrap().input, 2.5);
        assert!(table.price("gpt-4").is_none());
        assert!(table.price("gpt-4o-mini-high").is_none());
        assert!(table.cost("llama3", &usage(10, 10, 0, 0)).is_none());
    }

    #[test]
    fn the_common_models_have_built_in_prices_that_configured_ones_replace() {
        let table = PriceTable::with_built_in(BTreeMap::new()).unwrap();
        for model in [
            "gpt-4o-mini",
            "gpt-4o-mini-2024-07-18",
            "openai/gpt-4o",
            "gpt-4.1-nano",
            "o4-mini",
            "claude-sonnet-4-20250514",
            "claude-3-5-haiku-20241022",
            "claude-3-7-sonnet-latest",
            "anthropic/claude-opus-4-1-20250805",
            "claude-haiku-4-5-20251001",
        ] {
            assert!(
                table.price(model).is_some(),
                "no built-in price for {model}"
            );
        }
        assert_eq!(table.price("gpt-4o-mini").unwrap().input, 0.15);
        assert_eq!(table.price("gpt-4o-2024-05-13").unwrap().input, 5.0);
        assert_eq!(table.price("gpt-4o-2024-08-06").unwrap().input, 2.5);
        let sonnet = table.price("claude-sonnet-4-5-20250929").unwrap();
        assert_eq!(
            (sonnet.cached_input, sonnet.cache_write),
            (Some(0.30), Some(3.75))
        );
        assert!(table.price("llama3").is_none());

        let configured = BTreeMap::from([(
            "gpt-4o-mini".to_string(),
            Price {
                input: 1.0,
                output: 2.0,
                cached_input: None,
                cache_write: None,
            },
        )]);
        let table = PriceTable::with_built_in(configured).unwrap();
        assert_eq!(table.price("gpt-4o-mini-2024-07-18").unwrap().input, 1.0);
        assert_eq!(table.price("gpt-4o").unwrap().input, 2.5);
        // Every built-in price is one PriceTable::new accepts.
        PriceTable::new(PriceTable::built_in().prices).unwrap();
    }

    #[test]
    fn negative_or_infinite_prices_are_refused_with_their_key() {
        let bad = Price {
            input: 0.15,
            output: -1.0,
            cached_input: None,
            cache_write: None,
        };
        let error = PriceTable::new(BTreeMap::from([("m".to_string(), bad)])).unwrap_err();
        assert_eq!(error.key, "prices.\"m\".output");
        let bad = Price {
            cache_write: Some(f64::INFINITY),
            ..bad
        };
        let bad = Price { output: 1.0, ..bad };
        let error = PriceTable::new(BTreeMap::from([("m".to_string(), bad)])).unwrap_err();
        assert_eq!(error.key, "prices.\"m\".cache_write");
    }
}
