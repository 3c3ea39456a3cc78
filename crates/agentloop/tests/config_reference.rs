//! docs/configuration.md lists exactly the keys `agentloop.toml` accepts.
//!
//! The keys are traced from `Config`'s own `Deserialize` impl: a deserializer that answers
//! every struct with all of its fields (the `fields` serde's derive hands it, which is the set
//! `deny_unknown_fields` accepts), every map with one entry and every option with a value, and
//! records the path of each field. serde-reflection cannot trace these types: `llm.provider`,
//! `llm.tool_calling`, `llm.tokenizer` and `policy.mutation_rate` read a string and refuse the
//! tracer's placeholder. Here a value that a type refuses is only a leaf: its key is recorded
//! before its value is asked for, and the trace is run again without it.
//!
//! The page's convention: a table is a heading holding `` `[a.b]` `` (a part in capitals or in
//! quotes, `NAME`, `"server.tool"`, stands for any name), and each key of it is a table row
//! whose first cell is `` `key` ``.

use std::collections::BTreeSet;
use std::fmt;

use agentloop::Config;
use serde::de::{self, DeserializeSeed, IntoDeserializer, MapAccess, SeqAccess, Visitor};

/// A map's entries, whatever their names, in a key's path.
const ANY: &str = "*";

#[test]
fn the_configuration_reference_lists_every_key_and_only_those() {
    let accepted = accepted_keys().expect("Config's keys can be traced");
    let page = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../docs/configuration.md"
    ))
    .expect("docs/configuration.md exists");
    let documented = documented_keys(&page);

    let undocumented: Vec<_> = accepted.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/configuration.md and the configuration's types disagree.\n\
         Accepted by agentloop.toml but not documented (add a row under the table's heading): \
         {undocumented:?}\n\
         Documented but not accepted (remove or rename the row): {unknown:?}"
    );
}

#[test]
fn the_trace_finds_the_keys_of_every_kind_of_table() {
    let accepted = accepted_keys().expect("Config's keys can be traced");
    for key in [
        "llm.provider",               // a string read by hand
        "agent.planning.enabled",     // a nested table
        "agent.budget.max_cost_usd",  // an option in a nested table
        "mcp_servers.*.env",          // a map of tables, and a map of strings in it
        "tools.*.on_unknown_outcome", // an enum
        "prices.*.input",             // a required field
        "policy.mutation_rate",       // a string read through `try_from`
        "telemetry.service_name",
    ] {
        assert!(accepted.contains(key), "{key} not traced: {accepted:?}");
    }
    assert!(
        !accepted.contains("base_url_origin"),
        "a #[serde(skip)] field is not a key"
    );
}

#[test]
fn the_page_convention_is_read_as_written() {
    let page = "## `[llm]`\n\n| key | type |\n| --- | --- |\n| `model` | string |\n\n\
                ### `[tools.\"server.tool\"]`\n\n| `timeout_s` | number |\n\n\
                ## Environment variables\n\n| `DATABASE_URL` | x |\n";
    let keys = documented_keys(page);
    let expected: BTreeSet<String> = ["llm", "llm.model", "tools", "tools.*.timeout_s"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(keys, expected);
}

/// Every key `agentloop.toml` accepts, as `table.key` paths with `*` for a map's entries.
fn accepted_keys() -> Result<BTreeSet<String>, TraceError> {
    let mut refused = BTreeSet::new();
    // Each pass either completes or finds one more leaf whose value its type refuses.
    for _ in 0..64 {
        let mut trace = Trace {
            keys: BTreeSet::new(),
            refused: refused.clone(),
        };
        match trace_config(&mut trace) {
            Ok(()) => return Ok(trace.keys),
            Err(TraceError {
                path: Some(path), ..
            }) if refused.insert(path.clone()) => {}
            Err(error) => return Err(error),
        }
    }
    Err(de::Error::custom("tracing Config did not settle"))
}

/// Keys documented on the page: each table heading, and each row's first cell under it.
fn documented_keys(page: &str) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let mut table: Option<String> = None;
    for line in page.lines() {
        if line.starts_with('#') {
            table = heading_table(line);
            // The table's own key and its parents' (`agent.planning`: `agent`, `planning`);
            // a map's entries (`mcp_servers.*`) are no key of their own.
            if let Some(path) = &table {
                let parts: Vec<&str> = path.split('.').collect();
                for end in 1..=parts.len() {
                    if parts[end - 1] != ANY {
                        keys.insert(parts[..end].join("."));
                    }
                }
            }
        } else if let (Some(table), Some(rest)) = (&table, line.strip_prefix("| `"))
            && let Some((key, _)) = rest.split_once("` |")
        {
            keys.insert(format!("{table}.{key}"));
        }
    }
    keys
}

/// `## `[mcp_servers.NAME]`` → `mcp_servers.*`; a heading without a table → `None`.
fn heading_table(line: &str) -> Option<String> {
    let start = line.find("`[")? + 2;
    let end = start + line[start..].find("]`")?;
    let mut parts = Vec::new();
    let mut part = String::new();
    let mut quoted = false;
    for c in line[start..end].chars() {
        match c {
            '"' => {
                quoted = !quoted;
                part.push(c);
            }
            '.' if !quoted => parts.push(std::mem::take(&mut part)),
            _ => part.push(c),
        }
    }
    parts.push(part);
    let parts: Vec<&str> = parts
        .iter()
        .map(|part| {
            let placeholder =
                part.starts_with('"') || part.chars().all(|c| c.is_ascii_uppercase() || c == '_');
            if placeholder { ANY } else { part.as_str() }
        })
        .collect();
    Some(parts.join("."))
}

