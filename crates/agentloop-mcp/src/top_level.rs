//! The top-level `id` and `method` of a JSON-RPC message read byte by byte, without keeping the
//! message: enough to tell which request a message too large to keep answers.

use serde_json::Value;

/// Past this many bytes an id is not one a client sent (rmcp's are numbers).
const MAX_ID_BYTES: usize = 128;

/// What is known of a message's top-level object after the bytes fed so far. Only the object's
/// own fields count, never the fields of objects inside it, and they may come in any order (the
/// TypeScript SDK writes the id last).
#[derive(Debug, Default)]
pub(crate) struct TopLevel {
    /// Objects and arrays open around the current byte: 1 inside the message's own object.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// At depth 1, between the start of a field and its `:`.
    in_key: bool,
    /// The key of the current field, when short enough to be one that matters.
    key: Vec<u8>,
    key_too_long: bool,
    /// The raw JSON of the `id` value being read, then read.
    id: Id,
    has_method: bool,
}

#[derive(Debug, Default)]
enum Id {
    #[default]
    Unseen,
    Reading(Vec<u8>),
    Read(Vec<u8>),
    /// Too long, or not a string, number or null.
    Unusable,
}

impl TopLevel {
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.feed_byte(byte);
        }
    }

    /// The id of the request the message answers: none when it is a request or notification of
    /// its own (it has a `method`), or its id is missing or cannot be one.
    pub(crate) fn answered_id(&self) -> Option<Value> {
        let Id::Read(raw) = &self.id else {
            return None;
        };
        if self.has_method {
            return None;
        }
        let id: Value = serde_json::from_slice(raw).ok()?;
        (id.is_number() || id.is_string()).then_some(id)
    }

    fn feed_byte(&mut self, byte: u8) {
        if self.in_string {
            self.in_string_byte(byte);
            return;
        }
        match byte {
            b' ' | b'\t' | b'\r' | b'\n' => {}
            b'"' => {
                self.in_string = true;
                if self.depth == 1 && self.in_key {
                    self.key.clear();
                    self.key_too_long = false;
                } else {
                    self.push_id(byte);
                }
            }
            b'{' | b'[' => {
                if matches!(self.id, Id::Reading(_)) {
                    self.id = Id::Unusable;
                }
                self.depth = self.depth.saturating_add(1);
                if self.depth == 1 {
                    self.in_key = true;
                }
            }
            b'}' | b']' => {
                if self.depth == 1 {
                    self.end_value();
                }
                self.depth = self.depth.saturating_sub(1);
            }
            b':' if self.depth == 1 && self.in_key => {
                self.in_key = false;
                if !self.key_too_long {
                    match self.key.as_slice() {
                        b"id" if matches!(self.id, Id::Unseen) => {
                            self.id = Id::Reading(Vec::new());
                        }
                        b"method" => self.has_method = true,
                        _ => {}
                    }
                }
            }
            b',' if self.depth == 1 => {
                self.end_value();
                self.in_key = true;
            }
            _ => self.push_id(byte),
        }
    }

    fn in_string_byte(&mut self, byte: u8) {
        let closes = !self.escaped && byte == b'"';
        self.escaped = !self.escaped && byte == b'\\';
        if closes {
            self.in_string = false;
        }
        if self.depth == 1 && self.in_key {
            if !closes {
                if self.key.len() < 8 {
                    self.key.push(byte);
                } else {
                    self.key_too_long = true;
                }
            }
        } else {
            self.push_id(byte);
        }
    }

    /// Adds a byte of the value being read when it is the id's.
    fn push_id(&mut self, byte: u8) {
        if let Id::Reading(raw) = &mut self.id {
            if raw.len() < MAX_ID_BYTES {
                raw.push(byte);
            } else {
                self.id = Id::Unusable;
            }
        }
    }

    fn end_value(&mut self) {
        if let Id::Reading(raw) = &mut self.id {
            self.id = Id::Read(std::mem::take(raw));
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn id_of(message: &str) -> Option<Value> {
        let mut fields = TopLevel::default();
        fields.feed(message.as_bytes());
        fields.answered_id()
    }

    #[test]
    fn finds_the_id_of_an_answer_in_any_order() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":3,"result":{}}"#),
            Some(json!(3))
        );
        assert_eq!(
            id_of(r#"{ "result" : {"id": 1, "x": ["id", {"id": 2}]}, "id" : "r-1" }"#),
            Some(json!("r-1"))
        );
        assert_eq!(
            id_of(r#"{"error":{"message":"\"id\":4"},"id":"q\\\"","jsonrpc":"2.0"}"#),
            Some(json!("q\\\""))
        );
        // Cut short after the id: still known.
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":12,"result":{"content":[{"text":"01234"#),
            Some(json!(12))
        );
    }

    #[test]
    fn requests_notifications_and_odd_ids_answer_nothing() {
        assert_eq!(
            id_of(r#"{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage"}"#),
            None
        );
        assert_eq!(id_of(r#"{"method":"notifications/message"}"#), None);
        assert_eq!(id_of(r#"{"id":null,"error":{}}"#), None);
        assert_eq!(id_of(r#"{"id":{"a":1},"result":{}}"#), None);
        assert_eq!(id_of(r#"{"result":{"id":1}}"#), None);
        let long = format!(r#"{{"id":"{}","result":{{}}}}"#, "x".repeat(200));
        assert_eq!(id_of(&long), None);
        // An id not yet ended by `,` or `}` may still go on.
        assert_eq!(id_of(r#"{"result":{},"id":12"#), None);
    }
}
