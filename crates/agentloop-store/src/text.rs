//! Free text (questions, answers, tool results, titles, user ids) stored exactly as given, on
//! both backends.
//!
//! PostgreSQL's `text` cannot hold U+0000 ("invalid byte sequence for encoding UTF8: 0x00"), yet
//! a tool or a model may well return one, and losing a step over it loses the record of a call
//! that did run. SQLite keeps such text as it is, so only PostgreSQL needs a way around.
//!
//! The way chosen is an escape applied at the store's boundary, on PostgreSQL only: U+0000 is
//! written as `ESCAPE` `'0'`, and `ESCAPE` itself as `ESCAPE ESCAPE`, so that the encoding is
//! injective (equality, uniqueness and `WHERE user_id = $1` behave as on the original text) and
//! reading undoes it exactly. `ESCAPE` is U+FDD0, a Unicode noncharacter "reserved for internal
//! use", which text from the outside world practically never contains: every other text is
//! stored unchanged, so what a person sees with `psql` is what was written. Migration 0004
//! doubles the escapes a database may already hold, so that old rows read back unchanged too.
//!
//! Rejected: `bytea` columns, which sqlx's `Any` driver would read back differently per backend
//! and which make the database unreadable to people; and `jsonb`, which refuses `\u0000` as
//! well. JSON columns need none of this: they are `text` holding serde_json's output, which
//! escapes every control character, U+0000 included, as `\u0000`.

use std::borrow::Cow;

use crate::dialect::Backend;

const ESCAPE: char = '\u{FDD0}';
/// What follows `ESCAPE` to stand for U+0000.
const NUL_MARK: char = '0';

/// `text` as `backend` stores it.
pub(crate) fn encode(backend: Backend, text: &str) -> Cow<'_, str> {
    if backend == Backend::Sqlite || !text.contains(['\0', ESCAPE]) {
        return Cow::Borrowed(text);
    }
    let mut encoded = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '\0' => {
                encoded.push(ESCAPE);
                encoded.push(NUL_MARK);
            }
            ESCAPE => {
                encoded.push(ESCAPE);
                encoded.push(ESCAPE);
            }
            c => encoded.push(c),
        }
    }
    Cow::Owned(encoded)
}

/// The text `encode` was given. An `ESCAPE` that starts no known pair (a row written by hand) is
/// kept as it is rather than failing the read.
pub(crate) fn decode(backend: Backend, stored: String) -> String {
    if backend == Backend::Sqlite || !stored.contains(ESCAPE) {
        return stored;
    }
    let mut decoded = String::with_capacity(stored.len());
    let mut chars = stored.chars().peekable();
    while let Some(c) = chars.next() {
        if c != ESCAPE {
            decoded.push(c);
            continue;
        }
        match chars.peek() {
            Some(&NUL_MARK) => {
                chars.next();
                decoded.push('\0');
            }
            Some(&ESCAPE) => {
                chars.next();
                decoded.push(ESCAPE);
            }
            _ => decoded.push(ESCAPE),
        }
    }
    decoded
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &[&str] = &[
        "",
        "plain text, ünïcödé and emoji 🦀",
        "\0",
        "a\0b\0\0c",
        "\u{FDD0}",
        "\u{FDD0}0",
        "\u{FDD0}\u{FDD0}0\0",
        "ends with an escape \u{FDD0}",
        "\0\u{FDD0}\0",
    ];

    #[test]
    fn every_text_round_trips_on_both_backends() {
        for backend in [Backend::Sqlite, Backend::Postgres] {
            for sample in SAMPLES {
                let stored = encode(backend, sample).into_owned();
                assert_eq!(decode(backend, stored), *sample, "{backend:?} {sample:?}");
            }
        }
    }

    #[test]
    fn postgres_never_receives_a_nul_and_distinct_texts_stay_distinct() {
        let encoded: Vec<String> = SAMPLES
            .iter()
            .map(|sample| encode(Backend::Postgres, sample).into_owned())
            .collect();
        for (sample, stored) in SAMPLES.iter().zip(&encoded) {
            assert!(!stored.contains('\0'), "{sample:?} → {stored:?}");
        }
        for (i, a) in encoded.iter().enumerate() {
            for b in &encoded[i + 1..] {
                assert_ne!(a, b);
            }
        }
    }

    #[test]
    fn text_without_nul_or_escape_is_stored_unchanged() {
        let text = "SELECT * FROM invoices WHERE note = '\\0' -- a backslash zero is no NUL";
        assert!(matches!(encode(Backend::Postgres, text), Cow::Borrowed(_)));
        assert_eq!(encode(Backend::Sqlite, "a\0b"), "a\0b");
    }

    #[test]
    fn a_lone_escape_written_by_hand_is_read_as_it_is() {
        assert_eq!(decode(Backend::Postgres, "x\u{FDD0}y".into()), "x\u{FDD0}y");
    }
}
