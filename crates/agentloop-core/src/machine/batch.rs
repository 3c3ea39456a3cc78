//! The tool calls of one model reply: checked before anything runs, executed by the driver, and
//! resolved in the order the model issued them.

use std::time::Duration;

use agentloop_protocol::{ToolCall, ToolExecutionRecord, ToolStatus};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tool::ToolError;

/// A call the driver must execute.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ToolInvocation {
    pub call_id: String,
    /// Internal tool name.
    pub tool: String,
    pub arguments: Value,
    pub timeout: Duration,
}

/// What the driver reports for one call it was given.
#[derive(Debug, Clone)]
pub struct ToolResult {
    pub call_id: String,
    pub started_at: DateTime<Utc>,
    pub duration_ms: u64,
    pub outcome: ToolOutcome,
    /// The arguments the call ran with, when a hook rewrote them.
    pub arguments: Option<Value>,
    /// What after-call hooks reported, in their order.
    pub side_effects: Vec<SideEffectNote>,
    /// What the tool logged while it ran (MCP `notifications/message`).
    pub logs: Vec<agentloop_protocol::ToolLog>,
}

impl ToolResult {
    /// A result with no hook involved, of a call that started at `started_at` (the machine
    /// reads no clock: the driver says when).
    pub fn new(
        call_id: impl Into<String>,
        started_at: DateTime<Utc>,
        duration_ms: u64,
        outcome: ToolOutcome,
    ) -> Self {
        Self {
            call_id: call_id.into(),
            started_at,
            duration_ms,
            outcome,
            arguments: None,
            side_effects: Vec::new(),
            logs: Vec::new(),
        }
    }
}

/// How a call ended. The machine writes what the model reads of it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ToolOutcome {
    Success(crate::tool::ToolOutput),
    /// The tool reported a failure.
    Failed(ToolError),
    /// The call did not end within its time limit (and was stopped).
    TimedOut(Duration),
    /// The tool's task panicked; why.
    Crashed(String),
    /// The tool left the catalog since the run started.
    Unavailable,
    /// A hook skipped the call; the reason goes to the model.
    Skipped(String),
    /// A hook rewrote the arguments, and the call no longer passes the checks it passed before
    /// (schema, policy): it did not run.
    Refused(CallRefusal),
}

/// A call the pipeline does not let through: its status, what went wrong and what the model
/// can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallRefusal {
    pub status: ToolStatus,
    pub error: String,
    pub hint: String,
}

/// One side effect of a successful call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SideEffectNote {
    /// What happened (or, when `failed`, how it failed); `None` for a bare refresh request.
    pub note: Option<String>,
    /// The side effect failed; `note` says how.
    pub failed: bool,
    pub refresh: bool,
}

