//! Turns a native tool-calling request into a plain chat: the tools and the JSON protocol go into
//! a system message, past calls and results become text.

use std::collections::HashMap;
use std::sync::Arc;

use agentloop_core::protocol::{ChatMessage, Role, ToolCall};
use agentloop_core::{ModelRequest, ToolChoice, ToolSpec};
use serde_json::Value;

const TOOL_FORM: &str = r#"{"action": "tool", "tool": "<tool name>", "parameters": {<the tool's arguments>}, "reasoning": "<why this call, in one sentence>"}"#;
const FINALIZE_FORM: &str = r#"{"action": "finalize", "answer": "<the answer for the user>"}"#;

/// The request for a model without tool calling: no `tools`, the system prompt first and
/// unchanged, then the protocol, then the conversation as text.
pub(crate) fn convert(request: &ModelRequest) -> ModelRequest {
    let finalize_only = request.tool_choice == ToolChoice::None;
    plain_chat(request, Some(protocol(&request.tools, finalize_only)))
}

/// Like [`convert`], for a call that asks for its own JSON (a plan, a review): the tools are
/// described for reference only, without the action protocol.
pub(crate) fn convert_without_protocol(request: &ModelRequest) -> ModelRequest {
    let reference = (!request.tools.is_empty()).then(|| {
        let mut text = String::from(
            "Tools the agent can use in its steps (for reference: they cannot be called in this \
             reply):\n",
        );
        text.push_str(&tool_list(&request.tools));
        text
    });
    plain_chat(request, reference)
}

fn plain_chat(request: &ModelRequest, second_system: Option<String>) -> ModelRequest {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    let mut rest = request.messages.iter();
    messages.extend(rest.next().cloned());
    messages.extend(second_system.map(|text| Arc::new(ChatMessage::system(text))));
    // Call ids are unique within a run, so one map serves the whole conversation.
    let mut names: HashMap<&str, &str> = HashMap::new();
    let mut results: Vec<String> = Vec::new();
    for message in rest {
        if message.role == Role::Tool {
            let id = message.tool_call_id.as_deref().unwrap_or_default();
            results.push(result_text(
                names.get(id).copied(),
                id,
                message.text_content(),
            ));
            continue;
        }
        // Results of one batch go out as one user turn: many chat templates insist that user
        // and assistant turns alternate.
        if !results.is_empty() {
            messages.push(Arc::new(ChatMessage::user(results.join("\n\n"))));
            results.clear();
        }
        if message.role == Role::Assistant && !message.tool_calls.is_empty() {
            for call in &message.tool_calls {
                names.insert(&call.id, &call.name);
            }
            messages.push(Arc::new(ChatMessage::assistant(calls_text(
                &message.tool_calls,
                message.text_content(),
            ))));
        } else {
            messages.push(message.clone());
        }
    }
    if !results.is_empty() {
        messages.push(Arc::new(ChatMessage::user(results.join("\n\n"))));
    }
    ModelRequest {
        model: request.model.clone(),
        messages,
        tools: Vec::new(),
        // Not sent without tools; kept for whoever reads the request.
        tool_choice: request.tool_choice,
        purpose: request.purpose,
        output: request.output.clone(),
    }
}

/// What the model is told after a reply that could not be read.
pub(crate) fn correction(error: &str, finalize_only: bool) -> String {
    let forms = if finalize_only {
        format!("exactly this form:\n{FINALIZE_FORM}")
    } else {
        format!("one of these forms:\n{TOOL_FORM}\n{FINALIZE_FORM}")
    };
    format!(
        "Your last reply could not be read: {error}. Answer again with exactly one JSON object \
         and nothing else (no Markdown, no text around it), in {forms}"
    )
}

fn protocol(tools: &[Arc<ToolSpec>], finalize_only: bool) -> String {
    let mut text = String::from(
        "Reply with exactly one JSON object and nothing else: no Markdown fences, no text before \
         or after it.\n\n",
    );
    if finalize_only {
        // The tools are left out: the model only needs to know that calling is over.
        text.push_str(&format!(
            "Calling tools is not possible now: the only reply allowed is the final answer, \
             written from what the conversation already holds:\n{FINALIZE_FORM}\n"
        ));
        return text;
    }
    if tools.is_empty() {
        text.push_str(&format!(
            "No tools are available, so the only possible reply is the final answer:\n\
             {FINALIZE_FORM}\n"
        ));
        return text;
    }
    text.push_str(&format!(
        "To call a tool (one call per reply; its result comes back in the next message):\n\
         {TOOL_FORM}\n\n\
         When you can answer the user's request, or cannot get further, give the final answer:\n\
         {FINALIZE_FORM}\n\n\
         \"tool\" must be one of the names below, and \"parameters\" must follow that tool's JSON \
         Schema.\n\nTools:\n"
    ));
    text.push_str(&tool_list(tools));
    text
}

