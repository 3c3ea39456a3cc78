//! Reading a JSON value the model is still writing: the object or array written so far, closed
//! where it was cut (`output_delta` events). What is cut inside a key, a number or a literal is
//! left out until it is whole; a string value being written is shown as far as it goes.

use agentloop_protocol::EventKind;
use serde_json::Value;

/// The text of one LLM call as it streams, read as the typed answer being written. A partial
/// is shown when the text grew by a tenth since the last one (at least `min_step` bytes), and
/// once the value is whole: the events of a run are saved, and a partial per chunk of a long
/// answer would store it over and over (this way the partials of an answer of N bytes hold
/// about 10 N).
#[derive(Debug)]
pub(crate) struct PartialOutput {
    text: String,
    shown: Option<Value>,
    shown_at: usize,
    min_step: usize,
}

impl Default for PartialOutput {
    fn default() -> Self {
        Self::new(128)
    }
}

impl PartialOutput {
    pub(crate) fn new(min_step: usize) -> Self {
        Self {
            text: String::new(),
            shown: None,
            shown_at: 0,
            min_step,
        }
    }

    /// Adds a chunk of text; an `output_delta` when the value written so far is worth showing.
    pub(crate) fn push(&mut self, delta: &str) -> Option<EventKind> {
        self.text.push_str(delta);
        let step = self.min_step.max(self.shown_at / 10);
        let (value, whole) = read(&self.text)?;
        if !whole && self.text.len() < self.shown_at + step {
            return None;
        }
        if self.shown.as_ref() == Some(&value) {
            return None;
        }
        self.shown = Some(value.clone());
        self.shown_at = self.text.len();
        Some(EventKind::OutputDelta { partial: value })
    }
}

#[derive(Clone, Copy)]
enum Frame {
    /// An object, and whether a key comes next (after `{` or `,`) rather than a value.
    Object {
        expects_key: bool,
    },
    Array,
}

impl Frame {
    fn closer(self) -> char {
        match self {
            Frame::Object { .. } => '}',
            Frame::Array => ']',
        }
    }
}

fn closers(stack: &[Frame]) -> String {
    stack.iter().rev().map(|frame| frame.closer()).collect()
}

/// The value of the object or array that starts at the first `{` or `[` of `text`, as far as
/// it is written; `None` before anything can be shown.
pub fn parse_partial(text: &str) -> Option<Value> {
    read(text).map(|(value, _)| value)
}

