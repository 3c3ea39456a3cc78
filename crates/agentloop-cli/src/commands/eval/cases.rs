//! The case file of `agentloop eval`: TOML, one `[[case]]` table each.
//!
//! ```toml
//! [[case]]
//! name = "adds"
//! question = "What is 2 + 40?"          # or: conversation = ["first", "then"]
//! [case.expect]
//! tools = ["demo.get-sum"]             # called in this order (others may come between)
//! tool_set = ["demo.get-sum"]          # exactly these tools, in any order
//! forbidden_tools = ["demo.delete"]
//! arguments = { "demo.get-sum" = { a = "^2$" } }   # each argument's text matches
//! answer_contains = ["42"]
//! answer_matches = "4[0-9]"
//! output = { total = 42 }              # the typed answer equals this
//! output_schema = { type = "object" }  # the typed answer (or the answer's JSON) is valid
//! status = "completed"                 # the default
//! max_steps = 4
//! max_tokens = 2000
//! max_cost_usd = 0.01
//! judge = { rubric = "Names the total and nothing else", model = "gpt-4o-mini" }  # an LLM judge
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use agentloop::core::OutputSpec;
use anyhow::Context;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;

/// A whole case file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaseFile {
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

/// One case: what to ask and what to expect.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub name: String,
    /// The question (or `conversation`: questions asked one after another in one session).
    #[serde(default)]
    pub question: Option<String>,
    #[serde(default)]
    pub conversation: Vec<String>,
    /// A typed answer asked for this case (instead of the agent's `[agent] output_schema`).
    #[serde(default)]
    pub output: Option<OutputSpec>,
    #[serde(default)]
    pub expect: Expect,
}

/// What a case expects of its run (of all its runs, for a conversation; the answer is the
/// last run's).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default)]
    pub tools: Vec<String>,
    #[serde(default)]
    pub tool_set: Option<Vec<String>>,
    #[serde(default)]
    pub forbidden_tools: Vec<String>,
    #[serde(default)]
    pub arguments: BTreeMap<String, BTreeMap<String, String>>,
    #[serde(default)]
    pub answer_contains: Vec<String>,
    #[serde(default)]
    pub answer_matches: Option<String>,
    #[serde(default)]
    pub output: Option<Value>,
    #[serde(default)]
    pub output_schema: Option<Value>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub max_steps: Option<u32>,
    #[serde(default)]
    pub max_tokens: Option<u64>,
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// An LLM judge with a rubric (`judge.rs`): its own model and cost.
    #[serde(default)]
    pub judge: Option<super::judge::Judge>,
}

impl Case {
    /// The questions of the case, in order.
    pub fn questions(&self) -> Vec<String> {
        match &self.question {
            Some(question) => vec![question.clone()],
            None => self.conversation.clone(),
        }
    }
}

/// Reads and checks the case file at `path`: every problem is an error naming the case.
pub fn load(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the case file {}", path.display()))?;
    let file: CaseFile =
        toml::from_str(&text).with_context(|| format!("{} is not a case file", path.display()))?;
    check(&file.cases).with_context(|| format!("{} has a bad case", path.display()))?;
    Ok(file.cases)
}

fn check(cases: &[Case]) -> anyhow::Result<()> {
    if cases.is_empty() {
        anyhow::bail!("no [[case]] table");
    }
    let mut names = std::collections::BTreeSet::new();
    for case in cases {
        let name = &case.name;
        if !names.insert(name.as_str()) {
            anyhow::bail!("two cases are named {name:?}");
        }
        match (&case.question, case.conversation.is_empty()) {
            (Some(_), false) => anyhow::bail!("case {name:?}: question or conversation, not both"),
            (None, true) => anyhow::bail!("case {name:?}: a question or a conversation is needed"),
            _ => {}
        }
        let expect = &case.expect;
        let patterns = expect
            .arguments
            .values()
            .flat_map(BTreeMap::values)
            .chain(&expect.answer_matches);
        for pattern in patterns {
            Regex::new(pattern)
                .with_context(|| format!("case {name:?}: the pattern {pattern:?} is not valid"))?;
        }
        if let Some(schema) = &expect.output_schema {
            jsonschema::validator_for(schema).map_err(|error| {
                anyhow::anyhow!("case {name:?}: expect.output_schema is not a JSON Schema: {error}")
            })?;
        }
        if expect
            .judge
            .as_ref()
            .is_some_and(|judge| judge.rubric.trim().is_empty())
        {
            anyhow::bail!("case {name:?}: expect.judge.rubric must say what a good answer does");
        }
        if let Some(status) = &expect.status
            && agentloop::RunStatus::parse(status).is_none()
        {
            anyhow::bail!("case {name:?}: expect.status {status:?} is not a run status");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> anyhow::Result<Vec<Case>> {
        let file: CaseFile = toml::from_str(text)?;
        check(&file.cases)?;
        Ok(file.cases)
    }

    #[test]
    fn a_case_reads_with_its_expectations() {
        let cases = parse(
            "[[case]]\nname = \"a\"\nquestion = \"q\"\n[case.expect]\ntools = [\"x.y\"]\n\
             arguments = { \"x.y\" = { a = \"^2$\" } }\nmax_steps = 3\n",
        )
        .unwrap();
        assert_eq!(cases[0].questions(), ["q"]);
        assert_eq!(cases[0].expect.tools, ["x.y"]);
        assert_eq!(cases[0].expect.arguments["x.y"]["a"], "^2$");
    }

    #[test]
    fn bad_cases_are_refused_naming_the_case() {
        for (text, says) in [
            ("[[case]]\nname = \"a\"\n", "a question or a conversation"),
            (
                "[[case]]\nname = \"a\"\nquestion = \"q\"\nconversation = [\"r\"]\n",
                "not both",
            ),
            (
                "[[case]]\nname = \"a\"\nquestion = \"q\"\n[[case]]\nname = \"a\"\nquestion = \"r\"\n",
                "two cases",
            ),
            (
                "[[case]]\nname = \"a\"\nquestion = \"q\"\n[case.expect]\nanswer_matches = \"(\"\n",
                "not valid",
            ),
            (
                "[[case]]\nname = \"a\"\nquestion = \"q\"\n[case.expect]\nstatus = \"done\"\n",
                "not a run status",
            ),
        ] {
            let error = format!("{:#}", parse(text).unwrap_err());
            assert!(error.contains(says), "{text}: {error}");
        }
        assert!(parse("[[case]]\nname = \"a\"\nquestion = \"q\"\nwhat = 1\n").is_err());
    }
}
