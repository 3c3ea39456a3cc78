//! The two SQL dialects the store speaks, and the one difference its queries have to bridge.

use std::borrow::Cow;

/// Which database a URL points at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Backend {
    Sqlite,
    Postgres,
}

impl Backend {
    /// The backend named by the scheme of `url`, if it is one the store supports.
    pub(crate) fn of_url(url: &str) -> Option<Backend> {
        let scheme = url.split_once(':')?.0.to_ascii_lowercase();
        match scheme.as_str() {
            "sqlite" => Some(Backend::Sqlite),
            "postgres" | "postgresql" => Some(Backend::Postgres),
            _ => None,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
        }
    }

    /// The queries are written with PostgreSQL's `$N`; SQLite gets `?N`, which it also binds by
    /// number, so a parameter used twice or out of order still receives the right value (a bare
    /// `?` would be bound by position).
    pub(crate) fn placeholders(self, sql: &str) -> Cow<'_, str> {
        match self {
            Backend::Postgres => Cow::Borrowed(sql),
            Backend::Sqlite => Cow::Owned(numbered_question_marks(sql)),
        }
    }
}

fn numbered_question_marks(sql: &str) -> String {
    // Copies the text between parameters whole: `$` is ASCII, so every cut is a char boundary.
    let bytes = sql.as_bytes();
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    for (at, &byte) in bytes.iter().enumerate() {
        if byte == b'$' && bytes.get(at + 1).is_some_and(u8::is_ascii_digit) {
            out.push_str(&sql[copied..at]);
            out.push('?');
            copied = at + 1;
        }
    }
    out.push_str(&sql[copied..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlite_gets_numbered_question_marks() {
        let sql = "UPDATE t SET a = $2, b = $10 WHERE id = $1 AND a <> $2";
        assert_eq!(
            Backend::Sqlite.placeholders(sql),
            "UPDATE t SET a = ?2, b = ?10 WHERE id = ?1 AND a <> ?2"
        );
        assert_eq!(Backend::Postgres.placeholders(sql), sql);
    }

    #[test]
    fn a_dollar_not_followed_by_a_digit_is_left_alone() {
        assert_eq!(
            Backend::Sqlite.placeholders("SELECT '$' || $1, $x"),
            "SELECT '$' || ?1, $x"
        );
        // Text around the parameters is kept whole, whatever its characters, to the last one.
        assert_eq!(
            Backend::Sqlite.placeholders("SELECT 'ü€', $1 || '€$' || $23$"),
            "SELECT 'ü€', ?1 || '€$' || ?23$"
        );
    }

    #[test]
    fn backends_are_recognised_by_scheme() {
        assert_eq!(Backend::of_url("sqlite://a.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("sqlite::memory:"), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("SQLite:a.db"), Some(Backend::Sqlite));
        assert_eq!(Backend::of_url("postgres://h/db"), Some(Backend::Postgres));
        assert_eq!(
            Backend::of_url("postgresql://h/db"),
            Some(Backend::Postgres)
        );
        assert_eq!(Backend::of_url("mysql://h/db"), None);
        assert_eq!(Backend::of_url("agentloop.db"), None);
    }
}
