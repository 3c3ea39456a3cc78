//! Multi-row INSERTs: a streamed answer can bring hundreds of events in one step, and one round
//! trip per row would cost more than the step itself.

/// Stays under SQLite's historical limit of 999 bound parameters per statement.
const MAX_PARAMETERS: usize = 900;

/// How many rows of `width` values one statement may carry.
pub(crate) fn rows_per_statement(width: usize) -> usize {
    (MAX_PARAMETERS / width.max(1)).max(1)
}

/// `"{head} VALUES ($1, $2), ($3, $4) {tail}"` for `rows` rows of `width` values.
pub(crate) fn values_sql(head: &str, width: usize, rows: usize, tail: &str) -> String {
    use std::fmt::Write as _;
    let mut sql = String::with_capacity(head.len() + tail.len() + rows * width * 6 + 8);
    sql.push_str(head);
    sql.push_str(" VALUES ");
    let mut parameter = 0;
    for row in 0..rows {
        if row > 0 {
            sql.push_str(", ");
        }
        sql.push('(');
        for column in 0..width {
            if column > 0 {
                sql.push_str(", ");
            }
            parameter += 1;
            // Written in place: a `to_string` per placeholder was a tenth of a run's allocations.
            let _ = write!(sql, "${parameter}");
        }
        sql.push(')');
    }
    if !tail.is_empty() {
        sql.push(' ');
        sql.push_str(tail);
    }
    sql
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_numbered_across_rows() {
        assert_eq!(
            values_sql("INSERT INTO t (a, b)", 2, 3, "ON CONFLICT DO NOTHING"),
            "INSERT INTO t (a, b) VALUES ($1, $2), ($3, $4), ($5, $6) ON CONFLICT DO NOTHING"
        );
        assert_eq!(
            values_sql("INSERT INTO t (a)", 1, 1, ""),
            "INSERT INTO t (a) VALUES ($1)"
        );
    }

    #[test]
    fn statements_stay_under_the_parameter_limit() {
        assert_eq!(rows_per_statement(5), 180);
        assert!(rows_per_statement(11) * 11 <= MAX_PARAMETERS);
        assert_eq!(rows_per_statement(2000), 1);
    }
}
