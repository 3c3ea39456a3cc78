//! What the model is asked: the request of each call (the stable system prompt, the plan, what
//! fits of the conversation, the closing instructions, the typed answer's format) and which
//! tools a run offers now (`withheld`: one rule for the offered tools, the plannable ones and
//! the refusals).

use std::sync::Arc;

use agentloop_protocol::{ChatMessage, FinalizeReason};

use super::{RunMachine, Withheld, builtins::Builtin, guidance, pipeline, text, view};
use crate::{
    catalog::CatalogEntry,
    llm::{CallPurpose, ModelRequest, ToolChoice, ToolSpec},
    tokens::message_tokens,
};

impl RunMachine {
    /// The next step or summary call: the stable system prompt, the plan, what fits of the
    /// conversation, and for the summary the instruction to stop calling tools.
    pub(super) fn request(
        &self,
        tool_choice: ToolChoice,
        finalize: Option<FinalizeReason>,
    ) -> ModelRequest {
        let closing = finalize.map(|reason| {
            Arc::new(ChatMessage::system(text::finalize_instruction(
                reason,
                self.state.guidance.finalize_note.as_deref(),
            )))
        });
        let purpose = if finalize.is_some() {
            CallPurpose::Finalize
        } else {
            CallPurpose::Step
        };
        // A typed run's summary offers no tools: it asks for the value, natively or not.
        let offer_tools = finalize.is_none() || self.typed.is_none();
        self.compose(
            closing.into_iter().collect(),
            offer_tools,
            tool_choice,
            purpose,
        )
    }

    /// An LLM call: the stable system prompt, the `<Plan>` block when there is a plan (never
    /// by rewriting the system prompt), what fits of the conversation, then `closing`.
    pub(super) fn compose(
        &self,
        mut closing: Vec<Arc<ChatMessage>>,
        offer_tools: bool,
        tool_choice: ToolChoice,
        purpose: CallPurpose,
    ) -> ModelRequest {
        let counter = self.counter.as_ref();
        let plan = match (&self.state.guidance.plan, purpose) {
            (Some(plan), CallPurpose::Step | CallPurpose::Finalize) => Some(Arc::new(
                ChatMessage::system(guidance::plan_block(plan, &self.state.records)),
            )),
            _ => None,
        };
        let (output, instruction) = self.output_format(purpose, offer_tools);
        closing.extend(instruction);
        let mut tools_tokens = 0;
        let tools: Vec<Arc<ToolSpec>> = if offer_tools {
            tools_tokens = self.offered_tools_tokens();
            self.offered_specs().collect()
        } else {
            Vec::new()
        };
        let fixed = self.system_tokens
            + plan
                .iter()
                .chain(&closing)
                .map(|m| message_tokens(counter, m))
                .sum::<usize>()
            + tools_tokens;
        let mut messages = Vec::with_capacity(self.history_view.len() + self.turn_view.len() + 4);
        messages.push(self.system.clone());
        messages.extend(plan);
        messages.extend(view::fit(
            &self.history_view,
            &self.turn_view,
            counter,
            fixed,
            self.settings.context_tokens,
        ));
        messages.extend(closing);
        ModelRequest {
            model: self.state.input.model.clone(),
            messages,
            tools,
            tool_choice,
            purpose,
            output,
        }
    }

    /// Why the run does not offer `entry` now, if it does not: the one rule behind what the
    /// model is offered, what a plan may count on, and which calls the pipeline refuses.
    pub(super) fn withheld(&self, entry: &CatalogEntry) -> Option<Withheld> {
        if Builtin::find(entry.name(), &self.settings).is_some()
            || self
                .typed_tool()
                .is_some_and(|tool| tool.name == entry.name())
        {
            return Some(Withheld::Hidden);
        }
        if self.state.withdrawn.contains(entry.name()) {
            return Some(Withheld::Withdrawn);
        }
        if entry.settings.requires_clarity && !self.state.guidance.clarified {
            return Some(Withheld::Unclear);
        }
        pipeline::policy_refusal(entry, &self.state.input.policy).map(Withheld::Refused)
    }

    /// The tokens the specs of the tools offered now take: the catalog's, then the built-ins.
    pub(super) fn offered_tools_tokens(&self) -> usize {
        let catalog: usize = self
            .offered_entries()
            .map(|entry| {
                self.tool_tokens
                    .get(entry.name())
                    .copied()
                    .unwrap_or_default()
            })
            .sum();
        catalog + self.builtin_tokens
    }

    /// The catalog's tools the model is offered now.
    pub(super) fn offered_entries(&self) -> impl Iterator<Item = &CatalogEntry> {
        self.catalog
            .entries()
            .iter()
            .filter(|entry| self.withheld(entry).is_none())
    }

    /// The tools a plan may count on, and whether each waits for a clear request: the catalog's
    /// tools offered now or once the request is clear, then `ask_user`.
    pub(super) fn plannable_specs(&self) -> impl Iterator<Item = (Arc<ToolSpec>, bool)> + '_ {
        self.catalog
            .entries()
            .iter()
            .filter_map(|entry| match self.withheld(entry) {
                None => Some((entry.spec(), false)),
                Some(Withheld::Unclear) => Some((entry.spec(), true)),
                Some(_) => None,
            })
            .chain(
                Builtin::all_offered(&self.settings)
                    .filter(|builtin| *builtin != Builtin::WritePlan)
                    .map(|builtin| (builtin.spec(), false)),
            )
    }

    /// Everything the model is offered: the catalog's tools, then the built-in ones.
    pub(super) fn offered_specs(&self) -> impl Iterator<Item = Arc<ToolSpec>> + '_ {
        self.offered_entries()
            .map(|entry| entry.spec())
            .chain(Builtin::all_offered(&self.settings).map(Builtin::spec))
            .chain(self.typed_tool())
    }
}
