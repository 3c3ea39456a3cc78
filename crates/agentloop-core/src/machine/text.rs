//! Text the loop writes for the model and the user: bounded tool output, tool error payloads, the
//! forced-summary instruction and the fallback answer built from execution records.

use agentloop_protocol::{FinalizeReason, ToolExecutionRecord, ToolStatus};
use serde_json::json;

/// `text` cut to at most `max_chars` characters, with a visible marker when cut.
pub fn bound(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text.to_string(),
        Some((cut, _)) => {
            let total = text.chars().count();
            format!(
                "{}\n…[truncated: showing {max_chars} of {total} characters; the full output is \
                 kept in the execution record]",
                &text[..cut]
            )
        }
    }
}

/// The tool message for a call that did not succeed: JSON the model can read and act on.
pub fn tool_error_message(status: ToolStatus, error: &str, hint: &str) -> String {
    json!({"status": status.as_str(), "error": error, "hint": hint}).to_string()
}

/// Whether a tool message is one [`tool_error_message`] wrote: a call that failed, was refused
/// or denied. Providers that mark failed results (Anthropic's `is_error`) read it from the
/// stored text, so the mark survives in any history.
pub fn is_tool_error_message(text: &str) -> bool {
    let Ok(serde_json::Value::Object(payload)) = serde_json::from_str(text) else {
        return false;
    };
    let failed = payload
        .get("status")
        .and_then(serde_json::Value::as_str)
        .is_some_and(|status| {
            status == ToolStatus::Error.as_str() || status == ToolStatus::Blocked.as_str()
        });
    failed && payload.contains_key("error")
}

/// The tool message for a call that repeats an earlier one.
pub fn duplicate_message(
    earlier_call_id: &str,
    earlier: Option<(ToolStatus, &str)>,
    max_chars: usize,
) -> String {
    let mut payload = json!({
        "status": "skipped",
        "note": format!(
            "Not executed again: this exact call (same tool, same arguments) was already made as \
             {earlier_call_id} in this run. Use its result instead of repeating the call, or \
             answer the user."
        ),
    });
    if let Some((status, text)) = earlier {
        payload["earlier_status"] = json!(status.as_str());
        payload["earlier_result"] = json!(bound(text, max_chars));
    }
    payload.to_string()
}

/// The answer a finalize tool's result gives: its `summary`, else its text.
pub fn finalize_answer(output: &crate::tool::ToolOutput) -> String {
    structured_field(output, "summary")
        .and_then(|summary| summary.as_str().map(str::to_string))
        .filter(|summary| !summary.trim().is_empty())
        .unwrap_or_else(|| output.text.clone())
}

/// The documents a result carries (`documents: [...]`), for the run's trace.
pub fn documents(output: &crate::tool::ToolOutput) -> Vec<serde_json::Value> {
    match structured_field(output, "documents") {
        Some(serde_json::Value::Array(documents)) => documents,
        _ => Vec::new(),
    }
}

/// A field of the result's JSON object: its structured form, else its text parsed as JSON.
fn structured_field(output: &crate::tool::ToolOutput, field: &str) -> Option<serde_json::Value> {
    let value = match &output.structured {
        Some(value) => value.clone(),
        None => serde_json::from_str(&output.text).ok()?,
    };
    value.get(field).cloned()
}

/// The note a side effect adds to the conversation (none for a bare refresh request).
pub fn side_effect_message(effect: &super::batch::SideEffectNote) -> Option<String> {
    let note = effect.note.as_deref()?;
    Some(if effect.failed {
        side_effect_error(note)
    } else {
        format!("[Side Effect] {note}")
    })
}

/// A side effect that failed; the run goes on.
pub fn side_effect_error(error: &str) -> String {
    format!("[Side Effect Error] {error}")
}

/// The instruction appended (after the stable system prompt and the conversation) to the forced
/// summary call; `note` adds what the summary must also say (a reviewer's reason or question).
pub fn finalize_instruction(reason: FinalizeReason, note: Option<&str>) -> String {
    let why = match reason {
        FinalizeReason::MaxIterations => "the step budget of this request is used up",
        FinalizeReason::DegenerateResponse => "the last reply was empty",
        FinalizeReason::DuplicateCalls => "the same tool calls were being repeated",
        FinalizeReason::ConsecutiveFailures => "several tool calls in a row failed",
        FinalizeReason::ReviewStop => "a review of the progress decided to stop",
        FinalizeReason::Budget => "the spending budget of this request (tokens or cost) is used up",
    };
    let mut instruction = format!(
        "Stop calling tools now: {why}. Write the final answer for the user from what this \
         conversation already holds: what was done, what was found, and what is still missing or \
         failed."
    );
    if let Some(note) = note {
        instruction.push(' ');
        instruction.push_str(note);
    }
    instruction
}

