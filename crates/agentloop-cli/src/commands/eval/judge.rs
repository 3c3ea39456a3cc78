//! The LLM judge of a case (`[case.expect.judge] rubric = "..."`): the question and the answer
//! given to a model (the configured one, or the judge's `model`) with the rubric, whose reply
//! must hold the verdict `{"pass": bool, "reason": "..."}`. Its tokens and cost are the judge's,
//! reported apart from the agent's. With the scripted model, the scenario's `review` answers it
//! (the call is made like a review: JSON for the loop, not text for a user).

use std::sync::Arc;

use agentloop::core::protocol::{ChatMessage, Usage};
use agentloop::core::{CallPurpose, Llm, ModelRequest, Pricing, ToolChoice, extract_object};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `[case.expect.judge]`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Judge {
    /// What a good answer does, in words.
    pub rubric: String,
    /// The judge's model; the configured one when absent.
    #[serde(default)]
    pub model: Option<String>,
}

/// What the judge said, and what it spent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub pass: bool,
    pub reason: String,
    pub tokens: u64,
    /// `None` when the judge's model has no price.
    pub cost_usd: Option<f64>,
}

/// Asks `llm` whether `answer` to `question` meets `judge`'s rubric. An error (the call failed,
/// no verdict in the reply) is a failed verdict saying why.
pub async fn verdict(
    llm: &Arc<dyn Llm>,
    pricing: &Pricing,
    judge: &Judge,
    question: &str,
    answer: &str,
) -> Verdict {
    let system = format!(
        "You are the judge of an assistant's answer. A good answer does this:\n\n{}\n\nReply \
         with one JSON object and nothing else: {{\"pass\": true, \"reason\": \"...\"}} when the \
         answer does, {{\"pass\": false, \"reason\": \"...\"}} when it does not (the reason in a \
         few words).",
        judge.rubric.trim()
    );
    let request = ModelRequest {
        model: judge.model.clone(),
        messages: vec![
            Arc::new(ChatMessage::system(system)),
            Arc::new(ChatMessage::user(format!(
                "<question>\n{question}\n</question>\n<answer>\n{answer}\n</answer>"
            ))),
        ],
        tools: Vec::new(),
        tool_choice: ToolChoice::None,
        purpose: CallPurpose::Review,
        output: None,
    };
    let reply = match llm.complete(&request, &mut |_| {}).await {
        Ok(reply) => reply,
        Err(error) => {
            return Verdict {
                reason: format!("the judge's model failed: {error}"),
                ..Verdict::default()
            };
        }
    };
    let usage: Usage = reply.usage.unwrap_or_default();
    let model = reply
        .model
        .clone()
        .or_else(|| judge.model.clone())
        .or_else(|| pricing.default_model.clone())
        .unwrap_or_default();
    let (pass, reason) = read(reply.text().unwrap_or_default());
    Verdict {
        pass,
        reason,
        tokens: usage.prompt_tokens + usage.completion_tokens,
        cost_usd: pricing.prices.cost(&model, &usage),
    }
}

/// The verdict in the judge's reply: `(pass, reason)`; no verdict fails, saying so.
fn read(reply: &str) -> (bool, String) {
    let Ok(object) = extract_object(reply) else {
        return (
            false,
            format!("the judge's reply holds no verdict: {reply:?}"),
        );
    };
    let reason = object
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    match object.get("pass").and_then(Value::as_bool) {
        Some(pass) => (pass, reason),
        None => (
            false,
            format!("the judge's verdict has no boolean `pass`: {object}"),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_verdict_is_read_and_anything_else_fails() {
        assert_eq!(
            read(r#"{"pass": true, "reason": "polite"}"#),
            (true, "polite".to_string())
        );
        assert_eq!(
            read("```json\n{\"pass\": false, \"reason\": \"rude\"}\n```"),
            (false, "rude".to_string())
        );
        for bad in ["yes", r#"{"pass": "yes"}"#, r#"{"verdict": true}"#] {
            let (pass, reason) = read(bad);
            assert!(!pass, "{bad}");
            assert!(reason.contains("judge"), "{reason}");
        }
    }
}
