//! Reading a JSON object out of a model's text. Models wrap JSON in code fences, talk around it,
//! or write JavaScript-ish objects (single quotes, trailing commas, comments, bare keys,
//! Python's `True`/`None`), so reading is tolerant; what is still wrong is reported in words a
//! model can act on. Used for plans, reviews and the JSON planner's actions.

use std::{convert::Infallible, sync::Arc};

use serde_json::Value;

/// Why no JSON object was taken from a text; `E` is why the caller refused one.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError<E> {
    #[error("the reply was empty")]
    Empty,
    #[error("the reply holds no JSON object (expected one object, starting with '{{')")]
    NoObject,
    #[error("the JSON object is not complete (a `}}` is missing)")]
    Incomplete,
    /// Not even the tolerant reading made sense of it; the strict parser's error is the one
    /// reported: JSON is the format the model was asked for.
    #[error("the JSON object is not valid JSON: {0}")]
    InvalidJson(#[source] Arc<serde_json::Error>),
    /// The caller's `accept` refused the object.
    #[error(transparent)]
    Refused(E),
}

/// The first JSON object of `text` that `accept` takes. Every complete top-level `{…}` is tried
/// in order (inside the first code fence, when there is one); when none is accepted, the
/// first problem is reported.
pub fn find_object<T, E>(
    text: &str,
    mut accept: impl FnMut(Value) -> Result<T, E>,
) -> Result<T, ObjectError<E>> {
    if text.trim().is_empty() {
        return Err(ObjectError::Empty);
    }
    let text = fenced_body(text)
        .filter(|body| body.contains('{'))
        .unwrap_or(text);
    let mut first_error = None;
    for candidate in objects(text) {
        let found = read_object(candidate)
            .map_err(|error| ObjectError::InvalidJson(Arc::new(error)))
            .and_then(|value| accept(value).map_err(ObjectError::Refused));
        match found {
            Ok(found) => return Ok(found),
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    Err(first_error.unwrap_or_else(|| {
        if text.contains('{') {
            ObjectError::Incomplete
        } else {
            ObjectError::NoObject
        }
    }))
}

/// The first JSON object in `text`, read leniently.
pub fn extract_object(text: &str) -> Result<Value, ObjectError<Infallible>> {
    find_object(text, Ok)
}

/// The inside of the first Markdown code fence (```json … ``` or ``` … ```), when there is one.
fn fenced_body(text: &str) -> Option<&str> {
    let open = text.find("```")?;
    let after_open = &text[open + 3..];
    // The rest of the opening line is the language tag.
    let body_start = after_open.find('\n').map_or(after_open.len(), |at| at + 1);
    let body = &after_open[body_start..];
    let end = body.find("```").unwrap_or(body.len());
    Some(&body[..end])
}

/// The top-level balanced `{…}` slices of `text`, in order. Braces inside strings (double or
/// single quoted) do not count; quotes outside an object are ordinary prose ("I'll …").
fn objects(text: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    let mut quote: Option<u8> = None;
    let mut escaped = false;
    for (at, byte) in text.bytes().enumerate() {
        if depth == 0 {
            if byte == b'{' {
                depth = 1;
                start = at;
            }
            continue;
        }
        if let Some(open) = quote {
            if escaped {
                escaped = false;
            } else if byte == b'\\' {
                escaped = true;
            } else if byte == open {
                quote = None;
            }
            continue;
        }
        match byte {
            b'"' | b'\'' => quote = Some(byte),
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    found.push(&text[start..=at]);
                }
            }
            _ => {}
        }
    }
    found
}

/// Strict JSON first; then JSON5 (single quotes, trailing commas, comments, bare keys) after
/// [`loosen`]. The strict error is the one reported: it is the format the model was asked for.
fn read_object(candidate: &str) -> Result<Value, serde_json::Error> {
    let strict = match serde_json::from_str::<Value>(candidate) {
        Ok(value) => return Ok(value),
        Err(error) => error,
    };
    json5::from_str::<Value>(&loosen(candidate)).map_err(|_| strict)
}

