//! Provider-safe tool names: internal names such as `projects.update_quote_totals` become
//! `projects__update_quote_totals`, matching `^[a-zA-Z0-9_-]{1,64}$`.

use std::collections::HashSet;

/// Sub-agents are offered as tools named `agent.NAME`.
pub const AGENT_TOOL_PREFIX: &str = "agent.";

const MAX_LEN: usize = 64;

/// The provider-safe spelling of an internal name (not yet made unique).
pub fn sanitize(internal: &str) -> String {
    let mut out = String::with_capacity(internal.len() + 4);
    for ch in internal.chars() {
        match ch {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '_' | '-' => out.push(ch),
            '.' => out.push_str("__"),
            _ => out.push('_'),
        }
    }
    if out.is_empty() {
        out.push_str("tool");
    }
    truncate(&mut out, MAX_LEN);
    out
}

/// A provider-safe name for `internal` that is not in `taken`; records it there.
pub fn unique(internal: &str, taken: &mut HashSet<String>) -> String {
    let base = sanitize(internal);
    if taken.insert(base.clone()) {
        return base;
    }
    for n in 2.. {
        let suffix = format!("_{n}");
        let mut candidate = base.clone();
        truncate(&mut candidate, MAX_LEN - suffix.len());
        candidate.push_str(&suffix);
        if taken.insert(candidate.clone()) {
            return candidate;
        }
    }
    base
}

fn truncate(name: &mut String, max: usize) {
    // Only ASCII remains after sanitising, so byte and char positions agree.
    if name.len() > max {
        name.truncate(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_provider_safe(name: &str) -> bool {
        (1..=64).contains(&name.len())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    }

    #[test]
    fn dots_become_double_underscores() {
        assert_eq!(
            sanitize("projects.update_quote_totals"),
            "projects__update_quote_totals"
        );
    }

    #[test]
    fn anything_else_becomes_safe() {
        for name in ["a b/c", "é.ü", "", &"x".repeat(100), "get-sum"] {
            let safe = sanitize(name);
            assert!(is_provider_safe(&safe), "{name:?} -> {safe:?}");
        }
    }

    #[test]
    fn collisions_get_a_suffix() {
        let mut taken = HashSet::new();
        let first = unique("a.b", &mut taken);
        let second = unique("a__b", &mut taken);
        assert_eq!(first, "a__b");
        assert_eq!(second, "a__b_2");
        let long = "y".repeat(70);
        let one = unique(&long, &mut taken);
        let two = unique(&long, &mut taken);
        assert_ne!(one, two);
        assert!(is_provider_safe(&two), "{two}");
    }
}
