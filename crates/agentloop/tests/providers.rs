//! The loop over each native provider: Anthropic's Messages API and OpenAI's Responses API,
//! each talking real HTTP to a scripted server of its wire format, with the tools of the test
//! MCP server. Every behaviour runs once per provider (`anthropic::…`, `responses::…`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod common;

use agentloop::{EventKind, FinalizeReason, RunRequest, RunStatus, Runtime, Usage};
use agentloop_test_support::scripted_llm::{Reply, ScriptedLlm, Wire};
use common::*;
use serde_json::{Value, json};
use uuid::Uuid;

/// One test per provider, each an async fn taking the wire.
macro_rules! per_provider {
    ($($name:ident),* $(,)?) => {
        mod anthropic {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Wire::Anthropic).await
            })*
        }
        mod responses {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::Wire::Responses).await
            })*
        }
    };
}

per_provider!(
    chained_calls_reach_the_answer_with_the_stable_prefix_cached,
    parallel_calls_of_one_turn_come_back_together_in_call_order,
    the_forced_summary_asks_with_tool_choice_none,
    a_failed_tool_goes_back_as_an_error_result,
    rate_limits_and_overload_are_retried_then_succeed,
    a_refused_key_fails_at_once_with_the_providers_message,
    a_stream_cut_before_its_final_event_fails_the_run,
    usage_counts_cached_tokens,
    cache_reads_and_writes_are_priced_as_the_price_table_says,
    a_session_written_by_chat_completions_goes_on_over_this_provider,
);

/// The tool choice of a recorded request: `auto` or `none`.
fn tool_choice(request: &Value) -> String {
    let choice = &request["tool_choice"];
    choice["type"]
        .as_str()
        .or_else(|| choice.as_str())
        .unwrap_or_default()
        .to_owned()
}

/// The tool results of a recorded request, in order: (call id, content, is_error).
fn results(request: &Value, wire: Wire) -> Vec<(String, String, bool)> {
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    match wire {
        Wire::Anthropic => request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|message| message["content"].as_array().unwrap().iter())
            .filter(|block| block["type"] == "tool_result")
            .map(|block| {
                let error = block["is_error"] == true;
                (text(&block["tool_use_id"]), text(&block["content"]), error)
            })
            .collect(),
        _ => request["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| item["type"] == "function_call_output")
            .map(|item| {
                let output = text(&item["output"]);
                let error = output.contains("\"status\":\"error\"");
                (text(&item["call_id"]), output, error)
            })
            .collect(),
    }
}

/// The ids of the tool calls in a recorded request, in order.
fn calls(request: &Value, wire: Wire) -> Vec<String> {
    match wire {
        Wire::Anthropic => request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|message| message["content"].as_array().unwrap().iter())
            .filter(|block| block["type"] == "tool_use")
            .map(|block| block["id"].as_str().unwrap().to_owned())
            .collect(),
        _ => request["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| item["type"] == "function_call")
            .map(|item| item["call_id"].as_str().unwrap().to_owned())
            .collect(),
    }
}

/// The system prompt as sent: Anthropic's first system block, the Responses API's first item.
fn system_prompt(request: &Value, wire: Wire) -> Value {
    match wire {
        Wire::Anthropic => request["system"][0]["text"].clone(),
        _ => {
            assert_eq!(request["input"][0]["role"], "system", "{request}");
            request["input"][0]["content"].clone()
        }
    }
}