/// Fixes what even JSON5 refuses but models write: raw line breaks and tabs inside strings, and
/// Python's `True`, `False` and `None` outside them.
fn loosen(candidate: &str) -> String {
    let mut out = String::with_capacity(candidate.len() + 16);
    let mut quote: Option<char> = None;
    let mut escaped = false;
    let mut chars = candidate.char_indices().peekable();
    let mut previous: Option<char> = None;
    while let Some((at, ch)) = chars.next() {
        if let Some(open) = quote {
            match ch {
                _ if escaped => {
                    escaped = false;
                    out.push(ch);
                }
                '\\' => {
                    escaped = true;
                    out.push(ch);
                }
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                _ => {
                    if ch == open {
                        quote = None;
                    }
                    out.push(ch);
                }
            }
            previous = Some(ch);
            continue;
        }
        let starts_word = !previous.is_some_and(|p| p.is_alphanumeric() || p == '_' || p == '$');
        if ch.is_ascii_alphabetic() && starts_word {
            let mut end = at + ch.len_utf8();
            while let Some(&(next_at, next)) = chars.peek() {
                if !(next.is_alphanumeric() || next == '_' || next == '$') {
                    break;
                }
                end = next_at + next.len_utf8();
                chars.next();
            }
            let word = &candidate[at..end];
            out.push_str(match word {
                "True" => "true",
                "False" => "false",
                "None" => "null",
                _ => word,
            });
            previous = word.chars().last();
            continue;
        }
        if ch == '"' || ch == '\'' {
            quote = Some(ch);
        }
        out.push(ch);
        previous = Some(ch);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn objects_are_found_in_fences_and_prose() {
        let cases = [
            (r#"{"a": 1}"#, json!({"a": 1})),
            ("```json\n{\"a\": 1}\n```", json!({"a": 1})),
            ("```\n{\"a\": 1}\n```", json!({"a": 1})),
            (
                "Here you go:\n```\n{\"a\": {\"b\": [1, 2]}}\n```\nDone.",
                json!({"a": {"b": [1, 2]}}),
            ),
            (
                r#"Sure! {"text": "a } inside", "n": 2} hope that helps"#,
                json!({"text": "a } inside", "n": 2}),
            ),
            (
                r#"{'action': 'tool', 'parameters': {'q': "it's"},}"#,
                json!({"action": "tool", "parameters": {"q": "it's"}}),
            ),
            (
                "{'loud': True, 'n': None, // a comment\n bare: 'x'}",
                json!({"loud": true, "n": null, "bare": "x"}),
            ),
            (
                "{\"answer\": \"line one\nline two\"}",
                json!({"answer": "line one\nline two"}),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(extract_object(text).unwrap(), expected, "{text}");
        }
    }

    #[test]
    fn the_first_accepted_object_wins_else_the_first_problem_is_named() {
        let text = r#"The schema is {"type": "object"}. {"goal": "g"}"#;
        let goal = find_object(text, |value| {
            value["goal"]
                .as_str()
                .map(str::to_string)
                .ok_or_else(|| "no goal".to_string())
        });
        assert_eq!(goal.unwrap(), "g");
        let none = find_object(r#"{"a": 1} {"b": 2}"#, |value| {
            Err::<(), _>(format!("refused {value}"))
        });
        assert_eq!(none.unwrap_err().to_string(), r#"refused {"a":1}"#);
    }

    #[test]
    fn what_is_not_an_object_says_so() {
        assert!(
            extract_object("I will call the tool now.")
                .unwrap_err()
                .to_string()
                .contains("no JSON object")
        );
        assert!(
            extract_object("   ")
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(
            extract_object("{\"a\": }")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
        assert!(
            extract_object("{\"a\": 1")
                .unwrap_err()
                .to_string()
                .contains("not complete")
        );
    }
}
