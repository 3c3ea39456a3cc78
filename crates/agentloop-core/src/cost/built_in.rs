//! The prices agentloop knows without configuration: the common models of OpenAI and
//! Anthropic, so that a run with the example configuration has a cost. `[prices."MODEL"]` in
//! `agentloop.toml` replaces an entry (or adds a model).
//!
//! USD per million tokens, standard tier (not batch, not priority, not regional), prompts up to
//! 200K tokens (Anthropic bills longer prompts of Sonnet 4 and 4.5 at a higher rate, which is
//! not modelled). Checked on [`CHECKED`] against the providers' pricing pages:
//! - OpenAI: <https://platform.openai.com/docs/pricing> (now
//!   <https://developers.openai.com/api/docs/pricing>), "Text tokens", column "Standard";
//! - Anthropic: <https://docs.anthropic.com/en/docs/about-claude/pricing>, "Model pricing":
//!   base input, 5-minute cache writes, cache hits, output.
//!
//! Prices change: a price that is wrong here is fixed by `[prices."MODEL"]` at once, and in
//! this table with the date of the new check.

/// The day the prices below were checked against the providers' pages.
pub const CHECKED: &str = "2026-11-27";

/// One model's price: name, input, cached input (cache hits), cache write, output. A cache
/// write of `None` is 1.25 × input ([`super::CACHE_WRITE_FACTOR`]); OpenAI bills none.
type Row = (&'static str, f64, Option<f64>, Option<f64>, f64);

/// Undated names: a dated snapshot (`gpt-4o-mini-2024-07-18`, `claude-sonnet-4-20250514`) is
/// found by its undated name unless it has a row of its own (see `PriceTable::price`).
pub(super) const PRICES: &[Row] = &[
    // OpenAI: cached input is what OpenAI bills prompt-cache hits.
    ("gpt-4o", 2.50, Some(1.25), None, 10.00),
    // The first snapshot of gpt-4o kept its launch price.
    ("gpt-4o-2024-05-13", 5.00, None, None, 15.00),
    ("gpt-4o-mini", 0.15, Some(0.075), None, 0.60),
    ("gpt-4.1", 2.00, Some(0.50), None, 8.00),
    ("gpt-4.1-mini", 0.40, Some(0.10), None, 1.60),
    ("gpt-4.1-nano", 0.10, Some(0.025), None, 0.40),
    ("gpt-5", 1.25, Some(0.125), None, 10.00),
    ("gpt-5-mini", 0.25, Some(0.025), None, 2.00),
    ("gpt-5-nano", 0.05, Some(0.005), None, 0.40),
    ("o1", 15.00, Some(7.50), None, 60.00),
    ("o1-mini", 1.10, Some(0.55), None, 4.40),
    ("o3", 2.00, Some(0.50), None, 8.00),
    ("o3-mini", 1.10, Some(0.55), None, 4.40),
    ("o4-mini", 1.10, Some(0.275), None, 4.40),
    // Anthropic: cache hits are 0.1 × input, 5-minute cache writes 1.25 × input. The aliases
    // (`-latest`, `-0`) are the names Anthropic's documentation uses besides the dated ones.
    ("claude-opus-4-5", 5.00, Some(0.50), Some(6.25), 25.00),
    ("claude-opus-4-1", 15.00, Some(1.50), Some(18.75), 75.00),
    ("claude-opus-4", 15.00, Some(1.50), Some(18.75), 75.00),
    ("claude-opus-4-0", 15.00, Some(1.50), Some(18.75), 75.00),
    ("claude-sonnet-4-5", 3.00, Some(0.30), Some(3.75), 15.00),
    ("claude-sonnet-4", 3.00, Some(0.30), Some(3.75), 15.00),
    ("claude-sonnet-4-0", 3.00, Some(0.30), Some(3.75), 15.00),
    ("claude-haiku-4-5", 1.00, Some(0.10), Some(1.25), 5.00),
    ("claude-3-7-sonnet", 3.00, Some(0.30), Some(3.75), 15.00),
    (
        "claude-3-7-sonnet-latest",
        3.00,
        Some(0.30),
        Some(3.75),
        15.00,
    ),
    ("claude-3-5-sonnet", 3.00, Some(0.30), Some(3.75), 15.00),
    (
        "claude-3-5-sonnet-latest",
        3.00,
        Some(0.30),
        Some(3.75),
        15.00,
    ),
    ("claude-3-5-haiku", 0.80, Some(0.08), Some(1.00), 4.00),
    (
        "claude-3-5-haiku-latest",
        0.80,
        Some(0.08),
        Some(1.00),
        4.00,
    ),
    ("claude-3-opus", 15.00, Some(1.50), Some(18.75), 75.00),
    (
        "claude-3-opus-latest",
        15.00,
        Some(1.50),
        Some(18.75),
        75.00,
    ),
    ("claude-3-haiku", 0.25, Some(0.03), Some(0.30), 1.25),
];
