//! Reading TOML into a configuration with every problem of the file reported at once, in file
//! order, each with its line and key.
//!
//! serde stops at the first error, and the toml crate visits a table's keys in sorted order: a
//! file with three typos would be refused three times, and not starting from its first line.
//! So the file is parsed once into a tree that keeps each key's place in the text, deserialized,
//! and on an error the key or value at the error's place is taken out of the tree and the rest
//! deserialized again, until it goes through; the problems are then sorted by their place.

use std::ops::Range;

use serde::de::DeserializeOwned;
use toml::de::{DeTable, DeValue, Deserializer};

/// More than anyone fixes in one go; also bounds the work on a file made of errors.
const MAX_PROBLEMS: usize = 50;

/// One thing wrong in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Problem {
    /// Where in the text, when the parser said.
    span: Option<Range<usize>>,
    /// The key as written in a file (`agent.max_iterations`, `prices."gpt-4.1".input`), when
    /// the problem is one key's.
    key: Option<String>,
    message: String,
}

/// `text` read as a `T`, or every problem found in it, one after the other in file order,
/// rendered for people (line, key, what is wrong, the line of the file).
pub(super) fn read<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    let mut root =
        DeTable::parse(text).map_err(|error| error.to_string().trim_end().to_string())?;
    let mut problems: Vec<Problem> = Vec::new();
    while problems.len() < MAX_PROBLEMS {
        let error = match T::deserialize(Deserializer::from(root.clone())) {
            Ok(value) if problems.is_empty() => return Ok(value),
            Ok(_) => break,
            Err(error) => error,
        };
        let span = error.span();
        let key = span
            .as_ref()
            .and_then(|span| take_out(root.get_mut(), span, &[]));
        let found = key.is_some();
        problems.push(Problem {
            span,
            key,
            message: error.message().trim_end().to_string(),
        });
        if !found {
            // Nothing could be taken out: deserializing again would meet the same error.
            break;
        }
    }
    problems.sort_by_key(|problem| problem.span.as_ref().map_or(usize::MAX, |span| span.start));
    Err(render(text, &problems))
}

/// Takes out of `table` (at any depth) the entry whose key or value is at `span`, and returns
/// its key as written in a file. An array's element is not taken out alone: the whole array is,
/// under its key.
fn take_out(table: &mut DeTable<'_>, span: &Range<usize>, path: &[String]) -> Option<String> {
    let found = table
        .iter()
        .find(|(key, value)| {
            key.span() == *span || value.span() == *span || element_at(value.get_ref(), span)
        })
        .map(|(key, _)| key.get_ref().to_string());
    if let Some(name) = found {
        table.remove(name.as_str());
        return Some(key_path(path, &name));
    }
    for (key, value) in table.iter_mut() {
        let mut inner = path.to_vec();
        inner.push(key.get_ref().to_string());
        let taken = match value.get_mut() {
            DeValue::Table(nested) => take_out(nested, span, &inner),
            DeValue::Array(items) => items.iter_mut().enumerate().find_map(|(index, item)| {
                let DeValue::Table(nested) = item.get_mut() else {
                    return None;
                };
                let mut at = inner.clone();
                if let Some(last) = at.last_mut() {
                    // `[[x]]` tables are numbered for the reader: the key path says which.
                    *last = format!("{last}[{index}]");
                }
                take_out(nested, span, &at)
            }),
            _ => None,
        };
        if taken.is_some() {
            return taken;
        }
    }
    None
}

/// Whether `value` is an array with an element (not a table) at `span`.
fn element_at(value: &DeValue<'_>, span: &Range<usize>) -> bool {
    match value {
        DeValue::Array(items) => items
            .iter()
            .any(|item| item.span() == *span && !matches!(item.get_ref(), DeValue::Table(_))),
        _ => false,
    }
}

/// `path` and `name` joined as a key of the file: parts that are not bare keys quoted.
fn key_path(path: &[String], name: &str) -> String {
    path.iter()
        .map(String::as_str)
        .chain(std::iter::once(name))
        .map(|part| {
            let (bare, index) = match part.find('[') {
                Some(at) if part.ends_with(']') => part.split_at(at),
                _ => (part, ""),
            };
            let plain = !bare.is_empty()
                && bare
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
            if plain {
                format!("{bare}{index}")
            } else {
                format!("{bare:?}{index}")
            }
        })
        .collect::<Vec<_>>()
        .join(".")
}

