//! Cost per call (`llm_call`) and the budget that forces the summary.

use std::collections::BTreeMap;

use agentloop_protocol::LlmCallPurpose;

use super::*;
use crate::cost::{Price, PriceTable, Pricing};
use crate::settings::Budget;

fn priced_settings(model: &str, budget: Budget) -> AgentSettings {
    let prices = PriceTable::new(BTreeMap::from([(
        "gpt-4o-mini".to_string(),
        Price {
            input: 0.15,
            output: 0.60,
            cached_input: Some(0.075),
            cache_write: None,
        },
    )]))
    .unwrap();
    AgentSettings {
        budget,
        pricing: Pricing {
            prices: Arc::new(prices),
            default_model: Some(model.to_string()),
        },
        ..AgentSettings::default()
    }
}

fn machine_under(settings: AgentSettings) -> RunMachine {
    let budget = settings.budget;
    let mut m = machine_with(settings, &["kb.search", "kb.fetch"]);
    m.state.input.budget = budget;
    m
}

fn spent(prompt: u64, completion: u64, cached: u64) -> Usage {
    Usage {
        prompt_tokens: prompt,
        completion_tokens: completion,
        cache_read_tokens: cached,
        ..Usage::default()
    }
}

fn with_usage(reply: Result<ModelReply, LlmError>, usage: Usage) -> Result<ModelReply, LlmError> {
    reply.map(|reply| ModelReply {
        usage: Some(usage),
        ..reply
    })
}

fn llm_calls(events: &[EventKind]) -> Vec<EventKind> {
    events
        .iter()
        .filter(|event| matches!(event, EventKind::LlmCall { .. }))
        .cloned()
        .collect()
}

#[test]
fn each_reply_is_reported_with_its_duration_tokens_and_cost_and_the_run_adds_them_up() {
    let mut m = machine_under(priced_settings("gpt-4o-mini", Budget::default()));
    model(m.start());
    let reply = with_usage(calls_owned(&[search("c1", "x")]), spent(1000, 200, 400));
    let batch = tools(m.on_model_reply_after(reply, 1200));
    model(succeed_all(&mut m, &batch));
    let answer = with_usage(text("Done."), spent(2000, 100, 0));
    let outcome = finished(m.on_model_reply_after(answer, 800));

    let events = m.take_events();
    // (600 × 0.15 + 400 × 0.075 + 200 × 0.60) / 1e6, then (2000 × 0.15 + 100 × 0.60) / 1e6.
    let (first, second) = (0.000_24, 0.000_36);
    assert_eq!(
        llm_calls(&events),
        [
            EventKind::LlmCall {
                iteration: 1,
                purpose: LlmCallPurpose::Step,
                model: Some("gpt-4o-mini".into()),
                duration_ms: 1200,
                prompt_tokens: 1000,
                completion_tokens: 200,
                cached_tokens: 400,
                cost_usd: Some(first),
            },
            EventKind::LlmCall {
                iteration: 2,
                purpose: LlmCallPurpose::Step,
                model: Some("gpt-4o-mini".into()),
                duration_ms: 800,
                prompt_tokens: 2000,
                completion_tokens: 100,
                cached_tokens: 0,
                cost_usd: Some(second),
            },
        ]
    );
    // Reported right after its call, before what the reply leads to.
    let kinds: Vec<_> = events.iter().map(EventKind::type_name).collect();
    let first_call = kinds.iter().position(|kind| *kind == "llm_call").unwrap();
    assert_eq!(kinds[first_call - 1], "thinking");
    assert_eq!(kinds[first_call + 1], "tool_selected");

    let cost = outcome.usage.cost_usd.unwrap();
    assert!((cost - (first + second)).abs() < 1e-12, "{cost}");
    assert!(outcome.usage.cost_complete);
    let Some(EventKind::Done { usage, .. }) = events.last() else {
        panic!("the run ends with done");
    };
    assert_eq!(usage.cost_usd, outcome.usage.cost_usd);
    assert!(usage.cost_complete);
}

#[test]
fn the_model_that_answered_names_the_price_before_the_one_asked_for() {
    let mut m = machine_under(priced_settings("unpriced-alias", Budget::default()));
    model(m.start());
    let reply = with_usage(text("Hi."), spent(1_000_000, 0, 0)).map(|reply| ModelReply {
        model: Some("openai/gpt-4o-mini-2024-07-18".into()),
        ..reply
    });
    let outcome = finished(m.on_model_reply(reply));
    assert_eq!(outcome.usage.cost_usd, Some(0.15));
    assert!(outcome.usage.cost_complete);
    let calls = llm_calls(&m.take_events());
    assert!(
        matches!(&calls[0], EventKind::LlmCall { model: Some(model), .. } if model == "openai/gpt-4o-mini-2024-07-18"),
        "{calls:?}"
    );
}

