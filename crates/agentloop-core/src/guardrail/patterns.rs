//! The `regex` guardrail: the text trips it when it matches a `deny` pattern, or when it
//! misses a `require` pattern.

use async_trait::async_trait;
use regex::Regex;

use super::{Decision, Guardrail, GuardrailError, GuardrailRequest};

/// Deny and require patterns (the `regex` crate's syntax; `(?i)` for case-insensitive).
#[derive(Debug, Clone)]
pub struct RegexGuardrail {
    deny: Vec<Regex>,
    require: Vec<Regex>,
}

impl RegexGuardrail {
    /// The patterns compiled; the error names the pattern that does not compile.
    pub fn new(deny: &[String], require: &[String]) -> Result<Self, regex::Error> {
        let compile = |patterns: &[String]| {
            patterns
                .iter()
                .map(|pattern| Regex::new(pattern))
                .collect::<Result<Vec<_>, _>>()
        };
        Ok(Self {
            deny: compile(deny)?,
            require: compile(require)?,
        })
    }

    /// The decision on `text`, without a run.
    pub fn decide(&self, text: &str) -> Decision {
        if let Some(pattern) = self.deny.iter().find(|pattern| pattern.is_match(text)) {
            return Decision::Trip {
                reason: format!("the text matches the denied pattern `{}`", pattern.as_str()),
            };
        }
        if let Some(pattern) = self.require.iter().find(|pattern| !pattern.is_match(text)) {
            return Decision::Trip {
                reason: format!(
                    "the text does not match the required pattern `{}`",
                    pattern.as_str()
                ),
            };
        }
        Decision::Allow
    }
}

#[async_trait]
impl Guardrail for RegexGuardrail {
    async fn check(&self, request: &GuardrailRequest<'_>) -> Result<Decision, GuardrailError> {
        Ok(self.decide(request.text))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn guard(deny: &[&str], require: &[&str]) -> RegexGuardrail {
        let owned = |list: &[&str]| list.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        RegexGuardrail::new(&owned(deny), &owned(require)).unwrap()
    }

    #[test]
    fn a_denied_pattern_trips_and_names_the_pattern() {
        let guard = guard(&[r"(?i)\bpassword\b", r"\d{4}-\d{4}"], &[]);
        assert_eq!(guard.decide("what is the weather"), Decision::Allow);
        let Decision::Trip { reason } = guard.decide("my PASSWORD is hunter2") else {
            panic!("not tripped");
        };
        assert!(reason.contains(r"(?i)\bpassword\b"), "{reason}");
        assert!(
            !reason.contains("hunter2"),
            "the reason quotes the text: {reason}"
        );
        assert!(matches!(
            guard.decide("card 1234-5678"),
            Decision::Trip { .. }
        ));
    }

    #[test]
    fn a_required_pattern_trips_when_missing() {
        let guard = guard(&[], &["^Answer:", "(?s)Sources?:.+"]);
        assert_eq!(
            guard.decide("Answer: 42\nSources: the book"),
            Decision::Allow
        );
        let Decision::Trip { reason } = guard.decide("Answer: 42") else {
            panic!("not tripped");
        };
        assert!(
            reason.contains("required pattern `(?s)Sources?:.+`"),
            "{reason}"
        );
        assert!(matches!(guard.decide("42"), Decision::Trip { .. }));
    }

    #[test]
    fn deny_is_checked_before_require_and_no_patterns_allow_everything() {
        let both = guard(&["secret"], &["ok"]);
        let Decision::Trip { reason } = both.decide("ok secret") else {
            panic!("not tripped");
        };
        assert!(reason.contains("denied"), "{reason}");
        assert_eq!(guard(&[], &[]).decide("anything"), Decision::Allow);
    }

    #[test]
    fn a_pattern_that_does_not_compile_is_an_error() {
        let error = RegexGuardrail::new(&["(unclosed".to_string()], &[]).unwrap_err();
        assert!(error.to_string().contains("unclosed"), "{error}");
    }

    #[tokio::test]
    async fn the_trait_checks_the_request_text() {
        let guard = guard(&["bad"], &[]);
        let request = GuardrailRequest::new(
            super::super::GuardrailSide::Output,
            "a bad answer",
            uuid::Uuid::nil(),
            uuid::Uuid::nil(),
        );
        assert!(matches!(
            guard.check(&request).await.unwrap(),
            Decision::Trip { .. }
        ));
    }
}