async fn chained_calls_reach_the_answer_with_the_stable_prefix_cached(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "hello"})),
            Reply::tool_call("test__add", json!({"a": 2, "b": 3})),
            Reply::text("The echo said hello and 2 + 3 = 5."),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "Echo hello, then add 2 and 3").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("The echo said hello and 2 + 3 = 5.")
    );
    assert_eq!(
        statuses(&outcome.records),
        [("test.echo", "success"), ("test.add", "success")]
    );
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    let second = results(&requests[1], wire);
    assert_eq!(second.len(), 1);
    assert_eq!((second[0].1.as_str(), second[0].2), ("hello", false));
    assert_eq!(
        second[0].0,
        calls(&requests[1], wire)[0],
        "the result answers its call"
    );
    assert_eq!(results(&requests[2], wire)[1].1, "5");
    for request in &requests {
        assert_eq!(tool_choice(request), "auto");
        assert_eq!(
            system_prompt(request, wire),
            system_prompt(&requests[0], wire)
        );
        assert!(offered(request).contains(&"test__echo".to_string()));
        assert_eq!(request["model"], "scripted");
        assert_eq!(request["stream"], true);
    }
    match wire {
        Wire::Anthropic => {
            for request in &requests {
                // The stable prefix is cached: the tools (breakpoint on the last) and the
                // system prompt; never a system role among the messages.
                let tools = request["tools"].as_array().unwrap();
                assert_eq!(tools.last().unwrap()["cache_control"]["type"], "ephemeral");
                assert!(tools[0].get("input_schema").is_some(), "{}", tools[0]);
                assert_eq!(request["system"][0]["cache_control"]["type"], "ephemeral");
                assert_eq!(request["max_tokens"], 4096);
                let roles: Vec<&str> = request["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|message| message["role"].as_str().unwrap())
                    .collect();
                assert!(!roles.contains(&"system"), "{roles:?}");
                assert_eq!(roles[0], "user");
            }
            assert!(
                llm.request_header("anthropic-version")
                    .iter()
                    .all(|version| version.as_deref() == Some("2023-06-01"))
            );
        }
        _ => {
            for request in &requests {
                assert_eq!(request["store"], false);
                assert_eq!(request["include"], json!(["reasoning.encrypted_content"]));
                assert_eq!(request["tools"][0]["type"], "function");
            }
        }
    }
    let streamed: String = find(&events, "assistant_delta")
        .into_iter()
        .map(|kind| match kind {
            EventKind::AssistantDelta { text } => text.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(streamed, "The echo said hello and 2 + 3 = 5.");
    runtime.shutdown().await;
}

async fn parallel_calls_of_one_turn_come_back_together_in_call_order(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_calls(vec![
                ("test__echo", json!({"text": "first"})),
                ("test__add", json!({"a": 40, "b": 2})),
                ("test__echo", json!({"text": "third"})),
            ]),
            Reply::text("done"),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "three at once").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.records.len(), 3);
    let request = &llm.requests()[1];
    let calls = calls(request, wire);
    let results = results(request, wire);
    let ids: Vec<String> = results.iter().map(|(id, _, _)| id.clone()).collect();
    assert_eq!(ids, calls, "results in the order of the calls");
    let texts: Vec<&str> = results.iter().map(|(_, text, _)| text.as_str()).collect();
    assert_eq!(texts, ["first", "42", "third"]);
    if wire == Wire::Anthropic {
        // One assistant turn with the three tool_use blocks, one user message with the three
        // results right after it.
        let messages = request["messages"].as_array().unwrap();
        let turn = messages
            .iter()
            .position(|message| message["content"][0]["type"] == "tool_use")
            .unwrap();
        assert_eq!(messages[turn]["content"].as_array().unwrap().len(), 3);
        let answer = &messages[turn + 1];
        assert_eq!(answer["role"], "user");
        let kinds: Vec<&str> = answer["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|block| block["type"].as_str().unwrap())
            .collect();
        assert_eq!(kinds, ["tool_result", "tool_result", "tool_result"]);
        assert_eq!(messages.len(), turn + 2, "{messages:?}");
    }
    runtime.shutdown().await;
}

async fn the_forced_summary_asks_with_tool_choice_none(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "one"})),
            Reply::tool_call("test__echo", json!({"text": "two"})),
            Reply::text("I echoed one and two."),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "[agent]\nmax_iterations = 2\n").await;
    let (events, outcome) = run(&runtime, "echo forever").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("I echoed one and two."));
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::MaxIterations));
    let requests = llm.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(tool_choice(&requests[1]), "auto");
    assert_eq!(tool_choice(&requests[2]), "none");
    let answer: String = find(&events, "final_response")
        .into_iter()
        .map(|kind| match kind {
            EventKind::FinalResponse { delta } => delta.as_str(),
            _ => "",
        })
        .collect();
    assert_eq!(answer, "I echoed one and two.");
    runtime.shutdown().await;
}

async fn a_failed_tool_goes_back_as_an_error_result(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_calls(vec![
                ("test__fail", json!({"message": "database offline"})),
                ("test__echo", json!({"text": "fine"})),
            ]),
            Reply::text("The database is offline."),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "read the database").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        statuses(&outcome.records),
        [("test.fail", "error"), ("test.echo", "success")]
    );
    let results = results(&llm.requests()[1], wire);
    assert!(results[0].1.contains("database offline"), "{results:?}");
    assert!(results[0].2, "the failure is an error result: {results:?}");
    assert!(!results[1].2, "{results:?}");
    runtime.shutdown().await;
}

