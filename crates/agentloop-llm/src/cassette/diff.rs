//! The first difference between two JSON values, as a path (`$.messages[1].content`).

use serde_json::Value;

/// Where `recorded` and `got` first differ, and the two values there; `None` when equal.
pub fn first_difference(recorded: &Value, got: &Value) -> Option<Difference> {
    walk(recorded, got, "$".to_string())
}

#[derive(Debug, Clone, PartialEq)]
pub struct Difference {
    pub path: String,
    /// The recorded value at `path` (`None`: absent).
    pub recorded: Option<Value>,
    pub got: Option<Value>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "at {}: recorded {}, got {}",
            self.path,
            shown(self.recorded.as_ref()),
            shown(self.got.as_ref())
        )
    }
}

fn shown(value: Option<&Value>) -> String {
    const MAX: usize = 120;
    let Some(value) = value else {
        return "nothing".into();
    };
    let text = value.to_string();
    if text.chars().count() <= MAX {
        return text;
    }
    let cut: String = text.chars().take(MAX).collect();
    format!("{cut}…")
}

fn walk(recorded: &Value, got: &Value, path: String) -> Option<Difference> {
    match (recorded, got) {
        (Value::Object(a), Value::Object(b)) => {
            // Keys in a stable order: the recorded ones, then the new ones.
            for (key, value) in a {
                let here = format!("{path}.{key}");
                match b.get(key) {
                    Some(other) => {
                        if let Some(difference) = walk(value, other, here) {
                            return Some(difference);
                        }
                    }
                    None => return Some(differ(here, Some(value), None)),
                }
            }
            b.iter()
                .find(|(key, _)| !a.contains_key(*key))
                .map(|(key, value)| differ(format!("{path}.{key}"), None, Some(value)))
        }
        (Value::Array(a), Value::Array(b)) => {
            for (index, value) in a.iter().enumerate() {
                let here = format!("{path}[{index}]");
                match b.get(index) {
                    Some(other) => {
                        if let Some(difference) = walk(value, other, here) {
                            return Some(difference);
                        }
                    }
                    None => return Some(differ(here, Some(value), None)),
                }
            }
            b.get(a.len())
                .map(|value| differ(format!("{path}[{}]", a.len()), None, Some(value)))
        }
        (a, b) if a == b => None,
        (a, b) => Some(differ(path, Some(a), Some(b))),
    }
}

fn differ(path: String, recorded: Option<&Value>, got: Option<&Value>) -> Difference {
    Difference {
        path,
        recorded: recorded.cloned(),
        got: got.cloned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_first_difference_is_named_by_its_path() {
        let a = json!({"model": "m", "messages": [{"role": "user", "content": "Add 2 and 40"}]});
        assert_eq!(first_difference(&a, &a), None);
        let b = json!({"model": "m", "messages": [{"role": "user", "content": "Add 2 and 41"}]});
        let difference = first_difference(&a, &b).unwrap();
        assert_eq!(difference.path, "$.messages[0].content");
        assert_eq!(
            difference.to_string(),
            "at $.messages[0].content: recorded \"Add 2 and 40\", got \"Add 2 and 41\""
        );
        let longer = json!({"model": "m", "messages": [{"role": "user", "content": "Add 2 and 40"}, {"role": "user"}]});
        let difference = first_difference(&a, &longer).unwrap();
        assert_eq!(difference.path, "$.messages[1]");
        assert_eq!(difference.recorded, None);
        let extra = json!({"model": "m", "messages": a["messages"], "tools": []});
        assert_eq!(first_difference(&a, &extra).unwrap().path, "$.tools");
    }
}
