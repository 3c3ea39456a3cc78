//! What a run spends: each LLM call's cost (`llm_call`), and the budget that ends the tool
//! calls before the run goes over it.
//!
//! The budget is checked before each step call: the tokens spent so far, plus the next
//! request's prompt tokens (as the run's token counter counted its messages and tools) twice:
//! once for the step, once for the forced summary that must still fit after it. Output tokens
//! cannot be known in advance, so a run may end a little over its budget by the last two
//! replies; it never starts a step it could not follow with a summary. The cost budget prices the same tokens as
//! uncached input. A call without a price makes the run's cost unknown: a cost budget cannot be
//! kept then, and the summary is forced at the next check.

use agentloop_protocol::{EventKind, LlmCallPurpose, Usage};

use super::{RunMachine, state::Phase};
use crate::llm::ModelReply;

/// An LLM call made for a tool call's MCP server (sampling), as the driver reports it.
#[derive(Debug, Clone)]
pub struct SampledCall {
    pub model: Option<String>,
    pub usage: Usage,
    pub duration_ms: u64,
}

impl RunMachine {
    /// The model the pending call asked for: the phase's own (planning, review), else the
    /// run's, else the configured one.
    fn requested_model(&self) -> Option<String> {
        let own = match self.state.phase {
            Phase::AwaitingPlan => self.settings.planning.model.clone(),
            Phase::AwaitingReview => self.settings.review.model.clone(),
            _ => None,
        };
        own.or_else(|| self.state.input.model.clone())
            .or_else(|| self.settings.pricing.default_model.clone())
    }

    /// Prices the reply's usage, adds it to the run's, and reports the call (`llm_call`).
    pub(super) fn account_call(&mut self, reply: &ModelReply, duration_ms: u64) {
        let purpose = match self.state.phase {
            Phase::AwaitingPlan => LlmCallPurpose::Plan,
            Phase::AwaitingReview => LlmCallPurpose::Review,
            Phase::AwaitingFinalize { .. } | Phase::AwaitingOutput { .. } => {
                LlmCallPurpose::Summary
            }
            _ => LlmCallPurpose::Step,
        };
        let requested = self.requested_model();
        let prices = &self.settings.pricing.prices;
        let usage = reply.usage.unwrap_or_default();
        // The model that answered names the price; the one asked for when it has none.
        let priced = [reply.model.as_deref(), requested.as_deref()]
            .into_iter()
            .flatten()
            .find_map(|model| prices.cost(model, &usage));
        let call = Usage {
            cost_usd: priced,
            cost_complete: priced.is_some(),
            ..usage
        };
        self.state.usage.add(call);
        self.last_call_cost = priced;
        self.emit(EventKind::LlmCall {
            iteration: self.state.iteration,
            purpose,
            model: reply.model.clone().or(requested),
            duration_ms,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cache_read_tokens,
            cost_usd: priced,
        });
    }

    /// Counts an LLM call made for a tool call's MCP server (sampling), priced by `model`.
    pub(super) fn account_sampling(&mut self, call: SampledCall) {
        let SampledCall {
            model,
            usage,
            duration_ms,
        } = call;
        let priced = model
            .as_deref()
            .and_then(|model| self.settings.pricing.prices.cost(model, &usage));
        self.state.usage.add(Usage {
            cost_usd: priced,
            cost_complete: priced.is_some(),
            ..usage
        });
        self.emit(EventKind::LlmCall {
            iteration: self.state.iteration,
            purpose: LlmCallPurpose::Sampling,
            model,
            duration_ms,
            prompt_tokens: usage.prompt_tokens,
            completion_tokens: usage.completion_tokens,
            cached_tokens: usage.cache_read_tokens,
            cost_usd: priced,
        });
    }

    /// Whether a sampling request that may spend up to `max_tokens` would take the run over
    /// its budget: its tokens on top of what the run spent; with a cost budget, a run whose
    /// cost is not known or already spent refuses it.
    pub fn sampling_over_budget(&self, max_tokens: u64) -> bool {
        let budget = self.state.input.budget;
        let spent = self.state.usage;
        if let Some(max) = budget.max_tokens
            && spent.total() + max_tokens > max
        {
            return true;
        }
        if let Some(max) = budget.max_cost_usd {
            return !spent.cost_complete || spent.cost_usd.unwrap_or(0.0) >= max;
        }
        false
    }

    /// The prompt tokens of the next step, from the counts the run keeps of each message and
    /// tool (nothing is counted again): the system prompt, the tools offered, the conversation,
    /// at most what a call may hold (`context_tokens`).
    fn next_prompt_tokens(&self) -> usize {
        let conversation: usize = self
            .history_view
            .iter()
            .chain(&self.turn_view)
            .map(|viewed| viewed.tokens)
            .sum();
        let tools = self.offered_tools_tokens();
        (self.system_tokens + tools + conversation).min(self.settings.context_tokens)
    }

    /// Whether the next step, and the summary after it, could go over the run's budget.
    pub(super) fn over_budget(&self) -> bool {
        let budget = self.state.input.budget;
        if budget.is_unlimited() {
            return false;
        }
        let ahead = 2 * self.next_prompt_tokens() as u64;
        let spent = self.state.usage;
        if let Some(max) = budget.max_tokens
            && spent.total() + ahead > max
        {
            return true;
        }
        if let Some(max) = budget.max_cost_usd {
            if !spent.cost_complete {
                return true;
            }
            let model = self
                .state
                .input
                .model
                .clone()
                .or_else(|| self.settings.pricing.default_model.clone());
            let ahead_usage = Usage {
                prompt_tokens: ahead,
                ..Usage::default()
            };
            let Some(next) = model
                .as_deref()
                .and_then(|model| self.settings.pricing.prices.cost(model, &ahead_usage))
            else {
                return true;
            };
            return spent.cost_usd.unwrap_or(0.0) + next > max;
        }
        false
    }
}
