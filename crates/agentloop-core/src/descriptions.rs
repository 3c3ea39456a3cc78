//! The tool descriptions file (seed 003's registry file): one `## server.tool` section per
//! tool, whose text extends that tool's description in the prompt.

use std::collections::BTreeMap;

/// The sections of a descriptions file: tool name to its extra text. Text before the first
/// section (a title, an introduction) is ignored.
pub fn parse_tool_descriptions(markdown: &str) -> BTreeMap<String, String> {
    let mut sections = BTreeMap::new();
    let mut current: Option<(String, Vec<&str>)> = None;
    for line in markdown.lines() {
        if let Some(heading) = line.strip_prefix("## ") {
            if let Some((tool, lines)) = current.take() {
                sections.insert(tool, lines.join("\n").trim().to_string());
            }
            current = Some((heading.trim().trim_matches('`').to_string(), Vec::new()));
        } else if let Some((_, lines)) = current.as_mut() {
            lines.push(line);
        }
    }
    if let Some((tool, lines)) = current {
        sections.insert(tool, lines.join("\n").trim().to_string());
    }
    sections.retain(|tool, text| !tool.is_empty() && !text.is_empty());
    sections
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_are_read_by_tool_name() {
        let file = "# Our tools\n\nIntro.\n\n## projects.update\nUpdates a project.\n\n- Use for X.\n\n## `kb.search`\nSearch first.\n## empty.tool\n\n";
        let sections = parse_tool_descriptions(file);
        assert_eq!(sections.len(), 2);
        assert_eq!(
            sections["projects.update"],
            "Updates a project.\n\n- Use for X."
        );
        assert_eq!(sections["kb.search"], "Search first.");
    }
}