/// An answer built from the execution records, for when the model gives none.
pub fn fallback_answer(records: &[ToolExecutionRecord]) -> String {
    if records.is_empty() {
        return "I could not produce an answer to this request. Please try again, or rephrase it."
            .to_string();
    }
    let mut answer = String::from(
        "I could not write a final summary, so here is what I did for this request:\n",
    );
    answer.push_str(&records_digest(records));
    answer
}

/// One line per tool call: tool, status, duration and a one-line preview.
pub fn records_digest(records: &[ToolExecutionRecord]) -> String {
    let mut out = String::new();
    for record in records {
        let detail = match record.status {
            ToolStatus::Success => record.result.as_deref().unwrap_or_default(),
            _ => record.error.as_deref().unwrap_or_default(),
        };
        out.push_str(&format!(
            "- {} ({}, {} ms): {}\n",
            record.tool,
            record.status.as_str(),
            record.duration_ms,
            one_line(detail, 160)
        ));
    }
    out
}

/// The first `max_chars` characters of `text` on one line.
pub fn one_line(text: &str, max_chars: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match flat.char_indices().nth(max_chars) {
        None => flat,
        Some((cut, _)) => format!("{}…", &flat[..cut]),
    }
}

/// Why a run ended when its steps could not be saved, and whether an answer was lost with them.
pub fn store_lost(error: &str, answered: bool) -> String {
    let answer = if answered {
        "The model had answered, but the answer could not be saved, so it is not kept"
    } else {
        "No answer was written"
    };
    format!(
        "the run could not be saved, so it was stopped: {error}. {answer}; ask again once the \
         store is back (GET /healthz says when)"
    )
}

/// What the model reads when a tool it called left the catalog since the run started.
pub fn tool_unavailable(name: &str) -> String {
    format!("tool {name} is no longer available")
}

/// What the model reads when a tool panicked.
pub fn tool_crashed(why: &str) -> String {
    format!("the tool crashed: {why}")
}

/// What the model reads when a call ran out of time, with what the operator can change.
pub fn tool_timed_out(name: &str, limit: std::time::Duration) -> String {
    format!(
        "timed out after {} s (set [tools.\"{name}\"] timeout_s, or max_duration_s for a \
         call that reports progress, to allow longer)",
        limit.as_secs_f64()
    )
}

/// The error code of a call a crash cut off, whose outcome is unknown (`on_unknown_outcome`).
pub const OUTCOME_UNKNOWN: &str = "outcome_unknown";

/// Why a call a crash cut off was not run again.
pub fn outcome_unknown(tool: &str) -> String {
    format!(
        "{}: the process running this call of {tool} stopped before its result was saved; the \
         call may or may not have taken effect",
        OUTCOME_UNKNOWN
    )
}

/// What the model should do about a call of unknown outcome.
pub const OUTCOME_UNKNOWN_HINT: &str = "Check the current state (with a read-only tool if there \
    is one) before trying the call again; do not assume it succeeded or failed.";

/// What a human is asked about calls a crash cut off (`on_unknown_outcome = "ask"`).
pub fn outcome_unknown_question() -> String {
    "The process running these calls stopped before their results were saved: they may or may \
     not have taken effect. Approve to run them again, or deny to tell the model their outcome \
     is unknown."
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_keeps_short_text_and_marks_cuts() {
        assert_eq!(bound("hello", 10), "hello");
        let cut = bound(&"é".repeat(300), 100);
        assert!(cut.starts_with(&"é".repeat(100)));
        assert!(!cut.starts_with(&"é".repeat(101)));
        assert!(cut.contains("showing 100 of 300 characters"), "{cut}");
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\n  b\tc", 10), "a b c");
        assert_eq!(one_line("abcdef", 3), "abc…");
    }
}

#[cfg(test)]
mod error_message_tests {
    use super::*;

    #[test]
    fn error_payloads_are_recognised_and_other_results_are_not() {
        let failed = tool_error_message(ToolStatus::Error, "boom", "retry");
        assert!(is_tool_error_message(&failed));
        assert!(is_tool_error_message(&tool_error_message(
            ToolStatus::Blocked,
            "read-only run",
            "answer"
        )));
        assert!(!is_tool_error_message(&duplicate_message(
            "call_1", None, 100
        )));
        assert!(!is_tool_error_message(r#"{"status": "ok"}"#));
        assert!(!is_tool_error_message("the file says error"));
    }
}
