//! The error for a server behind `base_url` that does not speak the OpenAI API: a web page, a
//! proxy's error page, an API root without `/v1`. What the user needs is the URL that was
//! tried, the setting it came from, a few words of what came back (never a page of HTML) and
//! what to change.

/// Where the client sends its requests, and where that address came from.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// The Chat Completions URL: `base_url` + `/chat/completions`.
    pub url: String,
    pub base_url: String,
    /// The setting `base_url` came from, for people: `"[llm] base_url in agentloop.toml"`,
    /// `"the OPENAI_BASE_URL environment variable"`.
    pub origin: String,
}

/// What is said when the caller did not tell where `base_url` came from.
pub(crate) const UNKNOWN_ORIGIN: &str =
    "llm.base_url (or the OPENAI_BASE_URL environment variable)";

/// How much of a body the message keeps.
const EXCERPT_CHARS: usize = 160;

/// The message for an answer whose body is not OpenAI's JSON (`status` is its HTTP status);
/// `None` when the body is JSON, which the usual path reads (an OpenAI error object, or a
/// completion).
pub(crate) fn not_openai_message(endpoint: &Endpoint, status: u16, body: &str) -> Option<String> {
    if serde_json::from_str::<serde_json::Value>(body).is_ok() {
        return None;
    }
    let what = if looks_like_html(body) {
        "an HTML page"
    } else if body.trim().is_empty() {
        "an empty body"
    } else {
        "text"
    };
    let excerpt = excerpt(body);
    let shown = if excerpt.is_empty() {
        String::new()
    } else {
        format!(" ({excerpt:?})")
    };
    Some(format!(
        "{url} answered HTTP {status} with {what}{shown}, not an OpenAI-compatible reply. The URL \
         comes from {origin} ({base_url:?}), plus /chat/completions. {hint}",
        url = endpoint.url,
        origin = endpoint.origin,
        base_url = endpoint.base_url,
        hint = hint(&endpoint.base_url),
    ))
}

/// Most OpenAI-compatible servers serve the API under `/v1`; a root without it is the usual
/// mistake (`http://localhost:11434` for Ollama).
fn hint(base_url: &str) -> String {
    let trimmed = base_url.trim_end_matches('/');
    if trimmed.ends_with("/v1") {
        "Check that this is the API root of an OpenAI-compatible server (the part before \
         /chat/completions), not a web page or another service."
            .to_string()
    } else {
        format!(
            "OpenAI-compatible servers usually serve the API under /v1: is /v1 missing (try \
             {trimmed}/v1)?"
        )
    }
}

fn looks_like_html(body: &str) -> bool {
    let start: String = body.trim_start().chars().take(64).collect();
    let start = start.to_ascii_lowercase();
    start.starts_with("<!doctype")
        || start.starts_with("<html")
        || start.starts_with("<head")
        || start.starts_with("<body")
        || (start.starts_with('<') && body.contains("</"))
}

/// A few words of `body` on one line: an HTML page's title (or its text without tags, scripts
/// and styles), else the text itself, whitespace collapsed, cut at 160 characters.
pub(crate) fn excerpt(body: &str) -> String {
    let text = if looks_like_html(body) {
        title(body).unwrap_or_else(|| without_tags(body))
    } else {
        body.to_string()
    };
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match one_line.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &one_line[..cut]),
        None => one_line,
    }
}

fn title(html: &str) -> Option<String> {
    let lower = html.to_ascii_lowercase();
    let open = lower.find("<title")?;
    let start = open + lower[open..].find('>')? + 1;
    let end = start + lower[start..].find("</title")?;
    let title = html.get(start..end)?.trim();
    (!title.is_empty()).then(|| title.to_string())
}

/// The text of an HTML document: tags dropped, and what is inside `<script>` and `<style>`.
fn without_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len().min(4096));
    let mut rest = html;
    while let Some(open) = rest.find('<') {
        text.push_str(&rest[..open]);
        text.push(' ');
        let tag = &rest[open..];
        let lower: String = tag.chars().take(7).collect::<String>().to_ascii_lowercase();
        let skip_to = ["<script", "<style"]
            .iter()
            .find(|name| lower.starts_with(**name))
            .map(|name| format!("</{}", &name[1..]));
        let after = match skip_to {
            Some(closing) => tag
                .to_ascii_lowercase()
                .find(&closing)
                .and_then(|at| tag[at..].find('>').map(|end| at + end + 1)),
            None => tag.find('>').map(|end| end + 1),
        };
        match after {
            Some(after) => rest = &tag[after..],
            None => {
                rest = "";
                break;
            }
        }
    }
    text.push_str(rest);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(base_url: &str) -> Endpoint {
        Endpoint {
            url: format!("{base_url}/chat/completions"),
            base_url: base_url.to_string(),
            origin: "[llm] base_url in agentloop.toml".to_string(),
        }
    }

    const PAGE: &str = "<!DOCTYPE html>\n<html><head><title>404 Not Found</title>\
        <style>body { color: red }</style></head><body><h1>Not Found</h1>\
        <p>The requested URL was not found on this server.</p></body></html>";

    #[test]
    fn an_html_page_is_named_by_its_title_with_the_url_the_setting_and_v1() {
        let message = not_openai_message(&endpoint("http://127.0.0.1:8000"), 404, PAGE).unwrap();
        assert!(
            message.starts_with(
                "http://127.0.0.1:8000/chat/completions answered HTTP 404 with an HTML page \
                 (\"404 Not Found\")"
            ),
            "{message}"
        );
        assert!(
            message.contains("[llm] base_url in agentloop.toml"),
            "{message}"
        );
        assert!(
            message.contains("try http://127.0.0.1:8000/v1"),
            "{message}"
        );
        assert!(!message.contains('<'), "{message}");
    }

    #[test]
    fn a_page_without_a_title_is_shown_as_its_text_cut_short() {
        let page = format!(
            "<html><script>var x = '<b>';</script><body><p>{}</p></body></html>",
            "word ".repeat(200)
        );
        let shown = excerpt(&page);
        assert!(shown.starts_with("word word"), "{shown}");
        assert!(!shown.contains("var x"), "{shown}");
        assert_eq!(shown.chars().count(), EXCERPT_CHARS + 1);
    }

    #[test]
    fn json_bodies_take_the_usual_path_and_v1_roots_get_another_hint() {
        let base = endpoint("http://127.0.0.1:8000/v1");
        assert_eq!(not_openai_message(&base, 404, r#"{"error": "x"}"#), None);
        let message = not_openai_message(&base, 405, "Method Not Allowed").unwrap();
        assert!(
            message.contains("with text (\"Method Not Allowed\")"),
            "{message}"
        );
        assert!(
            message.contains("API root of an OpenAI-compatible server"),
            "{message}"
        );
        assert!(!message.contains("/v1/v1"), "{message}");
    }
}
