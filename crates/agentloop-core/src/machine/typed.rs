//! Typed answers: a run with an output schema ends with a JSON value valid against it.
//!
//! How the model is asked depends on the run's mode ([`OutputMode`]):
//! - `tool`: a `final_answer` tool, whose arguments are the schema, is offered beside the
//!   other tools; its call's arguments are the answer. A call that does not fit goes back as
//!   the tool's error, with the paths that are wrong.
//! - `native`: tool turns carry no format. When the model answers in prose, one more call,
//!   with no tools and the provider's structured output, turns the answer into the value
//!   (an answer that is already a valid value is taken as it is).
//! - `prompted`: the schema is in the instructions of every step; the value is read from the
//!   answer's text.
//!
//! Every call that can only answer (the forced summary, the formatting call, a repair) asks
//! for the value: natively in `native` mode, with the schema in its instruction otherwise. An
//! invalid value goes back to the model (a tool error, else a user message naming the paths
//! that are wrong) up to `retries` times; then the run fails `output_invalid`, its error
//! keeping the last invalid answer and what was wrong with it.

use std::sync::Arc;

use agentloop_protocol::{ChatMessage, ErrorCode, FinalizeReason, MessageKind, ToolCall};
use serde_json::{Value, json};

use super::{RunMachine, Step, state::Phase, text};
use crate::{
    llm::{CallPurpose, OutputFormat, ToolChoice, ToolSpec},
    output::{self, CompiledOutput, FINAL_ANSWER_TOOL, OutputMode, OutputSpec, TypedOutput},
};

/// The longest invalid answer kept in the run's error.
const KEPT_ANSWER_CHARS: usize = 2000;

/// What a typed run derives from its input: the compiled schema and the `final_answer` tool.
pub(super) struct Typed {
    pub spec: Arc<OutputSpec>,
    pub mode: OutputMode,
    pub retries: u32,
    compiled: CompiledOutput,
    /// Offered in `tool` mode.
    pub tool: Arc<ToolSpec>,
}

impl Typed {
    pub(super) fn new(output: &TypedOutput) -> Self {
        let spec = Arc::new(output.spec.clone());
        Typed {
            compiled: output::compiled(&spec),
            tool: Arc::new(ToolSpec {
                name: FINAL_ANSWER_TOOL.to_string(),
                description: format!(
                    "Give your final answer ({}) by calling this tool once you have everything \
                     you need; its arguments are the answer. Call it alone, not beside other \
                     tools.",
                    spec.name
                ),
                parameters: Arc::new(tool_parameters(&spec.schema)),
            }),
            mode: output.mode,
            retries: output.retries,
            spec,
        }
    }
}

/// The arguments of `final_answer`: the schema itself when it describes an object (tool
/// arguments are objects), else an object whose `value` is the answer.
fn tool_parameters(schema: &Value) -> Value {
    if schema.get("type").and_then(Value::as_str) == Some("object") {
        schema.clone()
    } else {
        json!({"type": "object", "properties": {"value": schema}, "required": ["value"]})
    }
}

/// Where an answer came from: how an invalid one is sent back.
enum Source<'a> {
    /// The arguments of a `final_answer` call.
    Tool(&'a ToolCall),
    /// The text of a step's reply (prose may still be formatted).
    Step,
    /// The text of a call that could only answer.
    Answer,
}

impl RunMachine {
    /// The `final_answer` tool, when the run offers it.
    pub(super) fn typed_tool(&self) -> Option<Arc<ToolSpec>> {
        self.typed
            .as_ref()
            .filter(|typed| typed.mode == OutputMode::Tool)
            .map(|typed| typed.tool.clone())
    }

    /// How a call asks for the typed answer, and the instruction it adds: the schema in the
    /// instructions of every call but the native ones and the tool turns of `tool` mode.
    pub(super) fn output_format(
        &self,
        purpose: CallPurpose,
        offer_tools: bool,
    ) -> (Option<OutputFormat>, Option<Arc<ChatMessage>>) {
        let Some(typed) = &self.typed else {
            return (None, None);
        };
        let answers_only = purpose == CallPurpose::Finalize || !offer_tools;
        if !matches!(purpose, CallPurpose::Step | CallPurpose::Finalize) {
            return (None, None);
        }
        let native = answers_only && typed.mode == OutputMode::Native;
        let prompted = !native && (answers_only || typed.mode == OutputMode::Prompted);
        let instruction = prompted.then(|| {
            Arc::new(ChatMessage::system(output::prompted_instruction(
                &typed.spec,
            )))
        });
        // Tool turns in `tool` and `native` mode: the text there is prose, not the value.
        let format = (answers_only || typed.mode == OutputMode::Prompted).then(|| OutputFormat {
            spec: typed.spec.clone(),
            native,
        });
        (format, instruction)
    }

    /// A step's reply in `tool` mode that calls `final_answer`: alone, it is the answer;
    /// beside other calls it is set aside (the others run, and the model answers after).
    /// `None` when the reply does not call it.
    pub(super) fn on_final_answer_call(
        &mut self,
        text: Option<String>,
        calls: &mut Vec<ToolCall>,
    ) -> Option<Step> {
        self.typed_tool()?;
        let at = calls
            .iter()
            .position(|call| call.name == FINAL_ANSWER_TOOL)?;
        if calls.len() > 1 {
            calls.retain(|call| call.name != FINAL_ANSWER_TOOL);
            return None;
        }
        let call = calls.remove(at);
        let value = serde_json::from_str::<Value>(&call.arguments)
            .map_err(|error| format!("the arguments are not JSON: {error}"))
            .map(|arguments| self.unwrap_tool_value(arguments));
        Some(self.take_answer(value, &call.arguments, Source::Tool(&call), None, text))
    }