// The tracer.

fn trace_config(trace: &mut Trace) -> Result<(), TraceError> {
    <Config as serde::Deserialize>::deserialize(Tracer {
        trace,
        path: String::new(),
    })
    .map(drop)
}

struct Trace {
    keys: BTreeSet<String>,
    /// Keys whose values their type refused in an earlier pass: left out of the tables.
    refused: BTreeSet<String>,
}

#[derive(Debug)]
struct TraceError {
    message: String,
    /// The innermost key whose value failed.
    path: Option<String>,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at {:?})", self.message, self.path)
    }
}

impl std::error::Error for TraceError {}

impl de::Error for TraceError {
    fn custom<T: fmt::Display>(message: T) -> Self {
        TraceError {
            message: message.to_string(),
            path: None,
        }
    }
}

/// Deserializes the value at `path`, answering each request with the simplest value.
struct Tracer<'t> {
    trace: &'t mut Trace,
    path: String,
}

impl Tracer<'_> {
    fn child(&mut self, key: &str) -> Tracer<'_> {
        let path = if self.path.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.path)
        };
        Tracer {
            trace: self.trace,
            path,
        }
    }
}

macro_rules! answer {
    ($($method:ident => $visit:ident($($value:expr)?)),* $(,)?) => {
        $(fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
            visitor.$visit($($value)?)
        })*
    };
}

impl<'de> de::Deserializer<'de> for Tracer<'_> {
    type Error = TraceError;

    answer! {
        deserialize_bool => visit_bool(false),
        deserialize_i8 => visit_i8(0), deserialize_i16 => visit_i16(0),
        deserialize_i32 => visit_i32(0), deserialize_i64 => visit_i64(0),
        deserialize_u8 => visit_u8(0), deserialize_u16 => visit_u16(0),
        deserialize_u32 => visit_u32(0), deserialize_u64 => visit_u64(0),
        deserialize_f32 => visit_f32(0.0), deserialize_f64 => visit_f64(0.0),
        deserialize_char => visit_char('x'),
        deserialize_str => visit_str(""), deserialize_string => visit_string(String::new()),
        deserialize_bytes => visit_bytes(&[]), deserialize_byte_buf => visit_byte_buf(Vec::new()),
        deserialize_unit => visit_unit(), deserialize_ignored_any => visit_unit(),
    }

    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, TraceError> {
        Err(de::Error::custom(format!(
            "{}: a self-describing value (untagged or flattened) cannot be traced; \
             teach this test its shape",
            self.path
        )))
    }

    fn deserialize_option<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_some(self)
    }

    fn deserialize_unit_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_unit()
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        visitor.visit_newtype_struct(self)
    }

    fn deserialize_seq<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_seq(OneElement { tracer: Some(self) })
    }

    fn deserialize_tuple<V: Visitor<'de>>(
        self,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: usize,
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        self.deserialize_seq(visitor)
    }

    /// A map (`[mcp_servers.NAME]`, `env = {...}`): one entry, its value at `path.*`.
    fn deserialize_map<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_map(Entries {
            tracer: self,
            keys: vec![ANY],
            value_of: None,
        })
    }

    /// A table: every field is a key, each answered in turn.
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let mut keys = Vec::new();
        for field in fields {
            let key = if self.path.is_empty() {
                field.to_string()
            } else {
                format!("{}.{field}", self.path)
            };
            if !self.trace.refused.contains(&key) {
                keys.push(*field);
            }
            self.trace.keys.insert(key);
        }
        visitor.visit_map(Entries {
            tracer: self,
            keys,
            value_of: None,
        })
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, TraceError> {
        let first = variants
            .first()
            .ok_or_else(|| de::Error::custom("an enum without variants"))?;
        visitor.visit_enum((*first).into_deserializer())
    }

    fn deserialize_identifier<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, TraceError> {
        visitor.visit_str("")
    }
}

/// The entries of a table or map: `keys` in turn, each value traced at `path.key`.
struct Entries<'t> {
    tracer: Tracer<'t>,
    keys: Vec<&'static str>,
    value_of: Option<&'static str>,
}

impl<'de> MapAccess<'de> for Entries<'_> {
    type Error = TraceError;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, TraceError> {
        if self.keys.is_empty() {
            return Ok(None);
        }
        let key = self.keys.remove(0);
        self.value_of = Some(key);
        let name = if key == ANY { "name" } else { key };
        seed.deserialize(name.into_deserializer()).map(Some)
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(
        &mut self,
        seed: V,
    ) -> Result<V::Value, TraceError> {
        let key = self.value_of.take().unwrap_or(ANY);
        let child = self.tracer.child(key);
        let path = child.path.clone();
        seed.deserialize(child).map_err(|mut error| {
            // The innermost key names the failure.
            error.path.get_or_insert(path);
            error
        })
    }
}

/// A sequence of one element, traced at the sequence's own path.
struct OneElement<'t> {
    tracer: Option<Tracer<'t>>,
}

impl<'de> SeqAccess<'de> for OneElement<'_> {
    type Error = TraceError;

    fn next_element_seed<T: DeserializeSeed<'de>>(
        &mut self,
        seed: T,
    ) -> Result<Option<T::Value>, TraceError> {
        match self.tracer.take() {
            Some(tracer) => seed.deserialize(tracer).map(Some),
            None => Ok(None),
        }
    }
}
