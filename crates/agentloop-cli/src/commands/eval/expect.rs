//! Whether what a case's runs did meets what it expects: every expectation not met, in words.

use agentloop::RunStatus;
use regex::Regex;
use serde_json::Value;

use super::cases::Expect;
use super::observe::Observation;

/// The reasons `seen` does not meet `expect` (empty: it passes).
pub fn check(expect: &Expect, seen: &Observation) -> Vec<String> {
    let mut failures = Vec::new();
    let wanted = expect
        .status
        .as_deref()
        .and_then(RunStatus::parse)
        .unwrap_or(RunStatus::Completed);
    if seen.status != Some(wanted) {
        let was = seen.status.map_or("no end", RunStatus::as_str);
        let why = seen
            .error
            .as_deref()
            .map(|error| format!(": {error}"))
            .unwrap_or_default();
        failures.push(format!("status {was}, expected {}{why}", wanted.as_str()));
    }
    let called: Vec<&str> = seen.calls.iter().map(|(tool, _)| tool.as_str()).collect();
    if !in_order(&expect.tools, &called) {
        failures.push(format!(
            "tools {called:?}, expected {:?} in this order",
            expect.tools
        ));
    }
    if let Some(set) = &expect.tool_set {
        let mut wanted: Vec<&str> = set.iter().map(String::as_str).collect();
        let mut got = called.clone();
        wanted.sort_unstable();
        wanted.dedup();
        got.sort_unstable();
        got.dedup();
        if wanted != got {
            failures.push(format!("tools {got:?}, expected the set {wanted:?}"));
        }
    }
    for forbidden in &expect.forbidden_tools {
        if called.contains(&forbidden.as_str()) {
            failures.push(format!("called the forbidden tool {forbidden}"));
        }
    }
    for (tool, patterns) in &expect.arguments {
        let calls: Vec<&Value> = seen
            .calls
            .iter()
            .filter(|(name, _)| name == tool)
            .map(|(_, arguments)| arguments)
            .collect();
        if calls.is_empty() {
            failures.push(format!(
                "{tool} was not called, so its arguments cannot match"
            ));
            continue;
        }
        let matches = |arguments: &Value| {
            patterns.iter().all(|(name, pattern)| {
                let text = match arguments.get(name) {
                    Some(Value::String(text)) => text.clone(),
                    Some(other) => other.to_string(),
                    None => return false,
                };
                Regex::new(pattern).is_ok_and(|regex| regex.is_match(&text))
            })
        };
        if !calls.iter().any(|arguments| matches(arguments)) {
            let shown: Vec<String> = calls.iter().map(|a| a.to_string()).collect();
            failures.push(format!(
                "no call of {tool} has arguments matching {patterns:?} (got {})",
                shown.join(", ")
            ));
        }
    }
    for needle in &expect.answer_contains {
        if !seen.answer.contains(needle.as_str()) {
            failures.push(format!("the answer does not contain {needle:?}"));
        }
    }
    if let Some(pattern) = &expect.answer_matches
        && !Regex::new(pattern).is_ok_and(|regex| regex.is_match(&seen.answer))
    {
        failures.push(format!("the answer does not match /{pattern}/"));
    }
    let typed = seen
        .output
        .clone()
        .or_else(|| serde_json::from_str::<Value>(seen.answer.trim()).ok());
    if let Some(wanted) = &expect.output
        && typed.as_ref() != Some(wanted)
    {
        let got = typed.as_ref().map_or("none".into(), Value::to_string);
        failures.push(format!("the typed answer is {got}, expected {wanted}"));
    }
    if let Some(schema) = &expect.output_schema {
        match (&typed, jsonschema::validator_for(schema)) {
            (None, _) => failures.push("no typed answer (nor JSON answer) to validate".into()),
            (Some(value), Ok(validator)) => {
                let errors: Vec<String> = validator
                    .iter_errors(value)
                    .map(|error| format!("{} at {}", error, error.instance_path()))
                    .collect();
                if !errors.is_empty() {
                    failures.push(format!(
                        "the typed answer is not valid: {}",
                        errors.join("; ")
                    ));
                }
            }
            (Some(_), Err(error)) => failures.push(format!("bad output_schema: {error}")),
        }
    }
    if let Some(max) = expect.max_steps
        && seen.steps > max
    {
        failures.push(format!("{} steps, at most {max} expected", seen.steps));
    }
    if let Some(max) = expect.max_tokens
        && seen.tokens > max
    {
        failures.push(format!("{} tokens, at most {max} expected", seen.tokens));
    }
    if let Some(verdict) = &seen.judge
        && !verdict.pass
    {
        failures.push(format!("the judge: {}", verdict.reason));
    }
    if let Some(max) = expect.max_cost_usd {
        match seen.cost_usd {
            Some(cost) if cost > max => {
                failures.push(format!("cost ${cost:.6}, at most ${max} expected"));
            }
            Some(_) => {}
            None => failures.push(format!(
                "the cost is unknown (no price for the model), at most ${max} expected"
            )),
        }
    }
    failures
}