    /// The arguments of `final_answer` as the answer (`value`, for a schema that is not an
    /// object).
    fn unwrap_tool_value(&self, arguments: Value) -> Value {
        let object_schema = self.typed.as_ref().is_some_and(|typed| {
            typed.spec.schema.get("type").and_then(Value::as_str) == Some("object")
        });
        match arguments {
            Value::Object(mut map) if !object_schema && map.len() == 1 => {
                map.remove("value").unwrap_or(Value::Null)
            }
            other => other,
        }
    }

    /// A step's answer in text.
    pub(super) fn on_typed_step_text(&mut self, text: String) -> Step {
        let value = output::read_value(&text);
        self.take_answer(value, &text, Source::Step, None, None)
    }

    /// The reply to a call that could only answer (the forced summary, formatting, a repair).
    pub(super) fn on_typed_answer_reply(
        &mut self,
        text: Option<&str>,
        reason: Option<FinalizeReason>,
    ) -> Step {
        let text = text.unwrap_or_default().to_string();
        let value = output::read_value(&text);
        self.take_answer(value, &text, Source::Answer, reason, None)
    }

    /// Validates an answer; a valid one ends the run, an invalid one goes back to the model or
    /// fails the run.
    fn take_answer(
        &mut self,
        value: Result<Value, String>,
        written: &str,
        source: Source<'_>,
        reason: Option<FinalizeReason>,
        text: Option<String>,
    ) -> Step {
        let Some(typed) = &self.typed else {
            return self.unexpected("a typed answer");
        };
        let problems = match &value {
            Ok(value) => output::violations(&typed.compiled, value),
            Err(error) => vec![error.clone()],
        };
        if let (Ok(value), true) = (value, problems.is_empty()) {
            return self.finish_typed(value);
        }
        let mode = typed.mode;
        // Prose where the value was not asked for yet: formatted by one more call, not a failure.
        let formatting = matches!(source, Source::Step) && mode != OutputMode::Prompted;
        if !formatting {
            self.state.typed.failures += 1;
            if self.state.typed.failures > typed.retries {
                return self.fail_invalid(written, &problems);
            }
        }
        let listed = problems.join("\n");
        match source {
            Source::Tool(call) => {
                let message = ChatMessage::assistant_tool_calls(text, vec![call.clone()]);
                self.push_message(MessageKind::ToolCall, message, Value::Null);
                let error = format!(
                    "Error: the answer does not match its schema; call {FINAL_ANSWER_TOOL} \
                     again with these fixed:\n{listed}"
                );
                let message = ChatMessage::tool_result(call.id.clone(), error);
                self.push_message(MessageKind::ToolResult, message, Value::Null);
                self.next_iteration()
            }
            Source::Step | Source::Answer => {
                self.push_message(
                    MessageKind::Dialogue,
                    ChatMessage::assistant(written.to_string()),
                    Value::Null,
                );
                let ask = if formatting {
                    String::from("Now give that answer as JSON that matches the schema.")
                } else {
                    format!(
                        "Your answer does not match the schema. Answer again with only the JSON \
                         value, with these fixed:\n{listed}"
                    )
                };
                self.push_message(MessageKind::Note, ChatMessage::user(ask), Value::Null);
                self.ask_for_output(reason)
            }
        }
    }

    /// One more call that can only answer, for the typed value.
    fn ask_for_output(&mut self, reason: Option<FinalizeReason>) -> Step {
        self.state.phase = Phase::AwaitingOutput { reason };
        Step::CallModel(self.output_request())
    }

    /// The call for the typed value: no tools, its format (native, or the schema in the
    /// instruction).
    pub(super) fn output_request(&self) -> crate::llm::ModelRequest {
        self.compose(Vec::new(), false, ToolChoice::None, CallPurpose::Finalize)
    }

    /// Ends the run with its value: the answer's text is the value's JSON, checked by the
    /// output guardrails first (a refused value is dropped again: `tripped`).
    fn finish_typed(&mut self, value: Value) -> Step {
        let text = value.to_string();
        self.state.typed.value = Some(value);
        self.deliver(text, false)
    }

    fn fail_invalid(&mut self, written: &str, problems: &[String]) -> Step {
        let name = self
            .typed
            .as_ref()
            .map(|typed| typed.spec.name.clone())
            .unwrap_or_default();
        let kept = text::bound(written, KEPT_ANSWER_CHARS);
        let message = format!(
            "the model gave no answer valid against the output schema \"{name}\" after {} \
             attempts; what was wrong with the last one:\n{}\nthe last answer:\n{kept}",
            self.state.typed.failures,
            problems.join("\n"),
        );
        self.fail(ErrorCode::OutputInvalid, message)
    }

    /// The metadata of the run's answer message: marks a typed value.
    pub(super) fn answer_metadata(&self) -> Value {
        match (&self.typed, &self.state.typed.value) {
            (Some(typed), Some(_)) => json!({"output": {"name": typed.spec.name}}),
            _ => Value::Null,
        }
    }
}
