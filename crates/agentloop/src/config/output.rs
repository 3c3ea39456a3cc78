//! `[agent] output_*`: the answer's JSON Schema read from its file, and the mode the model is
//! asked in when the file names none (the best the provider supports).

use std::path::Path;

use agentloop_core::{InvalidSetting, OutputMode, output::OutputSchemaSetting};
use agentloop_llm::{LlmConfig, Provider, ToolCalling};

/// The mode of `[agent] output_mode` when it is not set: the provider's structured output
/// where it has one (OpenAI Chat Completions, Responses, Anthropic), the schema in the
/// instructions for a model without tool calling (`llm.tool_calling = "json"`) and for the
/// scripted model, whose script writes the value as text.
pub(crate) fn default_mode(llm: &LlmConfig) -> OutputMode {
    if llm.tool_calling == ToolCalling::Json {
        return OutputMode::Prompted;
    }
    match llm.provider {
        Provider::OpenAi | Provider::OpenAiResponses | Provider::Anthropic => OutputMode::Native,
        Provider::Scripted => OutputMode::Prompted,
    }
}

/// Reads `[agent] output_schema` when it names a JSON file (relative to `base`, the
/// configuration file's directory): the settings then hold the schema itself.
pub(crate) fn read_schema_file(
    schema: &mut Option<OutputSchemaSetting>,
    base: &Path,
) -> Result<(), InvalidSetting> {
    let Some(OutputSchemaSetting::File(file)) = schema else {
        return Ok(());
    };
    let path = if file.is_relative() {
        base.join(&*file)
    } else {
        file.clone()
    };
    let key = "agent.output_schema";
    let text = std::fs::read_to_string(&path).map_err(|error| {
        InvalidSetting::new(
            key,
            format!("cannot read {key} file {}: {error}", path.display()),
        )
    })?;
    let value: serde_json::Value = serde_json::from_str(&text).map_err(|error| {
        InvalidSetting::new(
            key,
            format!("{key} file {} is not JSON: {error}", path.display()),
        )
    })?;
    let serde_json::Value::Object(object) = value else {
        return Err(InvalidSetting::new(
            key,
            format!(
                "{key} file {} must hold a JSON object (the schema)",
                path.display()
            ),
        ));
    };
    *schema = Some(OutputSchemaSetting::Inline(object));
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_schema_file_is_read_relative_to_the_configuration() {
        let dir = std::env::temp_dir().join(format!("agentloop-output-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ticket.json"), r#"{"type": "object"}"#).unwrap();
        let mut schema = Some(OutputSchemaSetting::File("ticket.json".into()));
        read_schema_file(&mut schema, &dir).unwrap();
        assert!(
            matches!(schema, Some(OutputSchemaSetting::Inline(ref o)) if o["type"] == "object")
        );
        let mut missing = Some(OutputSchemaSetting::File("nope.json".into()));
        let error = read_schema_file(&mut missing, &dir).unwrap_err();
        assert_eq!(error.key, "agent.output_schema");
        std::fs::write(dir.join("list.json"), "[1]").unwrap();
        let mut list = Some(OutputSchemaSetting::File("list.json".into()));
        assert!(read_schema_file(&mut list, &dir).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_schema_that_does_not_compile_is_refused_naming_where() {
        let text = "[agent]\noutput_schema = { type = \"object\", properties = { n = { type = \"integr\" } } }\n";
        let config = crate::Config::parse(text, crate::ConfigOrigin::Defaults).unwrap();
        let error = config.validate().unwrap_err();
        assert_eq!(error.key, "agent.output_schema");
        assert!(
            error.message.contains("/properties/n/type"),
            "{}",
            error.message
        );
        let good = "[agent]\noutput_schema = { type = \"object\" }\noutput_mode = \"tool\"\n";
        let config = crate::Config::parse(good, crate::ConfigOrigin::Defaults).unwrap();
        config.validate().unwrap();
        let settings = config.agent_settings().unwrap();
        assert_eq!(
            settings.typed_output().unwrap().unwrap().mode,
            OutputMode::Tool
        );
    }

    #[test]
    fn the_default_mode_is_the_best_the_provider_supports() {
        let mut llm = LlmConfig::default();
        assert_eq!(default_mode(&llm), OutputMode::Native);
        llm.provider = Provider::Anthropic;
        assert_eq!(default_mode(&llm), OutputMode::Native);
        llm.tool_calling = ToolCalling::Json;
        assert_eq!(default_mode(&llm), OutputMode::Prompted);
        llm.tool_calling = ToolCalling::Native;
        llm.provider = Provider::Scripted;
        assert_eq!(default_mode(&llm), OutputMode::Prompted);
    }
}