/// Name, description and parameter schema of each tool.
fn tool_list(tools: &[Arc<ToolSpec>]) -> String {
    let mut text = String::new();
    for tool in tools {
        let description = tool.description.trim();
        text.push_str(&format!("\n- {}", tool.name));
        if !description.is_empty() {
            text.push_str(&format!(": {description}"));
        }
        text.push_str(&format!("\n  Parameters: {}\n", tool.parameters));
    }
    text
}

/// A past turn's calls as the JSON the model would have written, one object per line. The
/// reasoning goes with the first call only: it was written once for the whole turn.
fn calls_text(calls: &[ToolCall], reasoning: &str) -> String {
    let reasoning = reasoning.trim();
    calls
        .iter()
        .enumerate()
        .map(|(index, call)| {
            // Arguments that were not JSON are shown as the text they were.
            let parameters = serde_json::from_str::<Value>(&call.arguments)
                .unwrap_or_else(|_| Value::String(call.arguments.clone()));
            let mut line = format!(
                "{{\"action\": \"tool\", \"tool\": {}, \"parameters\": {parameters}",
                Value::String(call.name.clone())
            );
            if index == 0 && !reasoning.is_empty() {
                line.push_str(&format!(
                    ", \"reasoning\": {}",
                    Value::String(reasoning.to_string())
                ));
            }
            line.push('}');
            line
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn result_text(name: Option<&str>, id: &str, content: &str) -> String {
    match name {
        Some(name) => format!("Result of {name} ({id}):\n{content}"),
        None => format!("Result of tool call {id}:\n{content}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use agentloop_core::CallPurpose;
    use serde_json::json;

    fn spec(name: &str, description: &str, parameters: Value) -> Arc<ToolSpec> {
        Arc::new(ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: Arc::new(parameters),
        })
    }

    fn request(messages: Vec<ChatMessage>, tool_choice: ToolChoice) -> ModelRequest {
        ModelRequest {
            model: Some("small".into()),
            messages: messages.into_iter().map(Arc::new).collect(),
            tools: vec![
                spec(
                    "test__echo",
                    "Echoes the text.",
                    json!({"type": "object", "properties": {"text": {"type": "string"}}}),
                ),
                spec("test__add", "Adds two numbers.", json!({"type": "object"})),
            ],
            tool_choice,
            purpose: CallPurpose::Step,
            output: None,
        }
    }

    fn call(id: &str, name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    fn conversation() -> Vec<ChatMessage> {
        vec![
            ChatMessage::system("You are helpful."),
            ChatMessage::user("echo hi, then add"),
            ChatMessage::assistant_tool_calls(
                Some("Echo first.".into()),
                vec![call("call_1", "test__echo", r#"{"text":"hi"}"#)],
            ),
            ChatMessage::tool_result("call_1", "hi"),
            ChatMessage::assistant_tool_calls(
                None,
                vec![
                    call("call_2", "test__add", r#"{"a":1,"b":2}"#),
                    call("call_3", "test__add", "not json"),
                ],
            ),
            ChatMessage::tool_result("call_2", "3"),
            ChatMessage::tool_result("call_3", "{\"error\": \"not valid JSON\"}"),
        ]
    }

    #[test]
    fn the_system_prompt_stays_first_and_the_protocol_lists_the_tools() {
        let original = request(conversation(), ToolChoice::Auto);
        let converted = convert(&original);
        assert!(converted.tools.is_empty());
        assert_eq!(converted.model.as_deref(), Some("small"));
        assert!(Arc::ptr_eq(&converted.messages[0], &original.messages[0]));
        let protocol = &converted.messages[1];
        assert_eq!(protocol.role, Role::System);
        let text = protocol.text_content();
        assert!(text.contains("- test__echo: Echoes the text."), "{text}");
        assert!(
            text.contains(
                r#"Parameters: {"properties":{"text":{"type":"string"}},"type":"object"}"#
            ),
            "{text}"
        );
        assert!(text.contains("- test__add: Adds two numbers."), "{text}");
        assert!(text.contains(r#""action": "tool""#), "{text}");
        assert!(text.contains(r#""action": "finalize""#), "{text}");
    }

    #[test]
    fn calls_become_assistant_json_and_results_become_user_text() {
        let converted = convert(&request(conversation(), ToolChoice::Auto));
        let roles: Vec<Role> = converted.messages.iter().map(|m| m.role).collect();
        assert_eq!(
            roles,
            [
                Role::System,
                Role::System,
                Role::User,
                Role::Assistant,
                Role::User,
                Role::Assistant,
                Role::User
            ]
        );
        assert!(converted.messages.iter().all(|m| m.tool_calls.is_empty()));
        let first_call: Value = serde_json::from_str(converted.messages[3].text_content()).unwrap();
        assert_eq!(
            first_call,
            json!({"action": "tool", "tool": "test__echo", "parameters": {"text": "hi"},
                   "reasoning": "Echo first."})
        );
        assert_eq!(
            converted.messages[4].text_content(),
            "Result of test__echo (call_1):\nhi"
        );
        let lines: Vec<&str> = converted.messages[5].text_content().lines().collect();
        assert_eq!(lines.len(), 2);
        let second: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(second["parameters"], "not json");
        assert!(second.get("reasoning").is_none());
        let results = converted.messages[6].text_content();
        assert!(
            results
                .starts_with("Result of test__add (call_2):\n3\n\nResult of test__add (call_3):"),
            "{results}"
        );
    }

    #[test]
    fn a_result_whose_call_is_out_of_view_still_reads() {
        let messages = vec![
            ChatMessage::system("sys"),
            ChatMessage::tool_result("call_9", "late"),
            ChatMessage::user("next"),
        ];
        let converted = convert(&request(messages, ToolChoice::Auto));
        assert_eq!(
            converted.messages[2].text_content(),
            "Result of tool call call_9:\nlate"
        );
        assert_eq!(converted.messages[3].text_content(), "next");
    }

    #[test]
    fn the_forced_summary_allows_finalize_only() {
        let converted = convert(&request(conversation(), ToolChoice::None));
        let text = converted.messages[1].text_content();
        assert!(text.contains("Calling tools is not possible now"), "{text}");
        assert!(text.contains(r#""action": "finalize""#), "{text}");
        assert!(!text.contains(r#""action": "tool""#), "{text}");
        assert!(!text.contains("test__echo"), "{text}");
        assert_eq!(converted.tool_choice, ToolChoice::None);
    }

    #[test]
    fn without_tools_only_finalize_is_possible() {
        let mut original = request(vec![ChatMessage::system("sys")], ToolChoice::Auto);
        original.tools.clear();
        let text = convert(&original).messages[1].text_content().to_string();
        assert!(text.contains("No tools are available"), "{text}");
        assert!(!text.contains(r#""action": "tool""#), "{text}");
    }

    #[test]
    fn a_call_with_its_own_json_gets_the_tools_for_reference_only() {
        let mut original = request(conversation(), ToolChoice::None);
        original.purpose = CallPurpose::Plan;
        let converted = convert_without_protocol(&original);
        assert!(converted.tools.is_empty());
        assert_eq!(converted.purpose, CallPurpose::Plan);
        assert!(Arc::ptr_eq(&converted.messages[0], &original.messages[0]));
        let text = converted.messages[1].text_content();
        assert!(text.contains("for reference"), "{text}");
        assert!(text.contains("- test__echo: Echoes the text."), "{text}");
        assert!(!text.contains(r#""action""#), "{text}");
        assert!(converted.messages.iter().all(|m| m.role != Role::Tool));
        assert!(converted.messages.iter().all(|m| m.tool_calls.is_empty()));

        original.tools.clear();
        let converted = convert_without_protocol(&original);
        assert_eq!(converted.messages[1].text_content(), "echo hi, then add");
    }

    #[test]
    fn the_correction_names_the_error_and_the_forms() {
        let text = correction("the reply holds no JSON object", false);
        assert!(text.contains("the reply holds no JSON object"), "{text}");
        assert!(
            text.contains(TOOL_FORM) && text.contains(FINALIZE_FORM),
            "{text}"
        );
        let text = correction("x", true);
        assert!(
            !text.contains(TOOL_FORM) && text.contains(FINALIZE_FORM),
            "{text}"
        );
    }
}