/// The value as far as it is written, and whether it is whole.
fn read(text: &str) -> Option<(Value, bool)> {
    let start = text.find(['{', '['])?;
    let body = &text[start..];
    let mut stack: Vec<Frame> = Vec::new();
    let mut in_string = false;
    let mut string_is_key = false;
    let mut escaped = false;
    // Where the text can be cut and closed: its length and the closers at that point.
    let mut safe: Option<(usize, String)> = None;
    for (at, c) in body.char_indices() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                if !string_is_key {
                    safe = Some((at + 1, closers(&stack)));
                }
            }
            continue;
        }
        match c {
            '{' | '[' => {
                stack.push(if c == '{' {
                    Frame::Object { expects_key: true }
                } else {
                    Frame::Array
                });
                safe = Some((at + 1, closers(&stack)));
            }
            '}' | ']' => {
                stack.pop();
                if stack.is_empty() {
                    return serde_json::from_str(&body[..=at])
                        .ok()
                        .map(|value| (value, true));
                }
                safe = Some((at + 1, closers(&stack)));
            }
            '"' => {
                in_string = true;
                string_is_key = matches!(stack.last(), Some(Frame::Object { expects_key: true }));
            }
            ':' => {
                if let Some(Frame::Object { expects_key }) = stack.last_mut() {
                    *expects_key = false;
                }
            }
            ',' => {
                // What comes before a comma is whole (a number, a literal).
                safe = Some((at, closers(&stack)));
                if let Some(Frame::Object { expects_key }) = stack.last_mut() {
                    *expects_key = true;
                }
            }
            _ => {}
        }
    }
    if in_string && !string_is_key {
        // A string value being written: shown as far as it goes (a cut escape left out).
        let mut written = body.to_string();
        if escaped {
            written.pop();
        }
        let candidate = format!("{written}\"{}", closers(&stack));
        if let Ok(value) = serde_json::from_str(&candidate) {
            return Some((value, false));
        }
    }
    let (cut, closing) = safe?;
    serde_json::from_str(&format!("{}{closing}", &body[..cut]))
        .ok()
        .map(|value| (value, false))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_prefix_of_an_object_reads_as_a_growing_value_or_nothing() {
        let whole = r#"{"title": "Disk \"full\"", "tags": ["ops", "urgent"], "n": 12, "ok": true, "inner": {"a": null}}"#;
        let mut last_keys = 0;
        for cut in 0..=whole.len() {
            if !whole.is_char_boundary(cut) {
                continue;
            }
            let Some(value) = parse_partial(&whole[..cut]) else {
                continue;
            };
            let keys = value.as_object().map_or(0, serde_json::Map::len);
            assert!(keys >= last_keys, "{cut}: {value}");
            last_keys = keys;
        }
        assert_eq!(
            parse_partial(whole),
            Some(serde_json::from_str(whole).unwrap_or_default())
        );
    }

    #[test]
    fn a_stream_shows_each_new_state_of_the_value_once() {
        let mut partial = PartialOutput::new(0);
        let shown: Vec<Value> = ["{\"ti", "tle\": \"Di", "sk", "\", \"n\": 1", "}"]
            .into_iter()
            .filter_map(|chunk| partial.push(chunk))
            .map(|event| match event {
                EventKind::OutputDelta { partial } => partial,
                _ => Value::Null,
            })
            .collect();
        assert_eq!(
            shown,
            [
                json!({}),
                json!({"title": "Di"}),
                json!({"title": "Disk"}),
                json!({"title": "Disk", "n": 1})
            ]
        );
    }

    #[test]
    fn a_long_answer_shows_few_partials_and_always_the_whole_value() {
        let items: Vec<String> = (0..400).map(|i| format!("item number {i}")).collect();
        let whole = json!({"items": items}).to_string();
        let mut partial = PartialOutput::default();
        let mut shown = Vec::new();
        for chunk in whole.as_bytes().chunks(7) {
            let chunk = std::str::from_utf8(chunk).unwrap_or_default();
            shown.extend(partial.push(chunk));
        }
        let stored: usize = shown
            .iter()
            .map(|event| serde_json::to_string(event).map_or(0, |text| text.len()))
            .sum();
        assert!(shown.len() < 60, "{} partials", shown.len());
        assert!(
            stored < 12 * whole.len(),
            "{stored} bytes for {}",
            whole.len()
        );
        assert_eq!(
            shown.last(),
            Some(&EventKind::OutputDelta {
                partial: serde_json::from_str(&whole).unwrap_or_default()
            })
        );
    }

    #[test]
    fn cut_values_show_what_is_whole() {
        assert_eq!(parse_partial("{"), Some(json!({})));
        assert_eq!(parse_partial(r#"{"ti"#), Some(json!({})));
        assert_eq!(parse_partial(r#"{"title""#), Some(json!({})));
        assert_eq!(
            parse_partial(r#"{"title": "Dis"#),
            Some(json!({"title": "Dis"}))
        );
        assert_eq!(parse_partial(r#"{"t": "a\"#), Some(json!({"t": "a"})));
        assert_eq!(parse_partial(r#"{"n": 12"#), Some(json!({})));
        assert_eq!(parse_partial(r#"{"n": 12,"#), Some(json!({"n": 12})));
        assert_eq!(parse_partial(r#"{"a": [1, 2"#), Some(json!({"a": [1]})));
        assert_eq!(parse_partial(r#"{"a": {"b": tr"#), Some(json!({"a": {}})));
        assert_eq!(
            parse_partial("```json\n[{\"x\": \"y"),
            Some(json!([{"x": "y"}]))
        );
        assert_eq!(parse_partial("no json yet"), None);
    }
}
