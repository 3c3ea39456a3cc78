//! What `agentloop eval` tells: a table, JSON (also what `--compare` reads), JUnit XML.

use std::collections::BTreeMap;
use std::time::Duration;

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};
use serde::{Deserialize, Serialize};

use super::observe::Observation;

/// One repetition of a case.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Attempt {
    pub seen: Observation,
    /// Why it failed; empty when it passed.
    pub failures: Vec<String>,
}

/// A case's results over its repetitions.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CaseResult {
    pub name: String,
    pub attempts: Vec<Attempt>,
}

impl CaseResult {
    pub fn passes(&self) -> usize {
        self.attempts
            .iter()
            .filter(|a| a.failures.is_empty())
            .count()
    }

    /// Every repetition passed.
    pub fn passed(&self) -> bool {
        self.passes() == self.attempts.len()
    }

    /// The reasons of the first repetition that failed.
    pub fn why(&self) -> String {
        self.attempts
            .iter()
            .find(|a| !a.failures.is_empty())
            .map(|a| a.failures.join("; "))
            .unwrap_or_default()
    }

    fn mean<T: Into<f64>>(&self, of: impl Fn(&Observation) -> T) -> f64 {
        let n = self.attempts.len().max(1) as f64;
        self.attempts
            .iter()
            .map(|a| of(&a.seen).into())
            .sum::<f64>()
            / n
    }

    fn mean_cost(&self) -> Option<f64> {
        let costs: Vec<f64> = self
            .attempts
            .iter()
            .filter_map(|a| a.seen.cost_usd)
            .collect();
        (!costs.is_empty()).then(|| costs.iter().sum::<f64>() / costs.len() as f64)
    }

    fn mean_latency(&self) -> Duration {
        Duration::from_secs_f64(self.mean(|seen| seen.latency.as_secs_f64()))
    }
}

/// The results as a table: one row per case, means over its repetitions.
pub fn table(results: &[CaseResult]) -> String {
    let mut rows = vec![[
        "case".to_string(),
        "result".into(),
        "steps".into(),
        "tokens".into(),
        "cost".into(),
        "latency".into(),
        "why".into(),
    ]];
    for result in results {
        let verdict = match (result.passed(), result.attempts.len()) {
            (true, 1) => "pass".to_string(),
            (false, 1) => "FAIL".to_string(),
            (true, n) => format!("pass {n}/{n}"),
            (false, n) => format!("FAIL {}/{n}", result.passes()),
        };
        rows.push([
            result.name.clone(),
            verdict,
            format!("{:.1}", result.mean(|seen| seen.steps)),
            format!("{:.0}", result.mean(|seen| seen.tokens as f64)),
            result
                .mean_cost()
                .map_or("unknown".into(), |cost| format!("${cost:.6}")),
            format!("{:.0} ms", result.mean_latency().as_secs_f64() * 1000.0),
            result.why(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|column| {
            rows.iter()
                .map(|row| row[column].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut text = String::new();
    for row in &rows {
        let mut line = String::new();
        for (column, width) in widths.iter().enumerate() {
            line.push_str(&format!("{:<width$}  ", row[column]));
        }
        line.push_str(&row[6]);
        text.push_str(line.trim_end());
        text.push('\n');
    }
    let passed = results.iter().filter(|r| r.passed()).count();
    text.push_str(&format!("{passed} of {} cases passed\n", results.len()));
    let verdicts: Vec<&super::judge::Verdict> = results
        .iter()
        .flat_map(|r| &r.attempts)
        .filter_map(|a| a.seen.judge.as_ref())
        .collect();
    if !verdicts.is_empty() {
        let tokens: u64 = verdicts.iter().map(|v| v.tokens).sum();
        let cost = match verdicts.iter().map(|v| v.cost_usd).sum::<Option<f64>>() {
            Some(cost) => format!("${cost:.6}"),
            None => "cost unknown".into(),
        };
        text.push_str(&format!(
            "the judge (not in the figures above): {} calls, {tokens} tokens, {cost}\n",
            verdicts.len()
        ));
    }
    text
}

/// The results as JUnit XML: a test case per repetition, its failures as the message.
pub fn junit(results: &[CaseResult]) -> anyhow::Result<String> {
    let mut suite = TestSuite::new("agentloop eval");
    for result in results {
        for (n, attempt) in result.attempts.iter().enumerate() {
            let name = match result.attempts.len() {
                1 => result.name.clone(),
                _ => format!("{} #{}", result.name, n + 1),
            };
            let status = if attempt.failures.is_empty() {
                TestCaseStatus::success()
            } else {
                let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                status.set_message(attempt.failures.join("; "));
                status
            };
            let mut case = TestCase::new(name, status);
            case.set_classname("agentloop.eval");
            case.set_time(attempt.seen.latency);
            suite.add_test_case(case);
        }
    }
    let mut report = Report::new("agentloop eval");
    report.add_test_suite(suite);
    Ok(report.to_string()?)
}

/// What changed between two runs of a case set (`--json` outputs): cases whose verdict
/// changed, and the steps, tokens and cost of each case in both.
pub fn compare(before: &[CaseResult], after: &[CaseResult]) -> String {
    let by_name = |results: &[CaseResult]| -> BTreeMap<String, CaseResult> {
        results
            .iter()
            .map(|r| (r.name.clone(), r.clone()))
            .collect()
    };
    let (before, after) = (by_name(before), by_name(after));
    let mut names: Vec<&String> = before.keys().chain(after.keys()).collect();
    names.sort();
    names.dedup();
    let mut text = String::new();
    let mut changed = 0;
    for name in names {
        let line = match (before.get(name), after.get(name)) {
            (Some(a), Some(b)) => {
                let verdict = |r: &CaseResult| if r.passed() { "pass" } else { "FAIL" };
                let moved = a.passed() != b.passed();
                changed += usize::from(moved);
                format!(
                    "{name}: {} → {}{}  steps {:.1} → {:.1}  tokens {:.0} → {:.0}",
                    verdict(a),
                    verdict(b),
                    if moved { " (changed)" } else { "" },
                    a.mean(|seen| seen.steps),
                    b.mean(|seen| seen.steps),
                    a.mean(|seen| seen.tokens as f64),
                    b.mean(|seen| seen.tokens as f64),
                )
            }
            (Some(_), None) => {
                changed += 1;
                format!("{name}: only in the first")
            }
            (None, Some(_)) => {
                changed += 1;
                format!("{name}: only in the second")
            }
            (None, None) => continue,
        };
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str(&format!("{changed} cases changed\n"));
    text
}