async fn rate_limits_and_overload_are_retried_then_succeed(wire: Wire) {
    let overloaded = match wire {
        Wire::Anthropic => Reply::error(529, "Overloaded"),
        _ => Reply::error(500, "The server had an error"),
    };
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::error(429, "Rate limit reached").with_header("retry-after", "0"),
            overloaded.with_header("retry-after", "0"),
            Reply::text("Hello after the wait."),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("Hello after the wait."));
    assert_eq!(llm.requests().len(), 3);
    runtime.shutdown().await;
}

async fn a_refused_key_fails_at_once_with_the_providers_message(wire: Wire) {
    let llm = ScriptedLlm::start_wire(wire, vec![Reply::error(401, "invalid x-api-key")]).await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Failed);
    let failure = outcome.failure.unwrap();
    assert_eq!(failure.code, "llm_unauthorized");
    assert!(
        failure.message.contains("invalid x-api-key"),
        "{}",
        failure.message
    );
    let variable = match wire {
        Wire::Anthropic => "ANTHROPIC_API_KEY",
        _ => "OPENAI_API_KEY",
    };
    assert!(failure.message.contains(variable), "{}", failure.message);
    assert_eq!(llm.requests().len(), 1, "a 401 is not retried");
    assert_eq!(
        types(&events)[types(&events).len() - 2..],
        ["error", "done"]
    );
    runtime.shutdown().await;
}

async fn a_stream_cut_before_its_final_event_fails_the_run(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "never runs"})).truncated(),
            Reply::text("not asked for"),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Failed);
    assert_eq!(outcome.failure.unwrap().code, "llm_truncated_stream");
    assert!(
        outcome.records.is_empty(),
        "a call of a cut reply never runs"
    );
    assert_eq!(llm.requests().len(), 1);
    runtime.shutdown().await;
}

async fn usage_counts_cached_tokens(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "x"}))
                .with_usage(1000, 20)
                .with_cache(0, 900),
            Reply::text("done").with_usage(1100, 30).with_cache(900, 0),
        ],
    )
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (events, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    let expected = Usage {
        prompt_tokens: 2100,
        completion_tokens: 50,
        cache_read_tokens: 900,
        // OpenAI reports cache reads only.
        cache_creation_tokens: if wire == Wire::Anthropic { 900 } else { 0 },
        reasoning_tokens: 0,
        // No price table: the cost is not known.
        cost_usd: None,
        cost_complete: false,
    };
    assert_eq!(outcome.usage, expected);
    let done = find(&events, "done");
    assert!(
        matches!(done.last(), Some(EventKind::Done { usage, .. }) if *usage == expected),
        "{done:?}"
    );
    // Each call is reported with the model that answered and its cache reads.
    let calls = find(&events, "llm_call");
    assert!(
        matches!(
            calls[..],
            [
                EventKind::LlmCall { model: Some(first), cached_tokens: 0, cost_usd: None, .. },
                EventKind::LlmCall { model: Some(second), cached_tokens: 900, cost_usd: None, .. },
            ] if first == "scripted" && second == "scripted"
        ),
        "{calls:?}"
    );
    runtime.shutdown().await;
}

async fn cache_reads_and_writes_are_priced_as_the_price_table_says(wire: Wire) {
    let llm = ScriptedLlm::start_wire(
        wire,
        vec![
            Reply::tool_call("test__echo", json!({"text": "x"}))
                .with_usage(1000, 20)
                .with_cache(0, 900),
            Reply::text("done").with_usage(1100, 30).with_cache(900, 0),
        ],
    )
    .await;
    let prices =
        "[prices.scripted]\ninput = 1.0\noutput = 2.0\ncached_input = 0.1\ncache_write = 1.25\n";
    let runtime = runtime(&llm, None, prices).await;
    let (events, outcome) = run(&runtime, "hi").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    // USD per million tokens: uncached input at 1.0, cache reads at 0.1, cache writes at 1.25,
    // output at 2.0. The first call writes 900 tokens to Anthropic's cache (OpenAI reports
    // no writes: its 1000 input tokens are all uncached); the second reads them.
    let first = match wire {
        Wire::Anthropic => 100.0 * 1.0 + 900.0 * 1.25 + 20.0 * 2.0,
        _ => 1000.0 * 1.0 + 20.0 * 2.0,
    } / 1e6;
    let second = (200.0 * 1.0 + 900.0 * 0.1 + 30.0 * 2.0) / 1e6;
    let costs: Vec<f64> = find(&events, "llm_call")
        .iter()
        .filter_map(|kind| match kind {
            EventKind::LlmCall { cost_usd, .. } => *cost_usd,
            _ => None,
        })
        .collect();
    assert_eq!(costs.len(), 2, "{costs:?}");
    assert!((costs[0] - first).abs() < 1e-12, "{costs:?} vs {first}");
    assert!((costs[1] - second).abs() < 1e-12, "{costs:?} vs {second}");
    assert!(outcome.usage.cost_complete);
    let total = outcome.usage.cost_usd.unwrap_or_default();
    assert!((total - (first + second)).abs() < 1e-12, "{total}");
    runtime.shutdown().await;
}

