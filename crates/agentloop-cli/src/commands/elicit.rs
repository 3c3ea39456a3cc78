//! `agentloop run`'s prompt for a question a running tool call asks (MCP elicitation): the
//! message, then one line per field of the requested schema (an empty line keeps the field's
//! default or leaves it out), or, in URL mode, the URL to open. The answer goes to the call
//! at once; the run did not pause.

use std::io::Write;

use agentloop::core::protocol::{
    Elicitation, ElicitationAction, ElicitationAnswer, ElicitationMode, ElicitationPurpose,
};
use serde_json::{Map, Value};

use crate::keyboard::Keyboard;

/// Reads the user's answer to `elicitation`; the end of input declines.
pub async fn answer(
    elicitation: &Elicitation,
    keyboard: &mut Keyboard,
) -> anyhow::Result<ElicitationAnswer> {
    let reply = |action, content| ElicitationAnswer {
        id: Some(elicitation.id.clone()),
        action,
        content,
    };
    eprintln!("? {} asks: {}", elicitation.server, elicitation.message);
    let question = match (elicitation.mode, elicitation.purpose) {
        (ElicitationMode::Url, _) => {
            eprintln!(
                "  open {}",
                elicitation.url.as_deref().unwrap_or("(no URL given)")
            );
            "done there? [y]es / [n]o (decline) / [c]ancel "
        }
        (ElicitationMode::Form, ElicitationPurpose::Sampling) => {
            "let it use the model? [y]es / [n]o (decline) / [c]ancel "
        }
        (ElicitationMode::Form, ElicitationPurpose::Question) => {
            "answer? [y]es / [n]o (decline) / [c]ancel "
        }
    };
    eprint!("{question}");
    std::io::stderr().flush()?;
    let line = keyboard.read_line().await?;
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => {}
        "c" | "cancel" => return Ok(reply(ElicitationAction::Cancel, None)),
        _ => {
            if line.is_empty() {
                eprintln!("(no answer: declined)");
            }
            return Ok(reply(ElicitationAction::Decline, None));
        }
    }
    if elicitation.mode == ElicitationMode::Url
        || elicitation.purpose == ElicitationPurpose::Sampling
    {
        return Ok(reply(ElicitationAction::Accept, None));
    }
    let mut content = Map::new();
    let empty = Map::new();
    let properties = elicitation
        .requested_schema
        .as_ref()
        .and_then(|schema| schema.get("properties"))
        .and_then(Value::as_object)
        .unwrap_or(&empty);
    for (name, property) in properties {
        loop {
            let kind = property
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("string");
            let choices = property
                .get("enum")
                .map(|choices| format!(" one of {choices}"))
                .unwrap_or_default();
            let default = property
                .get("default")
                .map(|default| format!(", default {default}"))
                .unwrap_or_default();
            let title = property
                .get("description")
                .or_else(|| property.get("title"))
                .and_then(Value::as_str)
                .map(|about| format!(" - {about}"))
                .unwrap_or_default();
            eprint!("  {name} ({kind}{choices}{default}){title}: ");
            std::io::stderr().flush()?;
            let line = keyboard.read_line().await?;
            if line.is_empty() {
                eprintln!("(no answer: declined)");
                return Ok(reply(ElicitationAction::Decline, None));
            }
            let text = line.trim();
            if text.is_empty() {
                break;
            }
            match typed(kind, text) {
                Some(value) => {
                    content.insert(name.clone(), value);
                    break;
                }
                None => eprintln!("  not a {kind}; try again"),
            }
        }
    }
    Ok(reply(
        ElicitationAction::Accept,
        Some(Value::Object(content)),
    ))
}

/// `text` as a value of the JSON Schema type `kind`.
fn typed(kind: &str, text: &str) -> Option<Value> {
    match kind {
        "integer" => text.parse::<i64>().ok().map(Value::from),
        "number" => text
            .parse::<f64>()
            .ok()
            .and_then(|number| serde_json::Number::from_f64(number).map(Value::Number)),
        "boolean" => match text.to_ascii_lowercase().as_str() {
            "y" | "yes" | "true" => Some(Value::Bool(true)),
            "n" | "no" | "false" => Some(Value::Bool(false)),
            _ => None,
        },
        _ => Some(Value::String(text.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_values_follow_the_schema() {
        assert_eq!(typed("integer", "42"), Some(Value::from(42)));
        assert_eq!(typed("integer", "4.2"), None);
        assert_eq!(typed("boolean", "yes"), Some(Value::Bool(true)));
        assert_eq!(typed("string", "Ada"), Some(Value::from("Ada")));
    }
}
