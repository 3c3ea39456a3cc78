//! JSON canonicalisation, so that `{"a":1,"b":2}` and `{"b":2, "a":1}` count as the same call.

use serde_json::Value;

/// A compact rendering of `value` with object keys sorted at every depth.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write(value, &mut out);
    out
}

fn write(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write(&map[key], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn key_order_does_not_matter_at_any_depth() {
        let a: Value =
            serde_json::from_str(r#"{"b": {"y": 1, "x": [2, {"q": 1, "p": 0}]}, "a": "s"}"#)
                .unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a": "s", "b": {"x": [2, {"p": 0, "q": 1}], "y": 1}}"#)
                .unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(
            canonical_json(&a),
            r#"{"a":"s","b":{"x":[2,{"p":0,"q":1}],"y":1}}"#
        );
    }

    #[test]
    fn different_values_stay_different() {
        assert_ne!(
            canonical_json(&json!({"a": 1})),
            canonical_json(&json!({"a": 2}))
        );
        assert_ne!(
            canonical_json(&json!([1, 2])),
            canonical_json(&json!([2, 1]))
        );
    }
}