/// Whether `wanted` appears in `called` in this order (other calls may come between).
fn in_order(wanted: &[String], called: &[&str]) -> bool {
    let mut rest = called.iter();
    wanted
        .iter()
        .all(|tool| rest.any(|called| *called == tool.as_str()))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn seen(calls: &[(&str, Value)], answer: &str) -> Observation {
        Observation {
            calls: calls
                .iter()
                .map(|(tool, arguments)| (tool.to_string(), arguments.clone()))
                .collect(),
            answer: answer.into(),
            status: Some(RunStatus::Completed),
            steps: 2,
            tokens: 100,
            ..Observation::default()
        }
    }

    fn expect(toml_text: &str) -> Expect {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn a_run_that_meets_everything_passes() {
        let run = seen(
            &[("a.x", json!({"n": 2})), ("a.y", json!({"q": "rows"}))],
            "{\"total\": 42}",
        );
        let all = expect(
            "tools = [\"a.x\", \"a.y\"]\ntool_set = [\"a.y\", \"a.x\"]\n\
             forbidden_tools = [\"a.z\"]\narguments = { \"a.x\" = { n = \"^2$\" } }\n\
             answer_contains = [\"42\"]\nanswer_matches = \"total\"\n\
             output = { total = 42 }\noutput_schema = { type = \"object\", required = [\"total\"] }\n\
             max_steps = 2\nmax_tokens = 100\n",
        );
        assert_eq!(check(&all, &run), Vec::<String>::new());
    }

    #[test]
    fn each_expectation_not_met_is_named() {
        let run = seen(
            &[("a.y", json!({"n": 3})), ("a.x", json!({"n": 3}))],
            "nope",
        );
        let failures = check(
            &expect(
                "tools = [\"a.x\", \"a.y\"]\ntool_set = [\"a.x\"]\nforbidden_tools = [\"a.y\"]\n\
                 arguments = { \"a.x\" = { n = \"^2$\" } }\nanswer_contains = [\"42\"]\n\
                 answer_matches = \"^4\"\noutput = 1\noutput_schema = { type = \"object\" }\n\
                 max_steps = 1\nmax_tokens = 10\nmax_cost_usd = 0.5\nstatus = \"failed\"\n",
            ),
            &run,
        );
        let all = failures.join("\n");
        for says in [
            "status completed, expected failed",
            "in this order",
            "expected the set",
            "forbidden tool a.y",
            "no call of a.x has arguments",
            "does not contain \"42\"",
            "does not match",
            "typed answer is none",
            "no typed answer",
            "2 steps, at most 1",
            "100 tokens, at most 10",
            "cost is unknown",
        ] {
            assert!(all.contains(says), "{says} not in:\n{all}");
        }
        assert_eq!(failures.len(), 12, "{all}");
    }

    #[test]
    fn tools_in_order_allow_calls_between() {
        assert!(in_order(&["a".into(), "c".into()], &["a", "b", "c"]));
        assert!(!in_order(&["c".into(), "a".into()], &["a", "b", "c"]));
        assert!(in_order(&[], &[]));
    }
}