/// Where a call of the batch stands.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) enum SlotState {
    /// Passed every check; runs when the batch goes (after a human's approval, when any call
    /// of the batch needs one).
    Held {
        invocation: ToolInvocation,
        needs_approval: bool,
    },
    /// Executing in the driver: what it was given (run again, if it may be, after a crash).
    Running { invocation: ToolInvocation },
    /// Ended, with the tool message the model will read.
    Resolved {
        record: Box<ToolExecutionRecord>,
        /// Written as `null` when empty: a checkpoint's head leaves out a message that is the
        /// call's output (see [`Batch::leave_outputs_out`]).
        #[serde(serialize_with = "empty_as_null", deserialize_with = "null_as_empty")]
        message: String,
        /// Set only while a checkpoint's head is written: the output is left out of it, and
        /// saved once, as the call's record; restoring puts it back.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        output_saved: bool,
    },
    /// Repeats call `index` of this same batch; resolved when that one is.
    SameAs { index: usize },
    /// An `ask_user` call: resolved by the user's answer.
    Asking { question: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Slot {
    pub call: ToolCall,
    pub arguments: Value,
    pub state: SlotState,
    /// Its record was already handed over for persistence (executed calls, as they end).
    pub recorded: bool,
    /// What its after-call hooks reported.
    pub side_effects: Vec<SideEffectNote>,
    /// The answer, when a finalize tool succeeded.
    pub final_answer: Option<String>,
    /// Images the tool returned: the tool message carries them. The head keeps their
    /// references; the bytes stay in memory until the message is saved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub images: Vec<agentloop_protocol::Attachment>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct Batch {
    pub slots: Vec<Slot>,
}

impl SlotState {
    pub(crate) fn resolved(record: ToolExecutionRecord, message: String) -> SlotState {
        SlotState::Resolved {
            record: Box::new(record),
            message,
            output_saved: false,
        }
    }
}

/// The output a checkpoint's head left out of a resolved call: put back once it is written.
pub(crate) struct LeftOut {
    slot: usize,
    result: String,
    structured_result: Option<Value>,
    /// The tool message, when it was the output itself.
    message: Option<String>,
}

impl Batch {
    /// Takes the outputs of the calls that ended out of their slots, for a checkpoint's head:
    /// each is saved once, as its call's record. [`Batch::put_outputs_back`] undoes it.
    pub(crate) fn leave_outputs_out(&mut self) -> Vec<LeftOut> {
        let mut left = Vec::new();
        for (slot, state) in self
            .slots
            .iter_mut()
            .map(|slot| &mut slot.state)
            .enumerate()
        {
            let SlotState::Resolved {
                record,
                message,
                output_saved,
            } = state
            else {
                continue;
            };
            let Some(result) = record.result.take() else {
                continue;
            };
            *output_saved = true;
            left.push(LeftOut {
                slot,
                message: (*message == result).then(|| std::mem::take(message)),
                result,
                structured_result: record.structured_result.take(),
            });
        }
        left
    }

    pub(crate) fn put_outputs_back(&mut self, left: Vec<LeftOut>) {
        for out in left {
            if let Some(SlotState::Resolved {
                record,
                message,
                output_saved,
            }) = self.slots.get_mut(out.slot).map(|slot| &mut slot.state)
            {
                if let Some(taken) = out.message {
                    *message = taken;
                }
                record.result = Some(out.result);
                record.structured_result = out.structured_result;
                *output_saved = false;
            }
        }
    }

    pub fn running(&self) -> usize {
        self.slots
            .iter()
            .filter(|slot| matches!(slot.state, SlotState::Running { .. }))
            .count()
    }

    pub fn slot_mut(&mut self, call_id: &str) -> Option<&mut Slot> {
        self.slots.iter_mut().find(|slot| slot.call.id == call_id)
    }
}

fn empty_as_null<S: serde::Serializer>(text: &str, serializer: S) -> Result<S::Ok, S::Error> {
    if text.is_empty() {
        serializer.serialize_none()
    } else {
        serializer.serialize_str(text)
    }
}

fn null_as_empty<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    Ok(Option::<String>::deserialize(deserializer)?.unwrap_or_default())
}

/// A record for a call that ended without running.
pub(crate) fn refused_record(
    at: DateTime<Utc>,
    call: &ToolCall,
    arguments: &Value,
    iteration: u32,
    status: ToolStatus,
    error: String,
) -> ToolExecutionRecord {
    ToolExecutionRecord {
        call_id: call.id.clone(),
        iteration,
        tool: call.name.clone(),
        arguments: arguments.clone(),
        started_at: at,
        duration_ms: 0,
        status,
        result: None,
        structured_result: None,
        error: Some(error),
        cost_usd: None,
        logs: Vec::new(),
    }
}

/// Why the model's argument text is not arguments.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ArgumentsError {
    #[error("the arguments must be a JSON object, not {0}")]
    NotAnObject(&'static str),
    #[error("the arguments are not valid JSON ({0})")]
    InvalidJson(#[source] serde_json::Error),
}

/// Parses the model's argument text: empty means no arguments; anything else must be a JSON
/// object.
pub(crate) fn parse_arguments(raw: &str) -> Result<Value, ArgumentsError> {
    if raw.trim().is_empty() {
        return Ok(Value::Object(Default::default()));
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(other) => Err(ArgumentsError::NotAnObject(json_type(&other))),
        Err(error) => Err(ArgumentsError::InvalidJson(error)),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_arguments_are_an_empty_object() {
        assert_eq!(parse_arguments("  ").unwrap(), serde_json::json!({}));
    }

    #[test]
    fn non_objects_and_broken_json_are_named() {
        assert!(
            parse_arguments("[1]")
                .unwrap_err()
                .to_string()
                .contains("not an array")
        );
        assert!(
            parse_arguments("{\"a\":")
                .unwrap_err()
                .to_string()
                .contains("not valid JSON")
        );
    }
}