async fn a_session_written_by_chat_completions_goes_on_over_this_provider(wire: Wire) {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite://{}", dir.path().join("switch.db").display());
    let session = Uuid::now_v7();
    let openai = ScriptedLlm::start(vec![
        Reply::tool_call("test__echo", json!({"text": "accounts: 123456"})),
        Reply::text("You have the account 123456."),
    ])
    .await;
    let first = Runtime::start(&config_with_store(&openai, None, &store, ""))
        .await
        .unwrap();
    let (_, outcome) = first
        .agent()
        .run(RunRequest::new("Show me my accounts").session(session))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    first.shutdown().await;

    let llm = ScriptedLlm::start_wire(wire, vec![Reply::text("It has 2 properties.")]).await;
    let second = Runtime::start(&config_with_store(&llm, None, &store, ""))
        .await
        .unwrap();
    let (_, outcome) = second
        .agent()
        .run(RunRequest::new("What properties does it have?").session(session))
        .collect()
        .await
        .unwrap();
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("It has 2 properties."));
    let request = &llm.requests()[0];
    // The call written by Chat Completions (id `call_1`) and its result, in this wire format.
    assert_eq!(calls(request, wire), ["call_1"]);
    let results = results(request, wire);
    assert_eq!(results.len(), 1);
    assert_eq!(
        (results[0].0.as_str(), results[0].1.as_str()),
        ("call_1", "accounts: 123456")
    );
    let conversation: Vec<(String, String)> = match wire {
        Wire::Anthropic => request["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|message| {
                let kinds: Vec<&str> = message["content"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|block| block["type"].as_str().unwrap())
                    .collect();
                (
                    message["role"].as_str().unwrap().to_owned(),
                    kinds.join("+"),
                )
            })
            .collect(),
        _ => request["input"]
            .as_array()
            .unwrap()
            .iter()
            .map(|item| {
                let role = item["role"].as_str().unwrap_or_default().to_owned();
                (role, item["type"].as_str().unwrap().to_owned())
            })
            .collect(),
    };
    let expected: &[(&str, &str)] = match wire {
        Wire::Anthropic => &[
            ("user", "text"),
            ("assistant", "tool_use"),
            ("user", "tool_result"),
            ("assistant", "text"),
            ("user", "text"),
        ],
        _ => &[
            ("system", "message"),
            ("user", "message"),
            ("", "function_call"),
            ("", "function_call_output"),
            ("assistant", "message"),
            ("user", "message"),
        ],
    };
    let expected: Vec<(String, String)> = expected
        .iter()
        .map(|(role, kind)| (role.to_string(), kind.to_string()))
        .collect();
    assert_eq!(conversation, expected);
    second.shutdown().await;
}

#[tokio::test]
async fn reasoning_items_go_back_with_the_calls_they_led_to() {
    let llm = ScriptedLlm::start_responses(vec![
        Reply::tool_call("test__echo", json!({"text": "hello"})).with_reasoning("enc-1", 42),
        Reply::text("done"),
    ])
    .await;
    let runtime = runtime(&llm, None, "").await;
    let (_, outcome) = run(&runtime, "think, then echo").await;
    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.usage.reasoning_tokens, 42);
    let input = llm.requests()[1]["input"].as_array().unwrap().clone();
    let kinds: Vec<&str> = input
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    let reasoning = kinds.iter().position(|kind| *kind == "reasoning").unwrap();
    assert_eq!(kinds[reasoning + 1], "function_call", "{kinds:?}");
    assert_eq!(input[reasoning]["encrypted_content"], "enc-1");
    assert!(
        llm.requests()[0]["input"]
            .as_array()
            .unwrap()
            .iter()
            .all(|item| item["type"] != "reasoning")
    );
    runtime.shutdown().await;
}

/// The text of every system block of an Anthropic request.
fn system_blocks(request: &Value) -> Vec<String> {
    request["system"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|block| block["text"].as_str().unwrap().to_owned())
        .collect()
}