#[test]
fn an_unpriced_model_has_a_null_cost_and_marks_the_run_incomplete() {
    let mut m = machine_under(priced_settings("llama3", Budget::default()));
    model(m.start());
    let outcome = finished(m.on_model_reply(with_usage(text("Hi."), spent(100, 10, 0))));
    let events = m.take_events();
    let calls = llm_calls(&events);
    assert!(
        matches!(&calls[0], EventKind::LlmCall { cost_usd: None, model: Some(model), .. } if model == "llama3"),
        "{calls:?}"
    );
    assert!(!outcome.usage.cost_complete);
    assert_eq!(outcome.usage.cost_usd, None, "unknown, not free");
    assert_eq!(outcome.usage.prompt_tokens, 100);
    let done = events.iter().find_map(|event| match event {
        EventKind::Done { usage, .. } => Some(*usage),
        _ => None,
    });
    assert_eq!(done.and_then(|usage| usage.cost_usd), None, "{events:?}");
    assert!(done.is_some());
}

#[test]
fn a_tool_that_reports_a_cost_adds_it_to_the_run_and_to_its_record() {
    let mut m = machine_under(priced_settings("gpt-4o-mini", Budget::default()));
    model(m.start());
    let batch = tools(m.on_model_reply(with_usage(
        calls_owned(&[search("c1", "x")]),
        spent(0, 0, 0),
    )));
    let output = ToolOutput {
        cost_usd: Some(0.0023),
        ..ToolOutput::text("4 docs")
    };
    let next = m.on_tool_result(ToolResult::new(
        &batch[0].call_id,
        call_started_at(),
        1200,
        ToolOutcome::Success(output),
    ));
    model(next.unwrap());
    assert_eq!(m.state().records[0].cost_usd, Some(0.0023));
    assert_eq!(m.progress().usage.cost_usd, Some(0.0023));
}

/// Replies with tool calls until the budget forces the summary; returns the finalize reason
/// and the answer.
fn run_until_budget(mut m: RunMachine, usage: Usage) -> (Vec<EventKind>, RunOutcome) {
    let mut step = m.start();
    let mut events = Vec::new();
    for round in 0..20 {
        let request = model(step);
        events.extend(m.take_events());
        if request.tool_choice == ToolChoice::None {
            let outcome = finished(m.on_model_reply(with_usage(text("Summary."), usage)));
            events.extend(m.take_events());
            return (events, outcome);
        }
        let call = search(&format!("c{round}"), &format!("q{round}"));
        let batch = tools(m.on_model_reply(with_usage(calls_owned(&[call]), usage)));
        step = succeed_all(&mut m, &batch);
    }
    panic!("the budget never stopped the run");
}

#[test]
fn a_token_budget_forces_the_summary_with_reason_budget_and_an_answer() {
    let budget = Budget {
        max_tokens: Some(2_050),
        max_cost_usd: None,
    };
    let mut settings = priced_settings("gpt-4o-mini", budget);
    settings.max_iterations = 20;
    let (events, outcome) = run_until_budget(machine_under(settings), spent(900, 100, 0));
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Summary."));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::Budget));
    assert!(events.contains(&EventKind::ForcedFinalize {
        reason: FinalizeReason::Budget
    }));
    // After one step (1000 tokens) a step and a summary of this short conversation fit in
    // 2050; after two, they do not.
    assert_eq!(outcome.iterations, 2);
}

#[test]
fn a_cost_budget_forces_the_summary_with_reason_budget() {
    // Each step: 100 000 input tokens at 0.15 = $0.015. After two ($0.03) a short step and its
    // summary still fit under $0.04; the third brings the run to $0.045: no fourth.
    let budget = Budget {
        max_tokens: None,
        max_cost_usd: Some(0.04),
    };
    let mut settings = priced_settings("gpt-4o-mini", budget);
    settings.max_iterations = 20;
    let (_, outcome) = run_until_budget(machine_under(settings), spent(100_000, 0, 0));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::Budget));
    assert_eq!(outcome.answer.as_deref(), Some("Summary."));
    assert_eq!(outcome.iterations, 3);
}

#[test]
fn a_cost_budget_with_an_unpriced_call_stops_the_tools_at_once() {
    let budget = Budget {
        max_tokens: None,
        max_cost_usd: Some(10.0),
    };
    let mut settings = priced_settings("llama3", budget);
    settings.max_iterations = 20;
    let (_, outcome) = run_until_budget(machine_under(settings), spent(10, 1, 0));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::Budget));
    assert!(!outcome.usage.cost_complete);
}

#[test]
fn without_a_budget_the_run_goes_to_its_step_limit() {
    let mut settings = priced_settings("gpt-4o-mini", Budget::default());
    settings.max_iterations = 3;
    let (_, outcome) = run_until_budget(machine_under(settings), spent(1_000_000, 0, 0));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
}