fn render(text: &str, problems: &[Problem]) -> String {
    let mut lines = Vec::new();
    if problems.len() > 1 {
        lines.push(format!("{} problems, in file order:", problems.len()));
    }
    for problem in problems {
        let mut head = String::new();
        let place = problem.span.as_ref().map(|span| position(text, span.start));
        if let Some((line, column, _)) = &place {
            head.push_str(&format!("line {line}, column {column}: "));
        }
        if let Some(key) = &problem.key {
            head.push_str(&format!("{key}: "));
        }
        head.push_str(&problem.message);
        lines.push(head);
        if let Some((line, _, content)) = place {
            lines.push(format!("  {line} | {content}"));
        }
    }
    lines.join("\n")
}

/// Line and column (from 1, in characters) of byte `offset`, and the text of its line.
fn position(text: &str, offset: usize) -> (usize, usize, &str) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line_start = before.rfind('\n').map_or(0, |at| at + 1);
    let line = before.matches('\n').count() + 1;
    let column = before
        .get(line_start..)
        .map_or(0, |part| part.chars().count())
        + 1;
    let rest = text.get(line_start..).unwrap_or_default();
    let content = rest
        .split('\n')
        .next()
        .unwrap_or_default()
        .trim_end_matches('\r');
    (line, column, content)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn every_problem_is_reported_at_once_in_file_order_with_its_key_and_line() {
        let text = "[llm]\nmodle = \"x\"\n\n[agent]\nmax_iterations = \"ten\"\nplaning = true\n\n\
                    [agnet]\nx = 1\n\n[prices.\"gpt-4.1\"]\ninput = 1\noutput = 2\ncache_read = 1\n";
        let message = read::<Config>(text).unwrap_err();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines[0], "5 problems, in file order:", "{message}");
        let heads: Vec<&str> = lines
            .iter()
            .copied()
            .filter(|line| line.starts_with("line "))
            .collect();
        assert_eq!(heads.len(), 5, "{message}");
        let expected = [
            ("line 2, column 1: llm.modle: unknown field `modle`"),
            ("line 5, column 18: agent.max_iterations: invalid type: string \"ten\""),
            ("line 6, column 1: agent.planing: unknown field `planing`"),
            ("line 8, column 2: agnet: unknown field `agnet`"),
            ("line 14, column 1: prices.\"gpt-4.1\".cache_read: unknown field `cache_read`"),
        ];
        for (head, expected) in heads.iter().zip(expected) {
            assert!(
                head.starts_with(expected),
                "{head:?} should start with {expected:?}"
            );
        }
        assert!(message.contains("  2 | modle = \"x\""), "{message}");
    }

    #[test]
    fn one_problem_is_said_without_a_count_and_a_good_file_reads() {
        let message =
            read::<Config>("[agent]\nmax_iterations = 3\nmax_iteration = 4\n").unwrap_err();
        assert!(
            message.starts_with("line 3, column 1: agent.max_iteration: unknown field"),
            "{message}"
        );
        let config = read::<Config>("[agent]\nmax_iterations = 3\n").unwrap();
        assert_eq!(config.agent.max_iterations, 3);
    }

    #[test]
    fn problems_inside_arrays_of_tables_and_arrays_name_their_key() {
        let message = read::<Config>(
            "[mcp_servers.fs]\ncommand = \"x\"\nargs = [1]\n\n[mcp_servers.web]\ncomand = \"y\"\n",
        )
        .unwrap_err();
        assert!(message.contains("mcp_servers.fs.args: "), "{message}");
        assert!(message.contains("mcp_servers.web"), "{message}");
    }

    #[test]
    fn a_syntax_error_is_the_parser_s_message() {
        let message = read::<Config>("[llm\nmodel = 1\n").unwrap_err();
        assert!(message.contains("line 1"), "{message}");
    }
}