/// The text blocks of the last message of an Anthropic request.
fn last_texts(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().unwrap();
    messages.last().unwrap()["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|block| block["text"].as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_json_planner_works_over_anthropic() {
    let llm = ScriptedLlm::start_anthropic(vec![
        Reply::text(
            r#"{"action": "tool", "tool": "test__echo", "parameters": {"text": "hello"}, "reasoning": "First the echo."}"#,
        ),
        Reply::text(r#"{"action": "finalize", "answer": "The echo said hello."}"#),
    ])
    .await;
    let text = agentloop_test_support::config::TestConfig::new(&llm.base_url())
        .llm("provider = \"anthropic\"")
        .llm("tool_calling = \"json\"")
        .llm("timeout_s = 10")
        .store("sqlite::memory:")
        .toml();
    let config = agentloop::Config::parse(&text, agentloop::ConfigOrigin::Defaults).unwrap();
    config.validate().unwrap();
    let runtime = Runtime::start(&config).await.unwrap();
    let (_, outcome) = run(&runtime, "Echo hello").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(outcome.answer.as_deref(), Some("The echo said hello."));
    assert_eq!(statuses(&outcome.records), [("test.echo", "success")]);
    let requests = llm.requests();
    assert_eq!(requests.len(), 2);
    for request in &requests {
        assert!(request.get("tools").is_none(), "{request}");
        assert!(request.get("tool_choice").is_none(), "{request}");
        // The system prompt, then the JSON-planner prompt as a second system block.
        let system = system_blocks(request);
        assert_eq!(system.len(), 2, "{system:?}");
        assert!(system[1].contains("test__echo"), "{}", system[1]);
        assert_eq!(request["system"][0]["cache_control"]["type"], "ephemeral");
    }
    let result = last_texts(&requests[1]).join("\n");
    assert!(result.contains("hello"), "{result}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn planning_and_review_work_over_anthropic() {
    let plan = json!({
        "goal": "Report Q4",
        "sub_tasks": [
            {"id": "1", "description": "Search the notes", "status": "pending", "depends_on": []},
            {"id": "2", "description": "Summarise", "status": "pending", "depends_on": ["1"]}
        ],
        "needs_clarification": false,
        "clarification_question": null
    });
    let llm = ScriptedLlm::start_anthropic(vec![
        Reply::text(format!("Here is my plan:\n```json\n{plan}\n```")),
        Reply::tool_calls(vec![
            (
                "write_plan",
                json!({"sub_tasks": [{"id": "1", "status": "done"}]}),
            ),
            ("test__echo", json!({"text": "no Q4 rows"})),
        ]),
        Reply::text(r#"{"action": "stop", "reason": "the data is not there"}"#),
        Reply::text("I could not find any Q4 data, so I stopped."),
    ])
    .await;
    let extra = "[agent]\nsystem_prompt = \"You plan.\"\nmax_iterations = 4\n\n\
                 [agent.planning]\nenabled = true\n\n[agent.review]\nevery_n_tool_calls = 1\n";
    let runtime = runtime(&llm, None, extra).await;
    let (_, outcome) = run(&runtime, "Report on Q4").await;

    assert_eq!(outcome.status, RunStatus::Completed);
    assert_eq!(
        outcome.answer.as_deref(),
        Some("I could not find any Q4 data, so I stopped.")
    );
    assert_eq!(outcome.finalize_reason, Some(FinalizeReason::ReviewStop));
    assert_eq!(outcome.plan.as_ref().unwrap().goal, "Report Q4");
    let requests = llm.requests();
    assert_eq!(requests.len(), 4);
    // The planning call: no tools, its instruction last, in the user turn.
    assert!(requests[0].get("tools").is_none(), "{}", requests[0]);
    assert_eq!(system_blocks(&requests[0]), ["You plan."]);
    let closing = last_texts(&requests[0]);
    assert_eq!(closing[0], "Report on Q4");
    assert!(
        closing.last().unwrap().starts_with("<system>"),
        "{closing:?}"
    );
    // The step: the plan as a second system block after the unchanged system prompt.
    let system = system_blocks(&requests[1]);
    assert_eq!(system[0], "You plan.");
    assert!(system[1].starts_with("<Plan>"), "{system:?}");
    assert_eq!(tool_choice(&requests[1]), "auto");
    // The review sees the calls and results as text: it is offered no tools.
    assert!(requests[2].get("tools").is_none(), "{}", requests[2]);
    let review = serde_json::to_string(&requests[2]["messages"]).unwrap();
    assert!(review.contains("no Q4 rows"), "{review}");
    assert!(!review.contains("\"tool_use\""), "{review}");
    // The summary after the stop: tool choice none.
    assert_eq!(tool_choice(&requests[3]), "none");
    runtime.shutdown().await;
}
